"""State of one pytest run with ``--gpulayout``: options, manifest, machine, models, cached findings.

Created on first need (``pytest_configure`` when enabled, or a fixture in a user's own test), stored
in ``config.stash``. The plugin imports it only when it is needed, so that pytest without ``--gpulayout`` pays
nothing; everything it uses is imported here, at the top.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_gpulayout.artifacts import load as artifacts
from pytest_gpulayout.check import LaunchOptions
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Finding
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.files import log_folder
from pytest_gpulayout.launch.progress import Progress, pytest_reporter
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.machine.sources import load_machine, model_dirs_of
from pytest_gpulayout.manifest.load import MANIFEST_NAME, Manifest, find_manifest, load_manifest
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.runner import Runner, checks_of, find_models, subject_of


def _opt(config: pytest.Config, name: str, ini: str | None = None) -> str | None:
    value = config.getoption(name, default=None)
    if value:
        return str(value)
    if ini:
        ini_value = config.getini(ini)
        if ini_value:
            return str(ini_value)
    return None


def _read_host() -> Host:
    """This process's host, for every registered engine."""
    return Host.read(ENGINES.values())


@dataclass
class GpuLayoutState:
    config: pytest.Config
    manifest: Manifest | None = None
    _machine: Machine | None = None
    models: dict[str, ModelSpec | InputError] = field(default_factory=dict)
    #: each deployment's runner: every check of it run once, whatever asks (``runner.Runner``)
    runners: dict[str, Runner] = field(default_factory=dict)
    #: the installed engines and engine variables, read once for the whole run
    host: Host = field(default_factory=_read_host)
    #: the manifest's line of each key under ``deployments:`` (``manifest_location``)
    _key_lines: dict[str, int] | None = None

    @property
    def strict(self) -> bool:
        return bool(self.config.getoption("gpulayout_strict", False) or self.config.getini("gpulayout_strict"))

    @property
    def launch(self) -> bool:
        return bool(self.config.getoption("gpulayout_launch", False))

    # -- loading (errors become one-line usage errors / exit 3 in the plugin) ---------------------
    def load_manifest(self) -> Manifest:
        """--gpulayout-manifest, else a ``gpulayout.yaml`` named on the command line (``pytest --gpulayout
        deploy/gpulayout.yaml::qwen3-8b-tp2``), else ini ``gpulayout_manifest``, else the rootdir's."""
        if self.manifest is None:

            explicit = self.config.getoption("gpulayout_manifest", None) or self._manifest_argument()
            path = find_manifest(explicit, self.config.getini("gpulayout_manifest") or None,
                                 Path(self.config.rootpath), also=Path(self.config.invocation_params.dir))

            if artifacts.is_manifest(path) or path.name == "gpulayout.yaml":
                self.manifest = load_manifest(path)
            else:  # a deployment artifact (issue 22): its engine command lines are the deployments
                machine = _opt(self.config, "gpulayout_machine", "gpulayout_machine")
                found = artifacts.load_artifact(path, machine)
                self.manifest = artifacts.as_manifest(found, machine, path.resolve())
            self.models = find_models(self.manifest.deployments)  # one that cannot be read fails its config
        return self.manifest

    def _manifest_argument(self) -> str | None:
        """The one ``gpulayout.yaml`` among pytest's collection arguments (``path`` or ``path::node``).
        Two different ones are refused: a run checks one manifest."""

        here = Path(self.config.invocation_params.dir)
        found = {os.path.abspath(here / part) for arg in self.config.args
                 if Path(part := arg.split("::", 1)[0]).name == MANIFEST_NAME and (here / part).is_file()}
        if len(found) > 1:
            raise InputError(f"one manifest per run: the arguments name {len(found)} ({', '.join(sorted(found))}); "
                             "run pytest once for each")
        return found.pop() if found else None

    def discover_manifest(self) -> Manifest | None:
        """The manifest for fixtures in a user's own tests under plain ``pytest`` (no ``--gpulayout``):
        loaded when one is named (option or ini) or ``gpulayout.yaml`` sits in the rootdir or the
        invocation dir, so that its ``machine:`` is honoured; None when there is none to find."""
        if self.manifest is None:

            named = self.config.getoption("gpulayout_manifest", None) or self.config.getini("gpulayout_manifest")
            dirs = (Path(self.config.rootpath), Path(self.config.invocation_params.dir))
            if named or any((d / MANIFEST_NAME).is_file() for d in dirs):
                self.load_manifest()
        return self.manifest

    @property
    def machine_spec(self) -> tuple[str, Path | None]:
        """--gpulayout-machine beats the ini key, which beats the manifest's ``machine``; default live NVML."""
        explicit = _opt(self.config, "gpulayout_machine", "gpulayout_machine")
        if explicit:
            return explicit, Path(self.config.invocation_params.dir)
        if self.manifest is not None:
            return self.manifest.machine, self.manifest.base_dir
        return "auto", None

    @property
    def machine(self) -> Machine:
        if self._machine is None:

            spec, base = self.machine_spec
            dirs = model_dirs_of([m.source for m in self.models.values() if isinstance(m, ModelSpec)])
            self._machine = load_machine(spec, base, dirs, ENGINES.values())
        return self._machine

    def deployment(self, name: str) -> Deployment:
        assert self.manifest is not None
        return self.manifest.deployment(name)

    def runner(self, name: str) -> Runner:
        """The deployment's runner (made once): the same one every item of it asks."""
        if name not in self.runners:
            options = LaunchOptions(launch=self.launch, log_dir=self.log_dir(), progress=self._launch_progress())
            subject = subject_of(self.deployment(name), self.machine, self.models[name], self.host)
            self.runners[name] = Runner(subject, self.host, options)
        return self.runners[name]

    def checks_of(self, name: str) -> tuple[str, ...]:
        """The checks deployment ``name`` is judged by, in order (known before anything is resolved)."""
        return tuple(c.name for c in checks_of(self.deployment(name)))

    def manifest_location(self, name: str) -> tuple[str, int]:
        """(manifest path, line of the deployment's key) for warnings and each item's location; line 1
        when not found. The file is read once (every check item asks)."""
        if self.manifest is None:
            return "gpulayout", 1
        if self._key_lines is None:
            self._key_lines = {}
            try:
                lines = self.manifest.path.read_text().splitlines()
            except OSError:
                lines = []
            under = False  # the first line of each key below the top-level ``deployments:``
            for no, text in enumerate(lines, 1):
                if text[:1] not in ("", " ", "\t", "#"):
                    under = text.split("#", 1)[0].rstrip() == "deployments:"
                    continue
                key, colon, _ = text.strip().partition(":")
                if under and colon:
                    self._key_lines.setdefault(key.strip().strip("'\""), no)
        return str(self.manifest.path), self._key_lines.get(name, 1)

    def named_log_dir(self) -> Path | None:
        """The log folder the user named: --gpulayout-log-dir, else $GPULAYOUT_LOG_DIR (checked, created)."""

        option = self.config.getoption("gpulayout_log_dir", None)
        if option:
            return log_folder(option, "--gpulayout-log-dir")
        if os.environ.get("GPULAYOUT_LOG_DIR"):
            return log_folder(os.environ["GPULAYOUT_LOG_DIR"], "GPULAYOUT_LOG_DIR")
        return None

    def log_dir(self) -> Path | None:
        """Where engine logs go: --gpulayout-log-dir, $GPULAYOUT_LOG_DIR, else pytest's cache dir (None: a
        temp dir)."""
        named = self.named_log_dir()
        if named is not None:
            return named
        cache = getattr(self.config, "cache", None)
        return Path(cache.mkdir("gpulayout-logs")) if cache is not None else None

    def finding(self, name: str, check: str) -> Finding:
        """The finding of ``check`` for deployment ``name``, from its runner (the checks its gates name run first)."""
        return self.runner(name).finding(check)

    def _launch_progress(self) -> Callable[[str], Progress] | None:
        """Launch phases through the terminal reporter (not on xdist workers, not with -q: launch/progress.py)."""

        reporter = pytest_reporter(self.config)
        return reporter.for_launch if reporter is not None else None


STATE_KEY = pytest.StashKey[GpuLayoutState]()


def get_state(config: pytest.Config) -> GpuLayoutState:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        state = GpuLayoutState(config)
        config.stash[STATE_KEY] = state
    return state
