"""The pytest plugin (entry point ``gpulayout``).

Inert without ``--gpulayout``: this module imports only pytest and the standard library; the
manifest, the NVML probe and the checks load in ``pytest_configure`` when the flag is given, or when
a user's own test asks for one of the fixtures below.

With the flag the manifest is collected as a test file, the way YAML-test plugins collect theirs:
``gpulayout.yaml`` (a ``pytest.File``) -> one collector per deployment -> one item per check, so a
check's node id is ``gpulayout.yaml::qwen3-8b-tp2::kv_pool``, which ``pytest``, ``--lf``, ``-k`` and
``--deselect`` take back as they take any other.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpulayout import GpuLayoutWarning

if TYPE_CHECKING:
    from pytest_gpulayout.deployment import Deployment
    from pytest_gpulayout.findings import Finding
    from pytest_gpulayout.machine.facts import Gpu, Machine
    from pytest_gpulayout.manifest.load import Manifest
    from pytest_gpulayout.model.spec import ModelSpec
    from pytest_gpulayout.session import GpuLayoutState

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpulayout", "GPU layout preflight (pytest-gpulayout)")
    group.addoption("--gpulayout", action="store_true", default=False,
                    help="collect the manifest (gpulayout.yaml) as tests: one per deployment and check, "
                         "node ids gpulayout.yaml::<deployment>::<check>")
    group.addoption("--gpulayout-manifest", metavar="PATH", default=None,
                    help="deployment manifest (default: a gpulayout.yaml among the paths given, ini "
                         "gpulayout_manifest, then <rootdir>/gpulayout.yaml)")
    group.addoption("--gpulayout-machine", metavar="M", default=None,
                    help="machine: auto (live NVML), ray[:ADDRESS] (a Ray cluster), a snapshot .yaml/.json, "
                         "nvidia-smi topo -m text, or preset:<name>")
    group.addoption("--gpulayout-strict", action="store_true", default=False,
                    help="warnings (slow links, thin headroom) fail the check")
    group.addoption("--gpulayout-launch", action="store_true", default=False,
                    help="run the startup check: launch each engine briefly and read its real KV pool")
    group.addoption("--gpulayout-log-dir", metavar="DIR", default=None,
                    help="where engine startup logs go, for every launch (--gpulayout-launch, launch.enabled, "
                         "the gpulayout_launch fixture); default: $GPULAYOUT_LOG_DIR, else pytest's cache")
    group.addoption("--gpulayout-measure", action="store_true", default=False,
                    help="measure the deployments under load one after the other (gpulayout measure) and say which "
                         "serves best; figures as JUnit properties (gpulayout.measure.<deployment>.<key>)")
    group.addoption("--gpulayout-measure-baseline", metavar="FILE", default=None,
                    help="save measured output tokens/s to FILE, and fail a later run that falls more than "
                         "max_regression (default 10 %%) below it at the same engine release and machine")
    group.addoption("--gpulayout-report", metavar="FILE", default=None,
                    help="write the JSON of `gpulayout check --json` to FILE")
    group.addoption("--gpulayout-html", metavar="FILE", default=None,
                    help="write a self-contained HTML report (memory bars, link matrix, verdicts) to FILE")
    parser.addini("gpulayout_manifest", "path of the deployment manifest", default="")
    parser.addini("gpulayout_machine", "machine source (auto | snapshot | topo text | preset:<name>)", default="")
    parser.addini("gpulayout_strict", "warnings fail the check", type="bool", default=False)


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("gpulayout", False))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpulayout: a GPU layout preflight check (added by pytest-gpulayout)")
    if not _enabled(config):
        return
    from pytest_gpulayout.errors import GpuLayoutError, ProbeError
    from pytest_gpulayout.session import get_state

    state = get_state(config)
    try:
        state.load_manifest()
        _ = state.machine
    except ProbeError as err:
        pytest.exit(f"gpulayout: {err}", returncode=3)
    except GpuLayoutError as err:
        raise pytest.UsageError(f"gpulayout: {err}") from None
    from pytest_gpulayout.inputs.files import writable_path

    for option in ("gpulayout_report", "gpulayout_html", "gpulayout_measure_baseline"):
        target = config.getoption(option, None)
        if target:
            try:
                writable_path(target, "--" + option.replace("_", "-"))
            except GpuLayoutError as err:
                raise pytest.UsageError(f"gpulayout: {err}") from None
    config.pluginmanager.register(_ActivePlugin(state), "gpulayout-active")
    assert state.manifest is not None
    if not _covers(config.args, state.manifest.path, Path(config.invocation_params.dir)):
        # no path given (nor testpaths) reaches the manifest: its checks run beside whatever else is collected
        config.args.append(str(state.manifest.path))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _covers(args: Iterable[str], manifest: Path, invocation_dir: Path) -> bool:
    """Whether one of pytest's collection arguments reaches the manifest already: the file itself
    (``gpulayout.yaml``, ``gpulayout.yaml::dep``, ``gpulayout.yaml::dep::check``) or a folder that holds
    it. Adding it again beside ``gpulayout.yaml::dep`` would widen the run to the whole file."""
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        path = path if path.is_absolute() else invocation_dir / path
        if _same_file(path, manifest):
            return True
        if path.is_dir() and Path(os.path.abspath(manifest)).is_relative_to(os.path.abspath(path)):
            return True
    return False


class _ActivePlugin:
    """Hooks that exist only while ``--gpulayout`` is on."""

    def __init__(self, state: GpuLayoutState):
        self.state = state
        self.outcomes: dict[str, dict[str, dict[str, Any]]] = {}
        self.kept_logs: Path | None = None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        m = self.state.machine
        manifest = self.state.manifest
        lines = [f"gpulayout: machine {m.headline()}" + (f", host {m.host}" if m.host else "")]
        if not m.memory_known:
            lines.append("gpulayout: GPU memory unknown from this source: balance and kv_pool cannot be checked (warn)")
        lines.extend(f"gpulayout: note: {note}" for note in m.notes)
        if manifest is not None:
            lines.append(f"gpulayout: manifest {manifest.path} ({len(manifest.deployments)} deployments)"
                         + (", strict" if self.state.strict else "") + (", launch" if self.state.launch else ""))
            lines.extend(f"gpulayout: note: {note}" for note in manifest.notes)
        return lines

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ManifestFile | None:
        """The manifest is a test file (whatever its name), its deployments and checks the tests in it."""
        manifest = self.state.manifest
        # by name first: a stat for every file pytest walks would be a cost; and a symlink to the
        # manifest under another name is not collected a second time
        if manifest is not None and file_path.name == manifest.path.name and _same_file(file_path, manifest.path):
            node = ManifestFile.from_parent(parent, path=file_path)
            node.add_marker("gpulayout")  # -m "not gpulayout" leaves the checks out
            return node
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # a user's own test that asks for ``gpulayout_deployment`` runs once per deployment
        if "gpulayout_deployment" in metafunc.fixturenames and self.state.manifest is not None:
            names = [d.name for d in self.state.manifest.deployments]
            metafunc.parametrize("gpulayout_deployment", names, ids=names, indirect=True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        finding = getattr(item, "_gpulayout_finding", None)
        if finding is not None and report.when == "call":
            report.gpulayout = {"deployment": item._gpulayout_deployment,  # type: ignore[attr-defined]
                                "check": finding.check, **finding.to_json()}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "gpulayout", None)
        if data and report.when == "call":
            self.outcomes.setdefault(data["deployment"], {})[data["check"]] = data

    def _findings(self) -> dict[str, dict[str, Finding]]:
        """Findings per deployment and check, in manifest and check order (xdist reports arrive shuffled)."""
        from pytest_gpulayout.evaluate import ALL_CHECKS
        from pytest_gpulayout.findings import Finding, Status, facts_from_json

        order = [d.name for d in self.state.manifest.deployments] if self.state.manifest else []
        names = sorted(self.outcomes, key=lambda n: order.index(n) if n in order else len(order))
        return {dep: {c: Finding(c, Status(d["status"]), d["message"], facts_from_json(c, d["data"]))
                      for c in ALL_CHECKS if (d := self.outcomes[dep].get(c)) is not None}
                for dep in names}

    def _not_run(self) -> dict[str, tuple[str, ...]]:
        """Per deployment of the manifest, the checks that did not run (``-k``, ``-x``, deselection, an
        interrupt): a partial run is never reported as a pass."""
        from pytest_gpulayout.evaluate import expected_checks

        manifest = self.state.manifest
        if manifest is None:
            return {}
        out = {}
        for dep in manifest.deployments:
            ran = self.outcomes.get(dep.name, {})
            missing = tuple(c for c in expected_checks(dep) if c not in ran)
            if missing:
                out[dep.name] = missing
        return out

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.kept_logs is not None:
            terminalreporter.write_line(f"gpulayout: logs of the launches that did not pass are in {self.kept_logs}")
        if not self.outcomes:
            return
        from pytest_gpulayout.evaluate import ALL_CHECKS
        from pytest_gpulayout.report.text import summary_table

        findings = self._findings()
        not_run = self._not_run()
        for name in not_run:
            findings.setdefault(name, {})
        checks = [c for c in ALL_CHECKS if any(c in f for f in findings.values())
                  or any(c in missing for missing in not_run.values())]
        terminalreporter.write_sep("=", "gpulayout")
        for line in summary_table(findings, checks, not_run):
            terminalreporter.write_line(line)
        if not_run:
            count = sum(len(m) for m in not_run.values())
            terminalreporter.write_line(
                f"gpulayout: incomplete: {count} check{'s' if count != 1 else ''} did not run (-k, -x, deselected or "
                f"interrupted), so no deployment with one of them passed: "
                + "; ".join(f"{name}: {', '.join(m)}" for name, m in not_run.items()), yellow=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_gpulayout.evaluate import finish_run_log_dir

        # the temporary log folder (no cache dir, no GPULAYOUT_LOG_DIR): gone unless a launch did not pass
        self.kept_logs = finish_run_log_dir()
        if hasattr(session.config, "workerinput"):  # xdist worker: the controller writes the files
            return
        report_path = session.config.getoption("gpulayout_report", None)
        html_path = session.config.getoption("gpulayout_html", None)
        if not (report_path or html_path) or not self.outcomes:
            return
        from pytest_gpulayout.evaluate import DeploymentResult, Report

        state = self.state
        findings = self._findings()
        not_run = self._not_run()
        results = {}
        names = [d.name for d in state.manifest.deployments] if state.manifest is not None else list(findings)
        for name in names:  # also the deployments none of whose checks ran: they are incomplete, not absent
            if name in findings or name in not_run:
                results[name] = DeploymentResult(state.deployment(name), state.models[name], findings.get(name, {}),
                                                 not_run=not_run.get(name, ()))
        report = Report(state.machine, results)
        try:
            if report_path:
                Path(report_path).write_text(json.dumps(report.to_json(), indent=2) + "\n")
            if html_path:
                from pytest_gpulayout.report.html import write_html

                write_html(report, Path(html_path))
        except OSError as err:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"gpulayout: could not write {err.filename}: {err.strerror or err}", red=True)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


# -- the manifest as a test file: gpulayout.yaml -> deployment -> check ---------------------------

class ManifestFile(pytest.File):
    """The manifest, collected by ``--gpulayout``: one :class:`DeploymentNode` per deployment, in the
    manifest's order. Its items carry the ``gpulayout`` marker (``-m "not gpulayout"`` leaves them out)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from pytest_gpulayout.session import get_state

        manifest = get_state(self.config).manifest
        for dep in manifest.deployments if manifest is not None else ():
            yield DeploymentNode.from_parent(self, name=dep.name)
        if manifest is not None and self.config.getoption("gpulayout_measure", False):
            # the measurement of every deployment, after their checks: ``gpulayout.yaml::measure``
            yield pytest.Function.from_parent(self, name="measure", callobj=_measure_all_deployments)


