"""What ``launch/`` asks of the engine it launches.

``launch/`` holds the process mechanics (the launcher, its watchdog, GPU locks, the process tree,
progress, the verdict); the engine object the caller resolved (``engine.Subject.engine``) says what
differs: its argument vector, how it spans hosts, which log watcher reads it, and whether it has a
launch of its own. This protocol names only that much, so ``launch/`` never imports an engine or
the registry; ``engine.Engine`` declares the same methods and every engine implements them (the way
pytest-xdist's ``scheduler/protocol.py`` names what the session asks of a scheduler).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.findings import Finding
from pytest_gpulayout.launch.launcher import LaunchResult, Watcher
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec

#: How an engine spans the hosts of a Ray cluster (``launch/across.py``): one server on the head whose
#: workers are Ray actors the engine places itself (vLLM), or one server process per host (SGLang).
AcrossHosts = Literal["ray-executor", "process-per-node"]


class OwnLaunch(Protocol):
    """An engine's own ``startup`` launch and verdict (llama.cpp): ``(finding, LaunchResult | None)``."""

    def __call__(self, dep: Deployment, model: ModelSpec | None, *, machine: Machine | None, log_path: Path,
                 grace_s: float = ..., progress: Progress | None = None) -> tuple[Finding, LaunchResult | None]:
        ...


class Served(Protocol):
    """The engine as the launcher sees it (a part of ``engine.Engine``)."""

    @property
    def display(self) -> str: ...

    @property
    def server_module(self) -> str: ...

    @property
    def metrics_args(self) -> tuple[str, ...]:
        """The flags that make it serve Prometheus ``/metrics`` (read by ``gpulayout measure``)."""
        ...

    def parse_version(self, text: str) -> Version: ...

    def default_command(self, version: Version | None, python: str) -> list[str]: ...

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]: ...

    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]: ...

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]: ...

    def across_hosts(self) -> AcrossHosts | None: ...

    def cuda_indices_only(self) -> bool: ...

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher: ...

    def own_launch(self) -> OwnLaunch | None: ...

    @property
    def stop_signal(self) -> int: ...
