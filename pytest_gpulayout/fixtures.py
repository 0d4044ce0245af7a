"""The bodies of the ``gpulayout_launch`` and ``gpulayout_measure`` fixtures: launch a manifest deployment
(with overrides) from a user's own regression test and hand back its ``StartupReport``, or measure it
under load and hand back its figures (checked against a saved baseline when one is given). An edge
beside ``plugin.py``: it resolves each deployment (``runner.subject_of``) and hands its engine object
to ``launch/`` and ``measure/``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.startup import StartupReport, launch_deployment
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.measure.baseline import BaselineKey, gate, load_key, machine_key
from pytest_gpulayout.measure.run import measure, measured_release
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool
from pytest_gpulayout.runner import load_models, subject_of
from pytest_gpulayout.workload import Load, MeasureSpec, Slo


def _predicted(dep: Deployment, machine: Machine | None, model: ModelSpec | None, host: Host) -> int | None:
    """The kv_pool check's prediction for ``dep`` (smallest replica), or None where it cannot be made."""
    if machine is None or model is None:
        return None
    try:
        facts = check_kv_pool(subject_of(dep, machine, model, host)).facts
    except Exception:  # a prediction is a comparison aid; the launch is the measurement
        return None
    return facts.predicted_kv_tokens if isinstance(facts, KvPoolFacts) else None


def resolve_target(manifest_deployments: Mapping[str, Deployment], target: str | Deployment,
                   overrides: dict[str, Any], fixture: str) -> Deployment:
    """The deployment ``target`` names (or is), with ``overrides`` (Deployment fields; ``launch``,
    ``require`` and ``measure`` also take a dict of their own fields, merged into the deployment's)."""
    fields = {f.name for f in dataclasses.fields(Deployment)}
    if isinstance(target, Deployment):
        dep = target
    else:
        try:
            dep = manifest_deployments[target]
        except KeyError:
            close = close_matches(str(target), list(manifest_deployments), n=2)
            hint = f" Did you mean {' or '.join(close)}?" if close else ""
            known = ", ".join(manifest_deployments) or "none"
            raise InputError(f"no deployment {target!r} in the manifest (known: {known}).{hint}") from None
    unknown = sorted(set(overrides) - fields)
    if unknown:
        hints = [f"{k} (did you mean {' or '.join(close_matches(k, sorted(fields), n=2))}?)"
                 if close_matches(k, sorted(fields), n=2) else k for k in unknown]
        raise InputError(f"{fixture}: unknown Deployment field(s): {', '.join(hints)}")
    for nested in ("launch", "require", "measure"):
        if isinstance(overrides.get(nested), Mapping):
            current = getattr(dep, nested)
            given = dict(overrides[nested])
            if nested == "measure":
                current = current or MeasureSpec()
                if isinstance(given.get("slo"), Mapping):
                    given["slo"] = Slo(**given["slo"])
            overrides[nested] = dataclasses.replace(current, **given)
    return dataclasses.replace(dep, **overrides) if overrides else dep


def make_launcher(manifest_deployments: Mapping[str, Deployment], log_dir: Path,
                  load_model: Callable[..., ModelSpec] | None = None, *,
                  machine: Machine | None = None, host: Host = BARE_HOST,
                  progress: Callable[[str], Progress] | None = None) -> Callable[..., StartupReport]:
    """``launch(name_or_deployment, **overrides) -> StartupReport`` for users' regression tests.

    ``overrides`` are Deployment fields (``tensor_parallel_size=2``, ``max_model_len=4096``); ``launch``
    and ``require`` also accept a dict of their own fields, merged into the deployment's.
    The launch happens whether or not ``launch.enabled`` is set: calling the fixture is the opt-in.
    ``progress``: given the deployment's name, where its launch reports its phases (``launch/progress.py``).
    """
    def launch_one(target: str | Deployment, **overrides: Any) -> StartupReport:
        dep = resolve_target(manifest_deployments, target, overrides, "gpulayout_launch")
        model = load_model(dep.model, dep.base_dir) if load_model is not None else None
        return launch_deployment(dep, model, engine=get_engine(dep.engine).launch, machine=machine, log_dir=log_dir,
                                 host=host,
                                 prediction_tokens=_predicted(dep, machine, model, host),
                                 progress=progress(dep.name) if progress is not None else None)

    return launch_one