def _measure_all_deployments(gpulayout_measure_suite: Callable[[], dict[str, Any]]) -> None:
    """Measure the deployments under load one after the other and say which serves best (opt-in:
    ``--gpulayout-measure``; ``--gpulayout-measure-baseline FILE`` fails a regression)."""
    gpulayout_measure_suite()


class DeploymentNode(pytest.Collector):
    """One deployment of the manifest: one :class:`CheckItem` per check its engine is judged by."""

    def collect(self) -> Iterator[CheckItem]:
        from pytest_gpulayout.evaluate import expected_checks
        from pytest_gpulayout.session import get_state

        for check in expected_checks(get_state(self.config).deployment(self.name)):
            yield CheckItem.from_parent(self, name=check)

    def reportinfo(self) -> tuple[Path, int, str]:
        from pytest_gpulayout.session import get_state

        _, line = get_state(self.config).manifest_location(self.name)
        return self.path, line - 1, self.name


class CheckItem(pytest.Item):
    """One check of one deployment: ``gpulayout.yaml::<deployment>::<check>``."""

    @property
    def deployment(self) -> str:
        assert self.parent is not None
        return self.parent.name

    def runtest(self) -> None:
        from pytest_gpulayout.session import get_state

        _judge(get_state(self.config), self, self.deployment, self.name)

    def reportinfo(self) -> tuple[Path, int, str]:
        from pytest_gpulayout.session import get_state

        _, line = get_state(self.config).manifest_location(self.deployment)
        # where the fix goes; the failure's heading (not "deployment::check": pytest's verbose line
        # turns the dots of a domain into "::", and deployment names may hold dots)
        return self.path, line - 1, f"{self.deployment}: {self.name}"


