"""``startup``: the real thing. Launch the engine briefly with the deployment's flags, read the KV pool it
actually allocated from its log, stop it, and leave nothing behind (``launch/``: the launcher, its
watchdog and the verdict).

Opt-in (``--gpulayout-launch``, ``gpulayout check --launch``, or ``launch.enabled: true``), and only where
the static checks leave the engine a chance: a layout ``placement`` or ``heads`` fails, or a
``max_model_len`` the engine refuses at config time, is not launched (its gates). A launch that passed
leaves no log in the run's temporary folder; one that did not keeps it, and the run says where.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_gpulayout.check import Context, Gate, Then, fails
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import Facts, Finding, Status, facts_of, present, skipped
from pytest_gpulayout.launch.facts import NOT_LAUNCHED, StartupFacts
from pytest_gpulayout.launch.startup import run_startup
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, tokens_text

CHECK = "startup"
OPT_IN = "opt-in: --gpulayout-launch, gpulayout check --launch, or launch.enabled: true"


def not_launched(why: str = OPT_IN) -> Finding:
    """The ``startup`` finding when no engine is launched, with the data keys a launch would fill."""
    return skipped(CHECK, f"not launched ({why})", NOT_LAUNCHED)


def _refused_at_config(f: Finding) -> bool:
    facts = facts_of(f, KvPoolFacts)
    return f.status is Status.FAIL and facts is not None and facts.refused_at_config


_LOG_DIR: list[Path] = []


def _run_log_dir() -> Path:
    """One temporary folder (0700) for this run's engine logs when no log folder was named (not one per
    launch). It keeps only the logs of launches that did not pass (``_drop_passed_log``) and goes at the
    end of the run when empty (``finish_run_log_dir``)."""
    if not _LOG_DIR:
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
    return dataclasses.replace(finding, text=finding.text.replace(f" Log: {path}.", ""),
                               facts=dataclasses.replace(facts, log_path=None))


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


@dataclass(frozen=True)
class StartupCheck:
    """The ``startup`` check (``check.Check``): it launches, so it runs with the run's launch options."""

    name: str = CHECK
    question: str = ("The real thing: launch the engine briefly with the deployment's flags, read the KV pool it "
                     "allocated from its log, stop it, and leave nothing behind.")
    facts: type[Facts] = StartupFacts
    #: a layout the engine would refuse is not launched
    gates: tuple[Gate, ...] = (Gate("config", fails, Then.SKIP), Gate("placement", fails, Then.SKIP),
                               Gate("heads", fails, Then.SKIP),
                               Gate("kv_pool", _refused_at_config, Then.SKIP))
    static: bool = False

    def applies(self, dep: Deployment) -> bool:
        return True

    def idle(self, s: Subject, ctx: Context) -> Finding | None:
        """Not asked to launch: skipped before any gate is looked at."""
        if not (ctx.options.launch or s.dep.launch.enabled):
            return not_launched()
        stand_in = s.machine.stand_in
        if stand_in is not None:  # copies of one node's machine (machine/stand_in.py): there are no such hosts here
            return not_launched(f"{stand_in.sentence()}: a launch needs the nodes themselves (machine: ray)")
        return None

    def blocked(self, blocker: Finding, gate: Gate) -> Finding:
        what = "command line" if blocker.check == "config" else "layout"
        return not_launched(f"{blocker.check} fails, the engine would refuse the {what}: {blocker.message}")

    def run(self, s: Subject, ctx: Context) -> Finding:
        dep = s.dep
        pool = facts_of(ctx.before.get("kv_pool"), KvPoolFacts)
        log_dir = ctx.options.log_dir
        progress = ctx.options.progress
        finding = run_startup(dep, s.model, engine=s.engine.launch, machine=s.machine,
                              prediction_tokens=pool.predicted_kv_tokens if pool is not None else None,
                              prediction=pool.smallest if pool is not None else None,
                              log_dir=log_dir or _run_log_dir(), host=ctx.host,
                              progress=progress(dep.name) if progress is not None else None)
        return finding if log_dir is not None else _drop_passed_log(finding)

    def cell(self, f: Finding) -> str:
        facts = facts_of(f, StartupFacts)
        if facts is None:
            return ""
        kind = present(facts.error_kind)
        if kind:
            return str(kind)
        return tokens_text(present(facts.kv_tokens))


STARTUP = StartupCheck()