def predicted_pools(deployments: Sequence[Deployment], machine: Machine | None,
                    host: Host = BARE_HOST) -> dict[str, tuple[int, ...]]:
    """kv_pool's prediction (KV tokens per replica: ``runner.subject_of(...).replicas``) of each
    deployment it can be made for, which a measurement's preemptions are read against."""
    out: dict[str, tuple[int, ...]] = {}
    if machine is None or not machine.memory_known:
        return out
    for dep in deployments:
        try:
            model = load_models([dep])[dep.name]
            out[dep.name] = tuple(r.kv_tokens for r in subject_of(dep, machine, model, host).replicas)
        except Exception:  # a prediction is a comparison aid; the measurement stands without it
            continue
    return out


def apply_baseline(dep: Deployment, figures: dict[str, Any], baseline: Path, *, machine: Machine | None, host: Host,
                   max_regression: float | None = None) -> None:
    """``figures["baseline"]``: ``dep``'s launches' output tokens/s against the saved ones of its kind (saved
    when there are none): ``saved``, ``pass``, ``fail`` or ``inconclusive`` with its sentence
    (``measure/baseline.py``: the gate sized to the measured noise). Only a measurement that passed is
    compared or saved."""
    if figures["status"] != "pass" or figures["output_tokens_per_s"] is None:
        return
    spec = dep.measure or MeasureSpec()
    load = Load(concurrency=figures.get("concurrency"), request_rate=figures.get("request_rate"),
                burstiness=figures.get("burstiness") or 1.0)
    key = BaselineKey(dep.name, dep.engine, measured_release(dep, host) or "unknown", machine_key(machine),
                      load.concurrency, load_key(spec, load))
    limit = spec.max_regression if max_regression is None else max_regression
    figures["baseline"] = gate(figures, baseline, key, limit)


def measure_all(deployments: list[Deployment], work: Path, *, machine: Machine | None = None, host: Host = BARE_HOST,
                baseline: Path | None = None, progress: Callable[[str], Progress] | None = None) -> dict[str, Any]:
    """Every deployment measured one after the other with the verdict (``gpulayout measure --json``),
    each one's figures checked against ``baseline`` when given."""
    result = measure(deployments, work_dir=work, host=host, progress=progress,
                     predicted=predicted_pools(deployments, machine, host))
    data = result.to_json()
    data["log_dir"] = str(work)
    if baseline is not None:
        for dep in deployments:
            apply_baseline(dep, data["deployments"][dep.name], baseline, machine=machine, host=host)
    return data


def make_measurer(manifest_deployments: Mapping[str, Deployment], log_dir: Path, *, machine: Machine | None = None,
                  host: Host = BARE_HOST, baseline: Path | None = None,
                  progress: Callable[[str], Progress] | None = None,
                  on_window: Callable[[str], None] | None = None) -> Callable[..., dict[str, Any]]:
    """``measure(name_or_deployment, concurrency=None, max_regression=None, **overrides) -> figures``
    for users' regression tests: the deployment measured alone under its ``measure:`` load (at
    ``concurrency`` when given), its figures as ``gpulayout measure --json`` gives them under
    ``deployments.<name>``. With ``baseline`` (``--gpulayout-measure-baseline``), ``figures["baseline"]``
    says how output tokens/s compares with the saved figure of the same kind (``measure/baseline.py``):
    ``saved``, ``pass`` or ``fail`` (more than ``max_regression`` below; default the measure block's, 10 %).
    """

    def measure_one(target: str | Deployment, concurrency: int | None = None, max_regression: float | None = None,
                    **overrides: Any) -> dict[str, Any]:
        dep = resolve_target(manifest_deployments, target, overrides, "gpulayout_measure")
        spec = dep.measure or MeasureSpec()
        if concurrency is not None:
            if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
                raise InputError(f"gpulayout_measure: concurrency must be a whole number >= 1, not {concurrency!r}")
            spec = dataclasses.replace(spec, concurrency=(concurrency,))
        dep = dataclasses.replace(dep, measure=spec)
        work = log_dir / f"measure-{dep.name}"
        result = measure([dep], work_dir=work, host=host, progress=progress, on_window=on_window,
                         predicted=predicted_pools([dep], machine, host))
        figures: dict[str, Any] = result.to_json()["deployments"][dep.name]
        figures["log_dir"] = str(work)
        if baseline is not None:
            apply_baseline(dep, figures, baseline, machine=machine, host=host, max_regression=max_regression)
        return figures

    return measure_one