def _judge(state: GpuLayoutState, node: pytest.Item, deployment: str, check: str) -> Finding:
    """Run ``check`` for ``deployment`` as the test ``node``: its finding goes to the report (through
    xdist too: ``pytest_runtest_makereport``) and JUnit, and becomes the test's outcome."""
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.report.text import junit_properties

    problem = None
    try:
        finding = state.finding(deployment, check)
    except GpuLayoutError as err:
        problem = f"gpulayout: {err}"
    if problem:  # outside the except: one line, not "During handling of the above exception"
        pytest.fail(problem, pytrace=False)
    node._gpulayout_finding = finding  # type: ignore[attr-defined]
    node._gpulayout_deployment = deployment  # type: ignore[attr-defined]
    node.user_properties.extend(junit_properties(finding))
    _outcome(state, finding, deployment)
    return finding


def _outcome(state: GpuLayoutState, finding: Finding, deployment: str) -> None:
    """fail -> test failure with the message; warn -> GpuLayoutWarning (fails under --gpulayout-strict);
    skip -> skipped with the reason; pass -> nothing."""
    from pytest_gpulayout.findings import Status

    if finding.status is Status.FAIL:
        pytest.fail(finding.message, pytrace=False)
    if finding.status is Status.SKIP:
        pytest.skip(finding.message)
    if finding.status is Status.WARN:
        if state.strict:
            pytest.fail(f"[--gpulayout-strict] {finding.message}", pytrace=False)
        # Point the warning at the deployment in the manifest, where the fix goes, not at this file.
        where, line = state.manifest_location(deployment)
        warnings.warn_explicit(GpuLayoutWarning(finding.message), GpuLayoutWarning, where, line,
                               module="pytest_gpulayout")


