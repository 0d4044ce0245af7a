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

import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
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


#: the suite's modules: in a checkout, ``checks/`` beside the package; in the wheel, ``pytest_gpulayout/checks``
_HERE = Path(__file__).resolve().parent
SUITE_DIR = _HERE / "checks" if (_HERE / "checks").is_dir() else _HERE.parent / "checks"
#: the suite's id prefix where it lies outside the rootdir (an installed package): where the wheel puts it
INSTALLED_PREFIX = "pytest_gpulayout/checks"
#: the suite's modules that only an option brings in
_OPT_IN_MODULES = {"test_measure.py": "gpulayout_measure"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpulayout(check): a GPU layout preflight check of the suite "
                                       "(added by pytest-gpulayout); -m 'not gpulayout' leaves them out")
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
    assert state.manifest is not None
    active = _ActivePlugin(state, _suite_prefix(config), Path(config.rootpath))
    config.args[:] = active.take_arguments(config.args, Path(config.invocation_params.dir))
    config.pluginmanager.register(active, "gpulayout-active")
    _last_failed_in_the_suite(config, active.prefix)


def _last_failed_in_the_suite(config: pytest.Config, prefix: str) -> None:
    """``--lf`` where a failure of the suite and one of the user's own tests are both on record: pytest then
    collects only the files it finds under the rootdir by the failures' ids, which an installed suite is not;
    its files are added to those (pytest's ``LFPlugin._last_failed_paths``; nothing changes where it has none)."""
    lf = config.pluginmanager.get_plugin("lfplugin")
    paths = getattr(lf, "_last_failed_paths", None)
    if not isinstance(paths, set):
        return
    for nodeid in getattr(lf, "lastfailed", {}):
        where = str(getattr(nodeid, "path", "") or str(nodeid).split("::", 1)[0])
        if where.startswith(prefix + "/") and (SUITE_DIR / where[len(prefix) + 1:]).is_file():
            paths.update({SUITE_DIR / where[len(prefix) + 1:], *(SUITE_DIR / where[len(prefix) + 1:]).parents})


def _suite_prefix(config: pytest.Config) -> str:
    """The suite's id prefix: its path from the rootdir (``checks`` in this project's checkout), else where the
    wheel installs it, so that an id reads the same in every project that installed the plugin."""
    try:
        return SUITE_DIR.relative_to(Path(config.rootpath).resolve()).as_posix()
    except ValueError:
        return INSTALLED_PREFIX


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _within(path: Path, folder: Path) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))


@dataclass(frozen=True)
class _Selection:
    """``gpulayout.yaml::<deployment>[::<check>]`` on the command line: those items of the suite only."""

    argument: str
    deployment: str
    check: str | None


