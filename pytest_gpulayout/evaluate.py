"""Run the checks for deployments and collect their findings: the one place pytest, the CLI and the
planner share, so all three give the same verdicts."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Engine, Subject, resolve
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Finding, Status, skipped, verdict_of, worst
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.facts import NOT_LAUNCHED, StartupFacts
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.startup import run_startup
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.rules.balance import check_balance
from pytest_gpulayout.rules.cluster import check_cluster
from pytest_gpulayout.rules.heads import check_heads
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool
from pytest_gpulayout.rules.links import check_links
from pytest_gpulayout.rules.placement import check_placement

CheckFn = Callable[[Subject], Finding]

#: The static checks, in the order they are reported. ``startup`` is separate: it launches an engine.
STATIC_CHECKS: dict[str, CheckFn] = {
    "placement": check_placement,
    "heads": check_heads,
    "balance": check_balance,
    "links": check_links,
    "kv_pool": check_kv_pool,
    "cluster": check_cluster,  # multi-node machines; skip on one host
}
ALL_CHECKS = (*STATIC_CHECKS, "startup")


def expected_checks(dep: Deployment) -> tuple[str, ...]:
    """The checks a deployment is judged by: its engine's (llama.cpp has its own table) and ``startup``."""
    return (*(get_engine(dep.engine).checks or STATIC_CHECKS), "startup")


def engine_of(name: str) -> Engine:
    """The engine object a deployment's ``engine`` names (the planner asks it instead of testing names)."""
    return get_engine(name)


def subject_of(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST) -> Subject:
    """``dep`` resolved once (``engine.Subject``): its engine object from the registry, its release, knobs,
    placement and pool predictions, for every check to read."""
    return resolve(dep, machine, model, host, engine=get_engine(dep.engine))


def evaluate(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST) -> dict[str, Finding]:
    """Every static check's finding for one deployment, keyed by check name.

    A value the checks find impossible for this model (e.g. ``kv_cache_dtype: fp8_ds_mla`` on a
    non-MLA model) is bad input: it is re-raised naming the manifest and the deployment's key.
    """
    try:
        subject = subject_of(dep, machine, model, host)
        # an engine with checks of its own (llama.cpp) answers under the same check names
        checks = subject.engine.checks or STATIC_CHECKS
        # and may amend a shared rule's finding (Engine.amend_check) without replacing the table
        findings = {name: subject.engine.amend_check(name, subject, fn(subject)) for name, fn in checks.items()}
    except InputError as err:
        if err.where and dep.manifest_path and err.where != str(dep.manifest_path):
            raise  # the error is in another file (a model's config.json): it already names it
        raise InputError(err.message, where=dep.manifest_path,
                         key=f"deployments.{dep.name}" + (f".{err.key}" if err.key else "")) from None
    heads = findings["heads"]
    pool = findings["kv_pool"]
    if heads.status is Status.FAIL and pool.status in (Status.PASS, Status.WARN):
        # A pool for a layout the engine refuses to build is not a verdict; keep the numbers, not the pass.
        reference = pool.message.split(": ", 1)[-1]
        findings["kv_pool"] = Finding(pool.check, Status.SKIP, f"{dep.name}: not judged: the engine refuses this "
                                      f"layout (see heads). Prediction for reference: {reference}", pool.facts)
    return findings


def load_models(deployments: Iterable[Deployment]) -> dict[str, ModelSpec]:
    """Each deployment's model spec; a bad model reference names the manifest and the key."""
    models: dict[str, ModelSpec] = {}
    for dep in deployments:
        try:
            models[dep.name] = load_model(dep.model, dep.base_dir)
        except InputError as err:
            where = err.where if err.where and err.where != str(dep.manifest_path) else None
            raise InputError(
                (f"{where}: " if where else "") + (f"{err.key}: " if err.key else "") + err.message,
                where=dep.manifest_path, key=f"deployments.{dep.name}.model",
            ) from None
    return models


def startup_skipped(dep: Deployment, why: str = "opt-in: --gpulayout-launch, gpulayout check --launch, "
                                                   "or launch.enabled: true") -> Finding:
    """The ``startup`` finding when no engine is launched, with the data keys a launch would fill."""
    return skipped("startup", f"{dep.name}: not launched ({why})", NOT_LAUNCHED)


@dataclass
class DeploymentResult:
    deployment: Deployment
    model: ModelSpec
    findings: dict[str, Finding] = field(default_factory=dict)
    #: checks that did not run (a partial pytest run): the verdict is then at best ``incomplete``
    not_run: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        return worst(f.status for f in self.findings.values())

    @property
    def verdict(self) -> str:
        """``status``, except ``incomplete`` when checks did not run and none of those that ran failed."""
        return verdict_of(self.status, bool(self.not_run))

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": self.verdict,
            "engine": self.deployment.engine,
            "model": self.model.name,
            "layout": {"tensor_parallel_size": self.deployment.tp, "pipeline_parallel_size": self.deployment.pp,
                       "data_parallel_size": self.deployment.dp},
            "checks": {name: f.to_json() for name, f in self.findings.items()},
        }
        if self.not_run:
            out["not_run"] = list(self.not_run)
        return out


