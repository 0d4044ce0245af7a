"""TensorRT-LLM's launch: ``trtllm-serve serve MODEL`` with the deployment's flags, its log watcher, and
the one verdict of its own (a pool too short for ``max_seq_len`` is a start with a shorter one).

The process mechanics are ``launch/``'s. There is no CPU build of TensorRT-LLM: the launch is tested with
the fake engine replaying real TensorRT-LLM logs (``tests/engines/test_trtllm.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.trtllm.defaults import SEQ_LEN_LOWERED_TEXT
from pytest_gpulayout.engines.trtllm.flags import YAML_FLAGS
from pytest_gpulayout.engines.trtllm.log import TrtLlmLogWatcher
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.findings import Finding, Status, worst
from pytest_gpulayout.launch.launcher import LaunchResult, Watcher
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.served import AcrossHosts, OwnLaunch, Served
from pytest_gpulayout.launch.startup import launch_deployment
from pytest_gpulayout.launch.verdict import judge
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec

#: ``serve.py``: ``--moe_expert_parallel_size`` / ``--ep_size``
EP_FLAG = "--ep_size"


def launch_argv(default_command: Sequence[str], dep: Deployment, model_path: str, port: int) -> list[str]:
    """``trtllm-serve serve MODEL --tp_size N --pp_size M --max_seq_len L
    --kv_cache_free_gpu_memory_fraction F [--ep_size TP] --host 127.0.0.1 --port P`` + ``launch.args``.

    The model is positional (``@click.argument("model")``). trtllm-serve has no data-parallel replicas,
    no ``--kv_cache_dtype`` flag (``kv_cache_config.dtype`` in the ``--extra_llm_api_options`` YAML) and no
    ``--load-format`` flag (``load_format: dummy`` in the YAML): the real weights load unless the YAML
    says otherwise.
    """
    if dep.dp > 1:
        raise LaunchError(f"trtllm-serve has no data-parallel replicas (data_parallel_size {dep.dp}): run one "
                          f"deployment per replica")
    if dep.kv_cache_dtype and dep.kv_cache_dtype != "auto" and not any(
            a.partition("=")[0] in YAML_FLAGS for a in dep.launch.args):
        raise LaunchError(f"kv_cache_dtype {dep.kv_cache_dtype}: trtllm-serve takes it only from the "
                          f"--extra_llm_api_options YAML (kv_cache_config: {{dtype: {dep.kv_cache_dtype}}}); "
                          f"add that file to launch.args")
    cmd = list(dep.launch.command) if dep.launch.command else list(default_command)
    argv = [*cmd, model_path]
    if dep.tp != 1:
        argv += ["--tp_size", str(dep.tp)]
    if dep.pp != 1:
        argv += ["--pp_size", str(dep.pp)]
    if dep.max_model_len is not None:
        argv += ["--max_seq_len", str(dep.max_model_len)]
    if dep.memory_fraction is not None:
        argv += ["--kv_cache_free_gpu_memory_fraction", f"{dep.memory_fraction:g}"]
    if dep.enable_expert_parallel:
        argv += [EP_FLAG, str(dep.tp)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    return argv + list(dep.launch.args)


def log_watcher(expected_engines: int, ranks_per_engine: int) -> Watcher:
    return TrtLlmLogWatcher(expected_engines=expected_engines, ranks_per_engine=ranks_per_engine)


@dataclasses.dataclass(frozen=True)
class _Shared:
    """The engine as ``launch/`` sees it, without its own launch (so ``launch_deployment`` runs it)."""

    engine: Served

    @property
    def display(self) -> str:
        return self.engine.display

    @property
    def server_module(self) -> str:
        return self.engine.server_module

    @property
    def stop_signal(self) -> int:
        return self.engine.stop_signal

    @property
    def metrics_args(self) -> tuple[str, ...]:
        return self.engine.metrics_args

    def parse_version(self, text: str) -> Version:
        return self.engine.parse_version(text)

    def default_command(self, version: Version | None, python: str) -> list[str]:
        return self.engine.default_command(version, python)

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        return self.engine.expected_reports(version, tp=tp, pp=pp, dp=dp)

    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]:
        return self.engine.launch_argv(dep, model_path, port, version)

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
        return self.engine.node_args(nnodes=nnodes, rank=rank, dist_init_addr=dist_init_addr)

    def across_hosts(self) -> AcrossHosts | None:
        return self.engine.across_hosts()

    def cuda_indices_only(self) -> bool:
        return self.engine.cuda_indices_only()

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher:
        return self.engine.log_watcher(expected_engines, ranks_per_engine)

    def own_launch(self) -> OwnLaunch | None:
        return None


def lowered_verdict(dep: Deployment, model: ModelSpec | None, finding: Finding, result: LaunchResult,
                    name: str) -> Finding:
    """A launch whose log says ``Adjusted max_seq_len to N``: it started, with requests of at most N
    tokens. Judged against N (the requirements still apply), and never better than a warning."""
    lowered = result.log.error_numbers.get("max_seq_len_lowered_to")
    if lowered is None or result.log.kv_tokens is None:
        return finding
    n = int(lowered)
    again = judge(dataclasses.replace(dep, max_model_len=n), model, result, name=name)
    asked = f" (asked for {dep.max_model_len:,})" if dep.max_model_len else ""
    said = ("\"" + SEQ_LEN_LOWERED_TEXT.format(n=n) + "\"")
    message = (f"{name} starts with max_seq_len lowered to {n:,}{asked}: its KV pool of "
               f"{result.log.kv_tokens:,} tokens cannot hold one full request, so it shortens them and warns "
               f"{said} (--fail_fast_on_attention_window_too_large makes it refuse). Lower max_model_len, raise "
               f"memory_fraction or spread the model over more GPUs. {again.message.split(': ', 1)[-1]}")
    return Finding(again.check, worst([again.status, Status.WARN]), message, again.facts)


def make_own_launch(engine: Served) -> OwnLaunch:
    """The shared launch, with TensorRT-LLM's verdict for a lowered ``max_seq_len``."""
    shared = _Shared(engine)

    def own(dep: Deployment, model: ModelSpec | None, *, machine: Machine | None, log_path: Path,
            grace_s: float = 10.0, progress: Progress | None = None) -> tuple[Finding, LaunchResult | None]:
        report = launch_deployment(dep, model, engine=shared, machine=machine, log_dir=log_path.parent,
                                   grace_s=grace_s, progress=progress)
        if report.result is None:
            return report.finding, None
        return lowered_verdict(dep, model, report.finding, report.result, engine.display), report.result

    return own
