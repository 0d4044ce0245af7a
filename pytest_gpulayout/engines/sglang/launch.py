"""SGLang's launch specifics: its argument vector, how it spans hosts, and the log watcher that reads it.

The process mechanics are ``launch/``'s (launcher, watchdog, locks, process tree); this module only
says what is SGLang's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.sglang.log import SGLANG_LOG
from pytest_gpulayout.launch.argv import FlagNames, serve_argv
from pytest_gpulayout.launch.logparse import LogWatcher


def expert_parallel(tp: int) -> tuple[str, ...]:
    """``--ep-size`` (``server_args.py``): experts spread over the TP group."""
    return ("--ep-size", str(tp))


def launch_argv(flags: FlagNames, default_command: Sequence[str], dep: Deployment, model_path: str,
                port: int, *, data_parallel_size: int | None = None) -> list[str]:
    """``python -m sglang.launch_server --model-path MODEL`` with the deployment's flags; ``launch.command``
    replaces the entry point. ``data_parallel_size``: the ``--dp-size`` the line needs where it differs from the
    replicas (attention DP spelt ``--dp-size N --enable-dp-attention``: ``parallel.written_dp``)."""
    cmd = list(dep.launch.command) if dep.launch.command else list(default_command)
    if data_parallel_size is not None and data_parallel_size != dep.data_parallel_size:
        dep = replace(dep, data_parallel_size=data_parallel_size, attention_data_parallel_size=1)
    return serve_argv(flags, cmd, dep, model_path, port, expert_parallel=expert_parallel(dep.tp))


def node_args(*, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
    """One server process per host: ``--nnodes N --node-rank i --dist-init-addr HEAD:PORT``
    (``python/sglang/srt/server_args.py``)."""
    return ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", dist_init_addr]


def log_watcher(expected_engines: int, ranks_per_engine: int) -> LogWatcher:
    return LogWatcher((SGLANG_LOG,), expected_engines, ranks_per_engine)
