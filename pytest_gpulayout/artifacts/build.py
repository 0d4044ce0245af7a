"""An engine invocation found in an artifact as the ``Deployment`` the manifest loader builds: its flags
read with the engine's own parser (``Engine.parse_args``), the ones a manifest key owns turned into the key,
the rest kept as ``launch.args``, and the whole validated by ``manifest/load.py parse_manifest``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, image_release
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.manifest.fields import FLAG_KEYS, INTEGER_KEYS
from pytest_gpulayout.manifest.load import parse_manifest
from pytest_gpulayout.origin import Origin, Pod

#: flags that say where the engine listens or how its nodes meet: the artifact's business, not a check's
_DROPPED = ("--host", "--port", "--nnodes", "--node-rank", "--dist-init-addr", "--data-parallel-address",
            "--data-parallel-rpc-port", "--data-parallel-size-local", "--headless", "--data-parallel-start-rank",
            "--served-model-name", "--load-format")


@dataclass(frozen=True)
class Found:
    """A deployment found in an artifact, with where it stands and what the artifact says around it."""

    deployment: Deployment
    source: str
    invocation: Invocation
    #: the pod around it (Kubernetes): what the ``deploy`` check reads; None for bare command lines
    pod: Any = None
    machine: str = ""
    #: how the command line spans nodes: ``--nnodes`` (None: not given or not a number), the data-parallel
    #: ranks on this node (``--data-parallel-size-local``), the address the nodes meet at
    nodes: int | None = None
    local_dp: int | None = None
    master: str | None = None
    #: the engine's release image it runs (``vllm/vllm-openai:v0.10.1``), and the release its tag names (None:
    #: the tag names none, so the checks judged another release than the one that will run)
    image: str = ""
    image_release: str | None = None


@dataclass(frozen=True)
class Spread:
    """What a command line says about the nodes it spans (read before the flags are dropped)."""

    nodes: int | None = None
    local_dp: int | None = None
    master: str | None = None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def spread(inv: Invocation) -> Spread:
    engine = get_engine(inv.engine)
    parsed = engine.cli.parse_args(list(inv.args))
    table, flags = parsed.table, engine.cli.flags

    def value(spelling: str) -> str | None:
        return parsed.value(table.canonical(spelling) or spelling) if spelling else None

    master = value(flags.node_address)
    if master is not None:
        master = master.rsplit(":", 1)[0] if master.count(":") == 1 else master
    return Spread(_int(value(flags.nnodes)), _int(value(flags.data_parallel_size_local)),
                  master or inv.env.get("MASTER_ADDR"))


def _number(text: str | None, flag: str, source: str) -> int | float | str | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def manifest_entry(inv: Invocation) -> dict[str, Any]:
    """The manifest deployment mapping for ``inv`` (an ``InputError`` naming ``inv.source`` for a command
    line the engine itself would refuse)."""
    engine = get_engine(inv.engine)
    parsed = engine.cli.parse_args(list(inv.args))
    error = parsed.usage_error()
    if error is not None:
        prog = parsed.table.prog or inv.entry
        raise InputError(f"{prog}: error: {error}", where=inv.source)
    table = parsed.table
    flags = engine.cli.flags
    entry: dict[str, Any] = {"engine": engine.name}
    owned: dict[str, str] = {}
    for key in FLAG_KEYS:
        spelling = getattr(flags, key)
        if spelling:
            owned[table.canonical(spelling) or spelling] = key
    model_flag = table.canonical(flags.model) or flags.model
    model = parsed.value(model_flag) or (parsed.positionals[0] if parsed.positionals else None)
    if model is None:
        raise InputError(f"{inv.entry}: no model: give it as the first argument or with {flags.model}",
                         where=inv.source)
    entry["model"] = model
    dropped = {table.canonical(f) or f for f in _DROPPED} | {model_flag}
    rest: list[str] = []
    for g in parsed.given:
        if g.flag in owned:
            key = owned[g.flag]
            value = _number(g.value, g.flag, inv.source)
            entry[key] = int(value) if key in INTEGER_KEYS and isinstance(value, float) else value
        elif g.flag in ("--enable-expert-parallel", "-ep"):
            entry["enable_expert_parallel"] = True
        elif g.flag in dropped:
            continue
        else:
            rest.append(g.flag if g.value is None else f"{g.flag}={g.value}")
    env = {k: v for k, v in inv.env.items() if isinstance(v, str)}
    visible = env.pop("CUDA_VISIBLE_DEVICES", None)  # the manifest's gpus key, where it lists them all
    n = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        n *= int(entry.get(key, 1)) if str(entry.get(key, 1)).isdigit() else 1
    if visible and all(p.strip().isdigit() for p in visible.split(",")) and len(visible.split(",")) == n:
        entry["gpus"] = [int(p) for p in visible.split(",")]
    entry["launch"] = {"args": rest, "env": env}
    return entry


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(source: str, taken: set[str]) -> str:
    base = _SAFE.sub("-", source).strip("-.") or "deployment"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _tagged(inv: Invocation) -> tuple[str, str | None] | None:
    """``(image, release its tag names or None)`` when ``inv`` runs in its own engine's release image."""
    found = image_release(inv.image) if inv.image else None
    return (inv.image, found[1]) if found is not None and found[0] == inv.engine else None


def build(invocations: Sequence[tuple[Invocation, Any]], *, machine: str, path: Path,
          version: str | None = None) -> list[Found]:
    """Each invocation as a validated ``Deployment`` named after where it stands."""
    taken: set[str] = set()
    entries: dict[str, dict[str, Any]] = {}
    by_name: dict[str, tuple[Invocation, Any, tuple[str, str | None] | None]] = {}
    for inv, pod in invocations:
        if not get_engine(inv.engine).cli.command_line_keys:
            continue  # its flags are not read back into manifest keys yet (llama.cpp)
        entry = manifest_entry(inv)  # a worker's command line is read (its typos fail) ...
        if getattr(pod, "role", "") == "worker":
            continue  # ... but it is the leader's engine, not one of its own
        tagged = _tagged(inv)
        if version:
            entry["engine_version"] = version
        elif tagged is not None and tagged[1]:
            entry["engine_version"] = tagged[1]  # the image runs that release: its rules are the ones to judge
        name = safe_name(inv.source, taken)
        entries[name] = entry
        by_name[name] = (inv, pod, tagged)
    if not entries:
        return []
    data: Mapping[str, Any] = {"version": 1, "machine": machine, "deployments": entries}
    manifest = parse_manifest(data, path=path, where=str(path))
    out = []
    for dep in manifest.deployments:
        inv, pod, tagged = by_name[dep.name]
        s = spread(inv)
        image, release = tagged or ("", None)
        origin = Origin(file=path, source=inv.source, entry=inv.entry, pod=pod if isinstance(pod, Pod) else None,
                        nodes=s.nodes, local_dp=s.local_dp, master=s.master, image=image, image_release=release)
        out.append(Found(replace(dep, name=inv.source, origin=origin), inv.source, inv, pod, machine, s.nodes,
                         s.local_dp, s.master, image, release))
    return out
