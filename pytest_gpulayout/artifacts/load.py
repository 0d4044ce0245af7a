"""``gpulayout check FILE`` / ``--cmd LINE`` for what is not a ``gpulayout.yaml``: read the artifact, build
its deployments, and say in one line what was recognised when nothing runs an engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpulayout.artifacts import commands, kubernetes
from pytest_gpulayout.artifacts.build import Found, build
from pytest_gpulayout.artifacts.deploy import check
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.manifest.load import Manifest

#: the manifest's own top-level keys: a YAML mapping with any of them is a manifest
_MANIFEST_KEYS = ("deployments", "version", "defaults")


def is_manifest(path: Path) -> bool:
    """Whether ``path`` is a ``gpulayout.yaml`` (else it is read as an artifact)."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return True  # the manifest reader says what is wrong with it
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return False
    return any(k in docs[0] for k in _MANIFEST_KEYS) and not kubernetes.is_kubernetes(docs[0])


def _need_machine(machine: str | None, where: str) -> str:
    if not machine:
        raise InputError("an artifact names no machine: give --machine (a snapshot, topo -m text, "
                         "preset:<name> or auto)", where=where)
    return machine


def load_command(line: str, machine: str | None) -> list[Found]:
    invs = commands.find_in_text(line, "--cmd")
    if not invs:
        raise InputError("runs no engine this tool reads (vllm serve, python -m vllm.entrypoints.openai.api_server, "
                         "python -m sglang.launch_server, llama-server)", where="--cmd")
    return build([(i, None) for i in invs], machine=_need_machine(machine, "--cmd"), path=Path.cwd() / "cmd")


def load_artifact(path: Path, machine: str | None) -> list[Found]:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text: neither a manifest nor an artifact", where=where) from None
    found: list[tuple[commands.Invocation, Any]] = []
    what = "text"
    if path.suffix in (".yaml", ".yml", ".json"):
        import yaml

        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            raise InputError(f"not valid YAML: {str(err).splitlines()[0]}", where=where) from None
        k8s, seen = kubernetes.find(docs, where)
        found.extend(k8s)
        kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, dict) and "kind" in d})
        what = (f"Kubernetes objects {', '.join(seen)}" if seen else
                f"kinds {', '.join(kinds)}" if kinds else "a YAML file that is neither a gpulayout manifest "
                "(no 'deployments') nor a Kubernetes object (no apiVersion/kind)")
    else:
        found.extend((i, None) for i in commands.find_in_text(text, path.name))
    if not found:
        raise InputError(f"found no engine command line in {what} (read: Pod, Deployment, StatefulSet, Job, "
                         "LeaderWorkerSet; shell text with vllm serve / python -m sglang.launch_server / "
                         "llama-server)", where=where)
    return build(found, machine=_need_machine(machine, where), path=path)


def as_manifest(found: list[Found], machine: str, path: Path) -> Any:
    """The ``Manifest`` the check verb runs, from what was found."""
    return Manifest(path=path, machine=machine, base_dir=path.parent, deployments=tuple(f.deployment for f in found),
                    notes=())


def add_deploy_findings(report: Any, found: list[Found]) -> None:
    """The ``deploy`` check's finding on each deployment that came from a Kubernetes object."""
    for f in found:
        finding = check(f)
        result = report.results.get(f.deployment.name)
        if finding is not None and result is not None:
            result.findings[finding.check] = finding


def add_sources(data: dict[str, Any], found: list[Found]) -> None:
    """``source`` and ``entry`` of each deployment in the JSON report."""
    for f in found:
        entry = data.get("deployments", {}).get(f.deployment.name)
        if isinstance(entry, dict):
            entry["source"] = f.source
            entry["entry"] = f.invocation.entry
