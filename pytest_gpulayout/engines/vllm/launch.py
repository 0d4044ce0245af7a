"""vLLM's launch specifics: its argument vector, how it spans hosts, and the log watcher that reads it.

The process mechanics are ``launch/``'s (launcher, watchdog, locks, process tree); this module only
says what is vLLM's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.vllm.log import VLLM_LOG
from pytest_gpulayout.launch.argv import FlagNames, serve_argv
from pytest_gpulayout.launch.logparse import LogWatcher

#: ``--enable-expert-parallel`` (``engine/arg_utils.py``): experts spread over the TP group
EXPERT_PARALLEL = ("--enable-expert-parallel",)
#: Across hosts vLLM runs one API server with the Ray executor (``--distributed-executor-backend ray``);
#: its workers are Ray actors it places itself (``v1/executor/ray_utils.py initialize_ray_cluster``).
RAY_EXECUTOR = ("--distributed-executor-backend", "ray")


def launch_argv(flags: FlagNames, default_command: Sequence[str], dep: Deployment, model_path: str,
                port: int) -> list[str]:
    """``vllm serve MODEL`` (or ``--model``) with the deployment's flags; ``launch.command`` replaces the
    entry point."""
    cmd = list(dep.launch.command) if dep.launch.command else list(default_command)
    return serve_argv(flags, cmd, dep, model_path, port, expert_parallel=EXPERT_PARALLEL)


def log_watcher(expected_engines: int, ranks_per_engine: int) -> LogWatcher:
    return LogWatcher((VLLM_LOG,), expected_engines, ranks_per_engine)

