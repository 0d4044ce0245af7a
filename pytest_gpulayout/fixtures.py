"""The body of the ``gpulayout_launch`` fixture: launch a manifest deployment (with overrides) from a
user's own regression test and hand back its ``StartupReport``. An edge beside ``plugin.py``: it resolves
each deployment (``evaluate.subject_of``) and hands its engine object to ``launch/``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.evaluate import subject_of
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.startup import StartupReport, launch_deployment
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool


def _predicted(dep: Deployment, machine: Machine | None, model: ModelSpec | None, host: Host) -> int | None:
    """The kv_pool check's prediction for ``dep`` (smallest replica), or None where it cannot be made."""
    if machine is None or model is None:
        return None
    try:
        facts = check_kv_pool(subject_of(dep, machine, model, host)).facts
    except Exception:  # a prediction is a comparison aid; the launch is the measurement
        return None
    return facts.predicted_kv_tokens if isinstance(facts, KvPoolFacts) else None


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
    fields = {f.name for f in dataclasses.fields(Deployment)}

    def launch_one(target: str | Deployment, **overrides: Any) -> StartupReport:
        if isinstance(target, Deployment):
            dep = target
        else:
            try:
                dep = manifest_deployments[target]
            except KeyError:
                close = close_matches(str(target), list(manifest_deployments), n=2)
                hint = f" Did you mean {' or '.join(close)}?" if close else ""
                known = ", ".join(manifest_deployments) or "none"
                raise InputError(f"no deployment {target!r} in the manifest (known: {known}).{hint}") \
                    from None
        unknown = sorted(set(overrides) - fields)
        if unknown:
            hints = [f"{k} (did you mean {' or '.join(close_matches(k, sorted(fields), n=2))}?)"
                     if close_matches(k, sorted(fields), n=2) else k for k in unknown]
            raise InputError(f"gpulayout_launch: unknown Deployment field(s): {', '.join(hints)}")
        for nested in ("launch", "require"):
            if isinstance(overrides.get(nested), Mapping):
                overrides[nested] = dataclasses.replace(getattr(dep, nested), **overrides[nested])
        if overrides:
            dep = dataclasses.replace(dep, **overrides)
        model = load_model(dep.model, dep.base_dir) if load_model is not None else None
        return launch_deployment(dep, model, engine=get_engine(dep.engine), machine=machine, log_dir=log_dir, host=host,
                                 prediction_tokens=_predicted(dep, machine, model, host),
                                 progress=progress(dep.name) if progress is not None else None)

    return launch_one
