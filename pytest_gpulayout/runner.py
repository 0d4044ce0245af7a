"""The one runner: every check of the suite for a deployment, each run once, in order, with its gates.

pytest's items, ``gpulayout check``, the planner, the JSON, JUnit and the HTML all read their findings from
here, so they give the same verdicts by construction: a pytest item asks its deployment's ``Runner`` for one
check (the checks its gates name run first, once), ``gpulayout check`` for all of them (``run_checks``), the
planner for the static ones (``evaluate``). Each deployment is resolved once into its ``Subject``
(``subject_of``: the engine object from the registry, the release, the launch's knobs, the placement and the
pool predictions), and the finding of each check is named after the deployment here, not by the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.check import Check, Context, Gate, LaunchOptions, Then
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Engine, ModelMissing, Subject, resolve
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Finding, Status, skipped, verdict_of, worst
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.rules.startup import finish_run_log_dir, not_launched
from pytest_gpulayout.suite import CHECK_NAMES, checks_for

__all__ = ["CHECK_NAMES", "DeploymentResult", "Report", "Runner", "checks_of", "engine_of", "evaluate",
           "find_models", "finish_run_log_dir", "load_models", "not_launched", "run_checks", "subject_of"]


def engine_of(name: str) -> Engine:
    """The engine object a deployment's ``engine`` names (the planner asks it instead of testing names)."""
    return get_engine(name)


def checks_of(dep: Deployment) -> tuple[Check, ...]:
    """The checks ``dep`` is judged by, in order: its engine's (``suite.checks_for``), those that apply to it."""
    return tuple(c for c in checks_for(get_engine(dep.engine)) if c.applies(dep))


def subject_of(dep: Deployment, machine: Machine, model: ModelSpec | InputError, host: Host = BARE_HOST) -> Subject:
    """``dep`` resolved once (``engine.Subject``): its engine object from the registry, its release, knobs,
    placement and pool predictions, for every check to read. A multi-node artifact's deployment is judged on one
    copy of the machine per node (``machine/stand_in.py``, after the release has said how many GPUs its line uses)."""
    return resolve(dep, machine, model, host, engine=get_engine(dep.engine))


class Runner:
    """One deployment's checks: what each front end asks, each check run once.

    ``finding(name)`` runs the checks its gates name first (``check.Gate``), then the check itself, unless
    it has nothing to do in this run (``Check.idle``) or a gate blocks it (``Then.SKIP``: ``Check.blocked``);
    a ``Then.NOT_JUDGED`` gate keeps the numbers and turns a pass or warning into a skip. A value the checks
    find impossible for this model (``kv_cache_dtype: fp8_ds_mla`` on a model without MLA) is bad input: it
    is raised naming the manifest and the deployment's key.
    """

    def __init__(self, subject: Subject, host: Host = BARE_HOST, options: LaunchOptions | None = None) -> None:
        self.subject = subject
        self.host = host
        self.options = options or LaunchOptions()
        self.checks: dict[str, Check] = {c.name: c for c in checks_of(subject.dep)}
        self._found: dict[str, Finding] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The checks this deployment is judged by, in order."""
        return tuple(self.checks)

    def finding(self, name: str) -> Finding:
        if name in self._found:
            return self._found[name]
        check = self.checks[name]
        dep = self.subject.dep
        try:
            finding = self._judge(check)
        except InputError as err:
            if err.where and dep.manifest_path and err.where != str(dep.manifest_path):
                raise  # the error is in another file (a model's config.json): it already names it
            raise InputError(err.message, where=dep.manifest_path,
                             key=f"deployments.{dep.name}" + (f".{err.key}" if err.key else "")) from None
        self._found[name] = finding = finding.about(dep.name)
        return finding

    def _judge(self, check: Check) -> Finding:
        idle = check.idle(self.subject, Context(before=dict(self._found), host=self.host, options=self.options))
        if idle is not None:
            return idle
        held: list[tuple[Gate, Finding]] = []
        for gate in check.gates:
            if gate.on in self.checks:  # a gate on a check this deployment does not have holds nothing
                other = self.finding(gate.on)
                if gate.when(other):
                    held.append((gate, other))
        for gate, other in held:
            if gate.then is Then.SKIP:
                return check.blocked(other, gate)
        try:
            finding = check.run(self.subject, Context(before=dict(self._found), host=self.host, options=self.options))
        except ModelMissing:  # a check that reads the model, of a deployment whose model could not be read
            return skipped(check.name, "not checked: the model could not be read (see config)")
        for gate, other in held:
            if gate.then is Then.NOT_JUDGED and finding.status in (Status.PASS, Status.WARN):
                finding = finding.with_status(Status.SKIP, f"not judged: {gate.why} (see {other.check}). "
                                              f"Prediction for reference: {finding.text}")
        return finding

    def findings(self, names: Iterable[str] | None = None) -> dict[str, Finding]:
        """The findings of ``names`` (default: every check), in the suite's order."""
        wanted = set(self.names if names is None else names)
        return {n: self.finding(n) for n in self.names if n in wanted}

    def static_findings(self) -> dict[str, Finding]:
        """The checks that start no process (what the planner runs)."""
        return self.findings(n for n, c in self.checks.items() if c.static)