# -- fixtures: available to users' own tests; they load the machine lazily ---------------------------

def _state(request: pytest.FixtureRequest) -> GpuLayoutState:
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.session import get_state

    state = get_state(request.config)
    problem = None
    try:
        state.discover_manifest()  # plain `pytest` too: gpulayout.yaml (option, ini, rootdir) and its machine
        _ = state.machine
    except GpuLayoutError as err:
        problem = f"gpulayout: {err}"
    if problem:  # outside the except: one line, not "During handling of the above exception"
        pytest.fail(problem, pytrace=False)
    return state


@pytest.fixture(scope="session")
def gpulayout_machine(request: pytest.FixtureRequest) -> Machine:
    """The machine: --gpulayout-machine, else ini ``gpulayout_machine``, else the ``machine:`` of the
    manifest (found as for ``gpulayout_manifest``, also without ``--gpulayout``), else live NVML."""
    return _state(request).machine


@pytest.fixture(scope="session")
def gpulayout_gpus(gpulayout_machine: Machine) -> tuple[Gpu, ...]:
    """The visible GPUs, as CUDA will number them."""
    return gpulayout_machine.gpus


@pytest.fixture(scope="session")
def gpulayout_links(gpulayout_machine: Machine) -> Mapping[tuple[int, int], str]:
    """Link kind of every GPU pair, keyed ``(i, j)`` with ``i < j`` (``NV18``, ``PHB``, ``SYS`` ...)."""
    return gpulayout_machine.links