class _ActivePlugin:
    """Hooks that exist only while ``--gpulayout`` is on: the suite's modules are collected (``checks/``),
    parametrized by the manifest's deployments, and their findings gathered for the table and the report."""

    def __init__(self, state: GpuLayoutState, prefix: str, rootpath: Path):
        self.state = state
        self.prefix = prefix
        self.rootpath = Path(os.path.abspath(rootpath))
        self.outcomes: dict[str, dict[str, dict[str, Any]]] = {}
        self.kept_logs: Path | None = None
        self.selections: list[_Selection] = []

    # -- the command line: the manifest and the suite's ids ------------------------------------------
    def take_arguments(self, args: list[str], here: Path) -> list[str]:
        """pytest's arguments with the manifest's taken out (``gpulayout.yaml``, ``gpulayout.yaml::<deployment>
        [::<check>]``: a selection of the suite's items), the suite's ids made paths where the suite is
        installed (``pytest_gpulayout/checks/test_links.py::test_links[x]``), and the suite added unless an
        argument already names a part of it."""
        manifest = self.state.manifest
        assert manifest is not None
        out: list[str] = []
        names_suite = False
        for arg in args:
            path, sep, rest = arg.partition("::")
            where = Path(path) if Path(path).is_absolute() else here / path
            if _same_file(where, manifest.path):
                if rest:
                    dep, _, check = rest.partition("::")
                    if dep not in manifest.names or (check and check not in self.state.checks_of(dep)):
                        raise pytest.UsageError(f"not found: {arg} (deployments: {', '.join(manifest.names)})")
                    self.selections.append(_Selection(arg, dep, check or None))
                continue
            suite_path = self._suite_path(path, where)
            if suite_path is not None:
                names_suite = True
                out.append(str(suite_path) + sep + rest)
                continue
            if where.is_dir() and _within(SUITE_DIR, where):
                names_suite = True
            out.append(arg)
        if not names_suite:
            # no argument (nor testpaths) reaches the suite: it runs beside whatever else is collected
            out.append(str(SUITE_DIR))
        return out

    def _suite_path(self, path: str, where: Path) -> Path | None:
        """The suite's file an argument names: by its real path, or by its id where that is not a path here
        (as printed, or as pytest shows it from a folder below the rootdir: ``../pytest_gpulayout/checks/...``)."""
        if where.exists():
            return where if _within(where, SUITE_DIR) and where != SUITE_DIR else None
        names = [path]
        try:
            names.append(Path(os.path.abspath(where)).relative_to(self.rootpath).as_posix())
        except ValueError:
            pass
        for name in names:
            for prefix in {self.prefix, INSTALLED_PREFIX}:
                if name.startswith(prefix + "/") and (candidate := SUITE_DIR / name[len(prefix) + 1:]).exists():
                    return candidate
        return None

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

    # -- collection: the suite's modules -----------------------------------------------------------
    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        option = _OPT_IN_MODULES.get(collection_path.name)
        if option and collection_path.parent == SUITE_DIR and not config.getoption(option, False):
            return True  # ``measure`` only with --gpulayout-measure
        return None

    def pytest_pycollect_makemodule(self, module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if module_path.parent != SUITE_DIR:
            return None
        return SuiteModule.from_parent(parent, path=module_path, nodeid=f"{self.prefix}/{module_path.name}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector, name: str, obj: object) -> list[Any] | None:
        """A check of the suite that exists for no deployment of the manifest (``deploy`` without an artifact)
        has no item at all, rather than an empty parameter set's skip."""
        if not isinstance(collector, SuiteModule) or not name.startswith("test_") or not callable(obj):
            return None
        marks = [m for m in getattr(obj, "pytestmark", ()) if getattr(m, "name", "") == "gpulayout" and m.args]
        manifest = self.state.manifest
        if marks and manifest is not None and not any(marks[0].args[0] in self.state.checks_of(d.name)
                                                      for d in manifest.deployments):
            return []
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # a test that asks for ``gpulayout_deployment`` runs once per deployment: the suite's modules, and a
        # user's own; a suite test marked for one check only for the deployments that check exists for
        manifest = self.state.manifest
        if "gpulayout_deployment" not in metafunc.fixturenames or manifest is None:
            return
        marker = metafunc.definition.get_closest_marker("gpulayout")
        check = marker.args[0] if marker is not None and marker.args else None
        names = [d.name for d in manifest.deployments if check is None or check in self.state.checks_of(d.name)]
        metafunc.parametrize("gpulayout_deployment", names, ids=names, indirect=True)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """The suite's items read a deployment at a time, its checks in the suite's order (pytest collects the
        modules by file name); a check that exists for no deployment (``deploy`` without an artifact) has no item;
        ``gpulayout.yaml::<deployment>[::<check>]`` keeps those only."""
        from pytest_gpulayout.suite import CHECK_NAMES

        manifest = self.state.manifest
        order = {name: i for i, name in enumerate(manifest.names if manifest is not None else ())}
        suite = [i for i in items if _item_check(i) is not None]
        if not suite:
            return
        ours = {id(i) for i in suite}
        judged = [i for i in suite if _item_deployment(i) in order]  # not a check's empty parameter set
        judged.sort(key=lambda i: (order[_item_deployment(i) or ""], _check_index(_item_check(i), CHECK_NAMES)))
        first = next(n for n, i in enumerate(items) if id(i) in ours)
        others = [i for i in items if id(i) not in ours]
        items[:] = others[:first] + judged + others[first:]
        unwanted = self._manifest_deselections(config)
        if not (self.selections or unwanted):
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            dep, check = _item_deployment(item), _item_check(item)
            chosen = not self.selections or any(dep == s.deployment and (s.check is None or s.check == check)
                                                for s in self.selections)
            refused = any(dep == s.deployment and (s.check is None or s.check == check) for s in unwanted)
            (keep if chosen and not refused else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def _manifest_deselections(self, config: pytest.Config) -> list[_Selection]:
        """``--deselect gpulayout.yaml::<deployment>[::<check>]``: the manifest's way of naming the suite's items."""
        manifest = self.state.manifest
        here = Path(config.invocation_params.dir)
        out = []
        for arg in config.getoption("deselect", None) or ():
            path, _, rest = str(arg).partition("::")
            where = Path(path) if Path(path).is_absolute() else here / path
            if manifest is not None and rest and _same_file(where, manifest.path):
                dep, _, check = rest.partition("::")
                out.append(_Selection(str(arg), dep, check or None))
        return out

    # -- outcomes: the findings each item judged ----------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        finding = getattr(item, "_gpulayout_finding", None)
        if finding is not None and report.when == "call":
            report.gpulayout = {"deployment": finding.deployment, "check": finding.check, "text": finding.text,
                                **finding.to_json()}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "gpulayout", None)
        if data and report.when == "call":
            self.outcomes.setdefault(data["deployment"], {})[data["check"]] = data

    def _findings(self) -> dict[str, dict[str, Finding]]:
        """Findings per deployment and check, in manifest and check order (xdist reports arrive shuffled)."""
        from pytest_gpulayout.findings import Finding, Status, facts_from_json
        from pytest_gpulayout.suite import CHECK_NAMES

        order = [d.name for d in self.state.manifest.deployments] if self.state.manifest else []
        names = sorted(self.outcomes, key=lambda n: order.index(n) if n in order else len(order))
        return {dep: {c: Finding(c, Status(d["status"]), d["text"], facts_from_json(c, d["data"]), deployment=dep)
                      for c in CHECK_NAMES if (d := self.outcomes[dep].get(c)) is not None}
                for dep in names}

    def _not_run(self) -> dict[str, tuple[str, ...]]:
        """Per deployment of the manifest, the checks that did not run (``-k``, ``-x``, deselection, an
        interrupt): a partial run is never reported as a pass."""
        manifest = self.state.manifest
        if manifest is None:
            return {}
        out = {}
        for dep in manifest.deployments:
            ran = self.outcomes.get(dep.name, {})
            missing = tuple(c for c in self.state.checks_of(dep.name) if c not in ran)
            if missing:
                out[dep.name] = missing
        return out

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.kept_logs is not None:
            terminalreporter.write_line(f"gpulayout: logs of the launches that did not pass are in {self.kept_logs}")
        if not self.outcomes:
            return
        from pytest_gpulayout.report.text import summary_table
        from pytest_gpulayout.suite import CHECK_NAMES

        findings = self._findings()
        not_run = self._not_run()
        for name in not_run:
            findings.setdefault(name, {})
        checks = [c for c in CHECK_NAMES if any(c in f for f in findings.values())
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
        from pytest_gpulayout.runner import finish_run_log_dir

        # the temporary log folder (no cache dir, no GPULAYOUT_LOG_DIR): gone unless a launch did not pass
        self.kept_logs = finish_run_log_dir()
        if hasattr(session.config, "workerinput"):  # xdist worker: the controller writes the files
            return
        report_path = session.config.getoption("gpulayout_report", None)
        html_path = session.config.getoption("gpulayout_html", None)
        if not (report_path or html_path) or not self.outcomes:
            return
        from pytest_gpulayout.runner import DeploymentResult, Report

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


def _item_deployment(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("gpulayout_deployment") if callspec is not None else None


def _check_index(check: str | None, names: tuple[str, ...]) -> int:
    return names.index(check) if check in names else len(names)


def _item_check(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("gpulayout")
    return str(marker.args[0]) if marker is not None and marker.args else None


# -- the suite's modules: checks/ ------------------------------------------------------------------

class SuiteModule(pytest.Module):
    """One module of the suite (``checks/test_links.py``), imported under a name of this package
    (``pytest_gpulayout._suite.test_links``), never as a top-level ``test_links`` or ``checks``: a user's own
    ``test_links.py`` or ``checks`` package beside it keeps its name."""

    def _getobj(self) -> Any:
        name = f"pytest_gpulayout._suite.{self.path.stem}"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        return module


def _judge(state: GpuLayoutState, node: pytest.Item, deployment: str, check: str) -> Finding:
    """Run ``check`` for ``deployment`` as the test ``node``: its finding goes to the report (through
    xdist too: ``pytest_runtest_makereport``) and JUnit, and becomes the test's outcome."""
    from pytest_gpulayout.errors import GpuLayoutError
    from pytest_gpulayout.report.text import junit_properties
    from pytest_gpulayout.suite import CHECK_NAMES

    if check not in state.checks_of(deployment):
        if check not in CHECK_NAMES:
            pytest.fail(f"gpulayout: no check named {check!r} (the suite's: {', '.join(CHECK_NAMES)})", pytrace=False)
        pytest.skip(f"{deployment}: {check} is not a check of this deployment")
    problem = None
    try:
        finding = state.finding(deployment, check)
    except GpuLayoutError as err:
        problem = f"gpulayout: {err}"
    if problem:  # outside the except: one line, not "During handling of the above exception"
        pytest.fail(problem, pytrace=False)
    node._gpulayout_finding = finding  # type: ignore[attr-defined]
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
    """The deployment under test: with ``--gpulayout``, a test that asks for it (the suite's modules in
    ``checks/``, and a team's own beside them) runs once per deployment of the manifest."""
    if not hasattr(request, "param"):
        pytest.fail("gpulayout_deployment is parametrized by `pytest --gpulayout` over the manifest's "
                    "deployments; use gpulayout_manifest.deployment(name) in your own tests", pytrace=False)
    return _state(request).deployment(request.param)


@pytest.fixture
def gpulayout_check(request: pytest.FixtureRequest, gpulayout_deployment: Deployment) -> Callable[[str], Finding]:
    """``gpulayout_check("links")``: run one check of the suite for the current deployment and make its finding
    the test's outcome (fail fails, warn warns and fails under --gpulayout-strict, skip skips), with its numbers
    as JUnit properties and in the summary table: what every module of ``checks/`` does."""
    state = _state(request)

    def run(check: str) -> Finding:
        return _judge(state, request.node, gpulayout_deployment.name, check)

    return run


@pytest.fixture
def gpulayout_finding(request: pytest.FixtureRequest, gpulayout_deployment: Deployment) -> Callable[[str], Finding]:
    """``gpulayout_finding("kv_pool")``: the finding of one check for the current deployment, to assert on
    (its ``status``, ``text`` and typed ``facts``: ``KvPoolFacts.predicted_kv_tokens``, ``LinksFacts.worst_link``
    ...) in a team's own check; the same finding the suite's item reports, from the same runner."""
    from pytest_gpulayout.errors import GpuLayoutError

    state = _state(request)

    def get(check: str) -> Finding:
        if check not in state.checks_of(gpulayout_deployment.name):
            pytest.skip(f"{gpulayout_deployment.name}: {check} is not a check of this deployment")
        problem = None
        try:
            return state.finding(gpulayout_deployment.name, check)
        except GpuLayoutError as err:
            problem = f"gpulayout: {err}"
        pytest.fail(problem, pytrace=False)

    return get


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