@dataclass
class Report:
    machine: Machine
    results: dict[str, DeploymentResult]

    @property
    def status(self) -> Status:
        return worst(r.status for r in self.results.values())

    @property
    def not_run(self) -> dict[str, tuple[str, ...]]:
        return {name: r.not_run for name, r in self.results.items() if r.not_run}

    @property
    def verdict(self) -> str:
        return verdict_of(self.status, bool(self.not_run))

    def to_json(self) -> dict[str, Any]:
        not_run = self.not_run
        return {
            # the worst status over the deployments: what a pipeline reads first (`jq -r .status`);
            # "incomplete" when checks did not run (listed in not_run) and none that ran failed
            "status": self.verdict,
            **({"not_run": {name: list(checks) for name, checks in not_run.items()}} if not_run else {}),
            "machine": {"source": self.machine.source, "gpus": len(self.machine.gpus),
                        "models": self.machine.describe(), "driver": self.machine.driver,
                        "host": self.machine.host, "notes": list(self.machine.notes)},
            "deployments": {name: r.to_json() for name, r in self.results.items()},
        }


_LOG_DIR: list[Path] = []


def _run_log_dir() -> Path:
    """One temporary folder (0700) for this run's engine logs when no log folder was named (not one per
    launch). It keeps only the logs of launches that did not pass (``_drop_passed_log``) and goes at the
    end of the run when empty (``finish_run_log_dir``)."""
    if not _LOG_DIR:
        import tempfile

        _LOG_DIR.append(Path(tempfile.mkdtemp(prefix="gpulayout-logs-")))
    return _LOG_DIR[0]


def _drop_passed_log(finding: Finding) -> Finding:
    """A passed launch's log in the temporary folder is removed, and the finding no longer points at it:
    nothing there needs reading, and a folder per run would pile up in /tmp."""
    facts = finding.facts
    if finding.status is not Status.PASS or not isinstance(facts, StartupFacts) or not isinstance(facts.log_path, str):
        return finding
    path = facts.log_path
    if not _LOG_DIR or Path(path).parent != _LOG_DIR[0]:
        return finding
    try:
        os.unlink(path)
    except OSError:
        return finding
    return Finding(finding.check, finding.status, finding.message.replace(f" Log: {path}.", ""),
                   dataclasses.replace(facts, log_path=None))


def finish_run_log_dir() -> Path | None:
    """At the end of a run: remove the temporary log folder when it is empty, and forget it (the next
    run makes its own); return it when it holds logs (of launches that did not pass), for the caller to
    say where they are."""
    if not _LOG_DIR:
        return None
    path = _LOG_DIR.pop()
    try:
        path.rmdir()
    except FileNotFoundError:
        return None
    except OSError:  # not empty: the logs of launches that did not pass
        return path
    return None


def run_checks(deployments: Iterable[Deployment], machine: Machine, models: Mapping[str, ModelSpec], *,
               launch: bool = False, log_dir: Path | None = None, host: Host = BARE_HOST,
               progress: Callable[[str], Progress] | None = None) -> Report:
    """Static checks for every deployment, plus ``startup`` (launched where asked, else skipped).

    ``progress``: given a deployment's name, the callback its launch reports its phases to
    (``launch/progress.py``, ``Reporter.for_launch``).
    """
    results: dict[str, DeploymentResult] = {}
    for dep in deployments:
        model = models[dep.name]
        findings = evaluate(dep, machine, model, host)
        findings["startup"] = run_startup_check(dep, machine, model, findings, launch=launch, log_dir=log_dir,
                                                host=host, progress=progress)
        results[dep.name] = DeploymentResult(dep, model, findings)
    return Report(machine, results)


def run_startup_check(dep: Deployment, machine: Machine, model: ModelSpec, findings: Mapping[str, Finding], *,
                      launch: bool, log_dir: Path | None, host: Host = BARE_HOST,
                      progress: Callable[[str], Progress] | None = None) -> Finding:
    """Launch the engine when asked (flag or ``launch.enabled``) and the static checks leave a chance."""
    if not (launch or dep.launch.enabled):
        return startup_skipped(dep)
    pool = findings.get("kv_pool")
    pool_facts = pool.facts if pool is not None and isinstance(pool.facts, KvPoolFacts) else None
    too_long = pool if pool_facts is not None and pool_facts.refused_at_config else None
    blocking = [f for f in (findings.get("placement"), findings.get("heads"), too_long)
                if f and f.status is Status.FAIL]
    if blocking:
        return startup_skipped(dep, f"{blocking[0].check} fails, the engine would refuse the layout: "
                                    f"{blocking[0].message}")
    predicted = pool_facts.predicted_kv_tokens if pool_facts is not None else None
    finding = run_startup(dep, model, engine=get_engine(dep.engine), machine=machine, prediction_tokens=predicted,
                          prediction=pool_facts.smallest if pool_facts is not None else None,
                          log_dir=log_dir or _run_log_dir(), host=host,
                          progress=progress(dep.name) if progress is not None else None)
    return finding if log_dir is not None else _drop_passed_log(finding)