@pytest.fixture(scope="session")
def gpulayout_model(request: pytest.FixtureRequest) -> Callable[[str], ModelSpec]:
    """Load a model spec: a directory or config.json (relative to the rootdir) or a catalog id."""
    from pytest_gpulayout.errors import InputError
    from pytest_gpulayout.model.load import load_model

    def load(ref: str) -> ModelSpec:
        try:
            return load_model(ref, Path(request.config.rootpath))
        except InputError as err:
            pytest.fail(f"gpulayout: {err}", pytrace=False)

    return load


@pytest.fixture(scope="session")
def gpulayout_manifest(request: pytest.FixtureRequest) -> Manifest:
    """The manifest: --gpulayout-manifest, else ini ``gpulayout_manifest``, else ``gpulayout.yaml`` in
    the rootdir (or the invocation dir); ``.deployment(name)`` gives one deployment."""
    from pytest_gpulayout.errors import GpuLayoutError

    state = _state(request)
    try:
        return state.load_manifest()
    except GpuLayoutError as err:
        problem = f"gpulayout: {err}"
    pytest.fail(problem, pytrace=False)


@pytest.fixture
def gpulayout_deployment(request: pytest.FixtureRequest) -> Deployment:
    """The deployment under test, in a user's own test: with ``--gpulayout`` such a test runs once per
    deployment of the manifest (the plugin's checks themselves are the manifest's items)."""
    if not hasattr(request, "param"):
        pytest.fail("gpulayout_deployment is parametrized by `pytest --gpulayout` over the manifest's "
                    "deployments; use gpulayout_manifest.deployment(name) in your own tests", pytrace=False)
    return _state(request).deployment(request.param)


@pytest.fixture
def gpulayout_check(request: pytest.FixtureRequest, gpulayout_deployment: Any) -> Callable[[str], Finding]:
    """Run one check for the current deployment and turn its finding into the test's outcome (as the
    manifest's own ``<deployment>::<check>`` item does)."""
    state = _state(request)

    def run(check: str) -> Finding:
        return _judge(state, request.node, gpulayout_deployment.name, check)

    return run