def evaluate(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST) -> dict[str, Finding]:
    """Every static check's finding for one deployment, keyed by check name (through the ``Runner``)."""
    return Runner(subject_of(dep, machine, model, host), host).static_findings()


def find_models(deployments: Iterable[Deployment]) -> dict[str, ModelSpec | InputError]:
    """Each deployment's model spec, or the one-line error that says why it could not be read (naming the
    manifest and the key): a model one deployment cannot find fails that deployment's ``config``, not the run."""
    models: dict[str, ModelSpec | InputError] = {}
    for dep in deployments:
        try:
            models[dep.name] = load_model(dep.model, dep.base_dir)
        except InputError as err:
            where = err.where if err.where and err.where != str(dep.manifest_path) else None
            inner = (f"{where}: " if where else "") + (f"{err.key}: " if err.key else "") + err.message
            if dep.origin is not None:  # the deployment's name is its place in the artifact: the finding says it
                models[dep.name] = InputError(inner if where else f"{dep.model}: {inner}")
            else:
                models[dep.name] = InputError(inner, where=dep.manifest_path, key=f"deployments.{dep.name}.model")
    return models


def load_models(deployments: Iterable[Deployment]) -> dict[str, ModelSpec]:
    """Each deployment's model spec; a model that cannot be read is an ``InputError`` naming the manifest and
    the key (for callers that need every model: ``find_models`` keeps going)."""
    out: dict[str, ModelSpec] = {}
    for name, found in find_models(deployments).items():
        if isinstance(found, InputError):
            raise found
        out[name] = found
    return out


@dataclass
class DeploymentResult:
    deployment: Deployment
    model: ModelSpec | InputError
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

    @property
    def model_name(self) -> str:
        """The model's name, or the reference as written where it could not be read."""
        return self.model.name if isinstance(self.model, ModelSpec) else self.deployment.model

    def _layout(self) -> dict[str, int]:
        """The layout as written, and the GPUs the release makes of it where placement counted them (SGLang's
        ``--dp 8 --enable-dp-attention`` at TP=8 is 8 GPUs, not 64)."""
        dep = self.deployment
        out = {"tensor_parallel_size": dep.tp, "pipeline_parallel_size": dep.pp, "data_parallel_size": dep.dp}
        placement = self.findings.get("placement")
        needed = getattr(placement.facts, "gpus_needed", None) if placement is not None else None
        if isinstance(needed, int) and needed != dep.tp * dep.pp * dep.dp:
            out["gpus"] = needed
        return out

    def to_json(self) -> dict[str, Any]:
        out = {
            "status": self.verdict,
            "engine": self.deployment.engine,
            "model": self.model_name,
            "layout": self._layout(),
            "checks": {name: f.to_json() for name, f in self.findings.items()},
        }
        if self.not_run:
            out["not_run"] = list(self.not_run)
        origin = self.deployment.origin
        if origin is not None:  # where an artifact's deployment stands
            out["source"] = origin.source
            out["entry"] = origin.entry
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

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks any deployment was judged by (or did not run), in the suite's order: the table's columns."""
        seen = {c for r in self.results.values() for c in (*r.findings, *r.not_run)}
        return tuple(c for c in CHECK_NAMES if c in seen)

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


def run_checks(deployments: Iterable[Deployment], machine: Machine, models: Mapping[str, ModelSpec | InputError], *,
               launch: bool = False, log_dir: Path | None = None, host: Host = BARE_HOST,
               progress: Callable[[str], Progress] | None = None) -> Report:
    """Every check for every deployment (``startup`` launched where asked, else skipped).

    ``progress``: given a deployment's name, the callback its launch reports its phases to
    (``launch/progress.py``, ``Reporter.for_launch``).
    """
    options = LaunchOptions(launch=launch, log_dir=log_dir, progress=progress)
    results: dict[str, DeploymentResult] = {}
    for dep in deployments:
        model = models[dep.name]
        runner = Runner(subject_of(dep, machine, model, host), host, options)
        results[dep.name] = DeploymentResult(dep, model, runner.findings())
    return Report(machine, results)