@pytest.fixture
def gpulayout_launch(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Launch an engine briefly for a manifest deployment (with overrides) and get its startup report::

        def test_pool_after_upgrade(gpulayout_launch):
            report = gpulayout_launch("qwen3-8b-tp2", max_model_len=8192)
            assert report.kv_tokens >= 60_000
    """
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.fixtures import make_launcher
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.session import get_state

    state = get_state(request.config)
    try:
        manifest = state.load_manifest()
    except GpuLayoutError as err:
        pytest.fail(f"gpulayout: {err}", pytrace=False)
    try:  # with the machine, GPUs are placed and locked by UUID; a launch itself needs only the engine
        machine = state.machine
    except GpuLayoutError:
        machine = None
    from pytest_gpulayout.launch.progress import pytest_reporter

    try:  # a log folder the user named (--gpulayout-log-dir, GPULAYOUT_LOG_DIR) holds these logs too
        log_dir = state.named_log_dir() or tmp_path
    except GpuLayoutError as err:
        pytest.fail(f"gpulayout: {err}", pytrace=False)
    reporter = pytest_reporter(request.config)  # the launch's phases through the terminal reporter
    yield make_launcher({d.name: d for d in manifest.deployments}, log_dir, load_model, machine=machine,
                         host=state.host, progress=reporter.for_launch if reporter is not None else None)


def _measure_setup(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Path, Path | None, Any, Any]:
    """The manifest, the log folder, the baseline file and the machine (or None) for the measure
    fixtures; and the reporter the launches' phases go through."""
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.launch.progress import pytest_reporter
    from pytest_gpulayout.session import get_state

    state = get_state(request.config)
    try:
        manifest = state.load_manifest()
        log_dir = state.named_log_dir() or tmp_path
    except GpuLayoutError as err:
        pytest.fail(f"gpulayout: {err}", pytrace=False)
    try:  # with the machine, GPUs are placed and locked by UUID, and the baseline knows its GPUs
        machine = state.machine
    except GpuLayoutError:
        machine = None
    given = request.config.getoption("gpulayout_measure_baseline", None)
    baseline = Path(given) if given else None
    if baseline is not None and not baseline.is_absolute():
        baseline = Path(request.config.invocation_params.dir) / baseline
    return manifest, log_dir, baseline, machine, pytest_reporter(request.config)


def _measured_outcome(request: pytest.FixtureRequest, name: str, figures: Mapping[str, Any]) -> list[str]:
    """JUnit properties for ``figures``; the failures it holds (a failed measurement, a regression)."""
    from pytest_gpulayout.measure.text import junit_properties

    request.node.user_properties.extend(junit_properties(name, figures))
    problems = [f"{name}: {e}" for e in figures.get("errors", ())]
    if figures.get("status") == "fail" and not problems:
        problems.append(f"{name}: not measured")
    base = figures.get("baseline")
    if isinstance(base, Mapping) and base.get("status") == "fail":
        problems.append(str(base["text"]))
    if isinstance(base, Mapping) and base.get("status") == "inconclusive":  # the noise hides it: never a silent pass
        warnings.warn(GpuLayoutWarning(f"gpulayout measure: {base['text']}"), stacklevel=2)
    return problems


@pytest.fixture
def gpulayout_measure(request: pytest.FixtureRequest,
                      tmp_path: Path) -> Iterator[Callable[..., dict[str, Any]]]:
    """Measure a manifest deployment under load (``measure:``) and get its figures::

        def test_tp2_throughput(gpulayout_measure):
            figures = gpulayout_measure("tp2", concurrency=8)
            assert figures["itl_ms"]["p99"] < 50

    The figures are those of ``gpulayout measure --json`` under ``deployments.<name>``, also recorded as
    JUnit properties. With ``--gpulayout-measure-baseline FILE`` the output tokens/s is saved, or
    compared with the figure saved at the same engine release and machine: more than ``max_regression``
    (default 10 %) below it fails the test. A measurement that fails fails the test.
    """
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.fixtures import make_measurer

    manifest, log_dir, baseline, machine, reporter = _measure_setup(request, tmp_path)
    state_host = _host(request)
    measurer = make_measurer({d.name: d for d in manifest.deployments}, log_dir, machine=machine, host=state_host,
                             baseline=baseline, progress=reporter.for_launch if reporter is not None else None)

    def measure_one(target: Any, concurrency: int | None = None, max_regression: float | None = None,
                    **overrides: Any) -> dict[str, Any]:
        try:
            figures = measurer(target, concurrency=concurrency, max_regression=max_regression, **overrides)
        except GpuLayoutError as err:
            pytest.fail(f"gpulayout: {err}", pytrace=False)
        name = str(getattr(target, "name", target))
        problems = _measured_outcome(request, name, figures)
        if problems:
            pytest.fail("gpulayout measure: " + "; ".join(problems), pytrace=False)
        return figures

    yield measure_one


def _host(request: pytest.FixtureRequest) -> Any:
    from pytest_gpulayout.session import get_state

    return get_state(request.config).host


@pytest.fixture
def gpulayout_measure_suite(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], dict[str, Any]]:
    """The manifest's ``measure`` item (opt-in with ``--gpulayout-measure``): every
    deployment of the manifest measured one after the other, the verdict and each one's figures as
    JUnit properties, the baseline applied to each; the table goes to the terminal."""

    def run() -> dict[str, Any]:
        if not request.config.getoption("gpulayout_measure", False):
            pytest.skip("measure: opt-in (--gpulayout-measure)")
        from pytest_gpulayout.errors import GpuLayoutError
        from pytest_gpulayout.fixtures import measure_all
        from pytest_gpulayout.measure.text import lines_under, table

        manifest, log_dir, baseline, machine, reporter = _measure_setup(request, tmp_path)
        progress = reporter.for_launch if reporter is not None else None
        try:
            data = measure_all(list(manifest.deployments), log_dir / "measure", machine=machine,
                               host=_host(request), baseline=baseline, progress=progress)
        except GpuLayoutError as err:
            pytest.fail(f"gpulayout: {err}", pytrace=False)
        verdict = data["verdict"]
        request.node.user_properties.extend([("gpulayout.measure.verdict", str(verdict["text"])),
                                             ("gpulayout.measure.choose", str(verdict["choose"] or ""))])
        problems = [p for name, d in data["deployments"].items() for p in _measured_outcome(request, name, d)]
        terminal = request.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and not hasattr(request.config, "workerinput"):
            terminal.write_line("")
            for line in (*table(data), "", *lines_under(data)):
                terminal.write_line(f"gpulayout measure: {line}")
        if problems:
            pytest.fail("gpulayout measure: " + "; ".join(problems), pytrace=False)
        return data

    return run
