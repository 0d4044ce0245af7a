"""llama.cpp as an engine: manifest keys, the GGUF reader, layer/KV arithmetic, the verdicts on two
mismatched cards, parse-log on llama.cpp logs, the planner, and a real ``llama-server`` launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import subject
from gguf_tiny import write_tiny_llama
from real_engines import llama_server

from pytest_gpulayout.engines.llamacpp.flags import LlamaCppFlags, parse_version_output
from pytest_gpulayout.engines.llamacpp.log import parse_llamacpp_log
from pytest_gpulayout.engines.llamacpp.memory import (
    context_size,
    fitting_split,
    kv_total_bytes,
    layer_devices,
    plan_layout,
)
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.model.gguf import load_gguf

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent
EXAMPLE = ROOT / "examples" / "06-llamacpp-mismatched"
LOGS = HERE / "data" / "logs" / "llamacpp"
MIB = 1024 * 1024


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def two_cards(free0: int = 24010, free1: int = 7905, link: str = "PHB") -> Machine:
    return Machine(gpus=(Gpu(0, "GPU-a", "RTX 4090", memory_total_mib=24564, memory_free_mib=free0),
                         Gpu(1, "GPU-b", "RTX 4060 Ti", memory_total_mib=8188, memory_free_mib=free1)),
                   links={(0, 1): link}, source="test")


# -- GGUF ---------------------------------------------------------------------------------------
def test_gguf_shapes_and_bytes_come_from_the_file(tiny: Path):
    spec = load_gguf(tiny)
    assert (spec.arch, spec.num_hidden_layers, spec.num_attention_heads, spec.num_key_value_heads) == ("llama", 4, 4, 2)
    assert spec.head_dim_k == 16 and spec.n_ctx_train == 4096 and spec.vocab_size == 263
    # f16 matrices: q 64x64, k/v 32x64, o 64x64, gate/up/down 128x64, plus two f32 norms of 64
    assert spec.layer_weight_bytes(0) == (64 * 64 * 2 + 2 * 32 * 64 + 3 * 128 * 64) * 2 + 2 * 64 * 4
    assert spec.input_bytes == 263 * 64 * 2
    assert spec.output_bytes == 263 * 64 * 2 + 64 * 4
    assert spec.file_bytes == sum(t.n_bytes for t in spec.tensors)


def test_tied_output_counts_the_duplicated_embedding(tmp_path: Path):
    spec = load_gguf(write_tiny_llama(tmp_path / "tied.gguf", tied=True))
    assert spec.output_bytes == 263 * 64 * 2 + 64 * 4


def test_not_a_gguf_is_one_line(tmp_path: Path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(InputError, match="not a GGUF file"):
        load_gguf(bad)


# -- arithmetic -----------------------------------------------------------------------------------
def test_context_padding_and_streams(tiny: Path):
    spec = load_gguf(tiny)
    ctx = context_size(spec, LlamaCppFlags(ctx_size=1000, parallel=3))
    assert (ctx.n_ctx, ctx.cells, ctx.streams) == (1536, 512, 3)
    unified = context_size(spec, LlamaCppFlags(ctx_size=1000))  # auto slots: 4 sharing one stream
    assert (unified.n_ctx, unified.cells, unified.streams, unified.slots) == (1024, 1024, 1, 4)
    q8 = kv_total_bytes(spec, LlamaCppFlags(ctx_size=1024, parallel=1, cache_type_k="q8_0", cache_type_v="q8_0"),
                        context_size(spec, LlamaCppFlags(ctx_size=1024, parallel=1)))
    assert q8 == 4 * 2 * (32 // 32 * 34) * 1024  # 4 layers x (K+V) x one q8_0 block per 32 values x cells


def test_layers_follow_the_split_points():
    # 64 layers + output by free memory 24010:7905 -> 49 on the big card, 15 + output on the small
    where = layer_devices(64, -1, (24010, 7905))
    assert where.count(0) == 49 and where.count(1) == 16 and where[-1] == 1
    # n_gpu_layers 40: the first 25 layers stay on the CPU, output layer offloaded
    partial = layer_devices(64, 40, (1, 1))
    assert partial[:25] == (None,) * 25 and None not in partial[25:]


def test_none_mode_puts_everything_on_main_gpu(tiny: Path):
    spec = load_gguf(tiny)
    lay = plan_layout(spec, LlamaCppFlags(split_mode="none", main_gpu=1, ctx_size=512, parallel=1), (0, 1),
                      [24010, 7905])
    assert lay.devices[0].total == 0 and len(lay.devices[1].layers) == 4
    assert lay.devices[1].kv == kv_total_bytes(spec, LlamaCppFlags(ctx_size=512, parallel=1), lay.ctx)


def test_row_mode_keeps_kv_on_main_gpu(tiny: Path):
    spec = load_gguf(tiny)
    lay = plan_layout(spec, LlamaCppFlags(split_mode="row", tensor_split=(3.0, 1.0), ctx_size=512, parallel=1),
                      (0, 1), [24010, 7905])
    assert lay.devices[1].kv == 0 and lay.devices[0].kv > 0
    assert lay.devices[0].weights > 2 * lay.devices[1].weights


def test_fitting_split_for_24_and_8_gb_is_3_1():
    spec = load_gguf(EXAMPLE / "qwen2.5-32b-q4_k_m.header.gguf")
    assert fitting_split(spec, LlamaCppFlags(ctx_size=16384, parallel=1), (0, 1), [24010, 7905], 1024) == (3, 1)


# -- the example: verdicts with numbers ---------------------------------------------------------
def test_example_check_gives_split_mode_and_ratio_verdicts():
    r = cli("check", str(EXAMPLE / "gpulayout.yaml"), "--json")
    assert r.returncode == 1, r.stderr
    deps = json.loads(r.stdout)["deployments"]
    even = deps["layer-even"]["checks"]["balance"]
    assert even["status"] == "fail" and even["data"]["suggested_tensor_split"] == [3, 1]
    assert "GPU1 overflows by 4.28 GiB" in even["message"]
    assert deps["layer-3-1"]["status"] == "pass"
    free = deps["layer-by-free-memory"]["checks"]["balance"]["data"]
    assert free["split_source"] == "free memory" and free["devices"][1]["layers"] == 15
    assert deps["tensor-3-1"]["checks"]["links"]["status"] == "warn"
    assert "use split_mode: layer" in deps["tensor-3-1"]["checks"]["links"]["message"]
    assert deps["row-3-1"]["checks"]["links"]["status"] == "fail"  # b11434's CUDA backend has no row split
    kv = deps["layer-3-1"]["checks"]["kv_pool"]["data"]
    assert kv["kv_bytes"] == 64 * 8 * 128 * 2 * 2 * 16384 and kv["kv_mib_per_device"] == {"GPU0": 3136.0,
                                                                                           "GPU1": 960.0}


def test_example_plan_ranks_layer_splits_first():
    r = cli("plan", str(EXAMPLE / "qwen2.5-32b-q4_k_m.header.gguf"), "--engine", "llamacpp", "--machine",
            str(EXAMPLE / "machine.yaml"), "--max-model-len", "16384", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["layouts"]
    assert rows[0]["split_mode"] == "layer" and rows[0]["status"] == "pass" and rows[0]["rank"] == 1
    ranked = [x for x in rows if x["rank"] is not None]
    assert [x["rank"] for x in ranked] == list(range(1, len(ranked) + 1))
    modes = [x["split_mode"] for x in ranked]
    assert modes.index("layer") < modes.index("tensor") < modes.index("row")
    even = next(x for x in rows if x["tensor_split"] == [1.0, 1.0])
    assert even["rank"] is None and even["refused_by"] == "balance"


def test_plan_max_model_len_is_each_slots_length():
    """`plan --max-model-len 8192 --concurrency 2` plans two slots of 8,192 tokens: llama.cpp's --ctx-size is
    the total its --parallel slots split (src/llama-context.cpp), so the context is 16,384. It was given
    8,192 in all, two slots of 4,096: half the KV the user asked for, and layouts passed that cannot hold it."""
    r = cli("plan", str(EXAMPLE / "qwen2.5-32b-q4_k_m.header.gguf"), "--engine", "llamacpp", "--machine",
            str(EXAMPLE / "machine.yaml"), "--max-model-len", "8192", "--concurrency", "2", "--json")
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["layouts"][0]
    kv = top["checks"]["kv_pool"]["data"]
    assert (kv["slots"], kv["n_ctx"], kv["kv_bytes"]) == (2, 16384, 64 * 8 * 128 * 2 * 2 * 16384)
    assert top["full_length_requests"] == 2
    assert "2 slots x 8,192 cells" in top["checks"]["kv_pool"]["message"]


def test_plan_takes_the_build_tag_and_agrees_with_check_about_row_split():
    """Issue 24 item 14: `plan --engine-version b11434` was refused ("not a version") though the manifest
    takes it, and plan ranked `row 3,1` among the layouts that serve while `check` fails it on CUDA."""
    common = ["--engine", "llamacpp", "--machine", str(EXAMPLE / "machine.yaml"), "--max-model-len", "16384"]
    r = cli("plan", str(EXAMPLE / "qwen2.5-32b-q4_k_m.header.gguf"), *common, "--engine-version", "b11434", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["layouts"]
    row31 = next(x for x in rows if x["split_mode"] == "row" and x["tensor_split"] == [3.0, 1.0])
    checked = cli("check", str(EXAMPLE / "gpulayout.yaml"), "--json")
    assert json.loads(checked.stdout)["deployments"]["row-3-1"]["checks"]["links"]["status"] == "fail"
    assert row31["status"] == "fail" and row31["rank"] is None     # what check says: it does not start
    assert "no split buffers" in row31["checks"]["links"]["message"]
    wrong = cli("plan", str(EXAMPLE / "qwen2.5-32b-q4_k_m.header.gguf"), *common, "--engine-version", "0.11.0")
    assert wrong.returncode == 2 and "build tags such as b11434" in wrong.stderr


@pytest.mark.parametrize("case", ["missing", "log-exists"])
def test_install_llama_server_hint_only_when_the_command_is_missing(case: str, tmp_path: Path):
    """Issue 24 item 7: every launch error (a planted log file too) used to end in "Install llama-server"."""
    from pytest_gpulayout.deployment import Deployment, Launch
    from pytest_gpulayout.engines.llamacpp.flags import LlamaCppFlags
    from pytest_gpulayout.engines.llamacpp.launch import launch_llamacpp

    command = (str(tmp_path / "no-such-llama-server"),) if case == "missing" else (sys.executable,)
    dep = Deployment(name="d", model=str(tmp_path / "m.gguf"), engine="llamacpp", llamacpp=LlamaCppFlags(),
                     launch=Launch(command=command, timeout_s=10), base_dir=tmp_path)
    log = tmp_path / "startup.log"
    if case == "log-exists":
        log.write_text("someone else's file\n")
    finding, result = launch_llamacpp(dep, None, machine=None, log_path=log)
    assert finding.status is Status.FAIL and result is None
    if case == "missing":
        assert "was not found" in finding.message and "Install llama-server" in finding.message
    else:
        assert "already exists" in finding.message and "Install llama-server" not in finding.message
        assert log.read_text() == "someone else's file\n"


# -- manifest -------------------------------------------------------------------------------------
def _manifest(tmp_path: Path, body: str, model: Path) -> Path:
    p = tmp_path / "gpulayout.yaml"
    p.write_text(f"version: 1\nmachine: {EXAMPLE / 'machine.yaml'}\ndeployments:\n  d:\n    model: {model}\n"
                 + body)
    return p


@pytest.mark.parametrize(("body", "needle"), [
    ("    engine: llamacpp\n    ngl: 10\n", "deployments.d.ngl: unknown key 'ngl': did you mean 'n_gpu_layers'?"),
    ("    engine: llamacpp\n    split_mode: layers\n", "did you mean 'layer'?"),
    ("    engine: vllm\n    split_mode: layer\n", "deployments.d.split_mode: is a llama.cpp key"),
    ("    engine: llamacpp\n    gpus: [0, 1]\n    tensor_split: [3, 1, 1]\n", "has 3 proportions for 2 GPUs"),
    ("    engine: llamacpp\n    split_mode: tensor\n    cache_type_k: q8_0\n", "keeps K/V unquantized"),
    ("    engine: llamacpp\n    tensor_parallel_size: 2\n", "llama.cpp has no TP size"),
    ("    engine: llamacpp\n    cache_type_v: Q8_0\n", "write 'q8_0'"),
    ("    engine: llamacpp\n    tensor_split: \"3,1\"\n", "write [3, 1]"),
    ("    engine: llamacpp\n    launch: {args: [-ngl, '10']}\n", "which the manifest key 'n_gpu_layers' controls"),
    # the llama.cpp keys go through the manifest's own value validators
    ("    engine: llamacpp\n    fit: \"yes\"\n", "deployments.d.fit: must be true or false, not the string 'yes'"),
    ("    engine: llamacpp\n    ctx_size: 8k\n",
     "deployments.d.ctx_size: must be an integer >= 1, not the string '8k'"),
    ("    engine: llamacpp\n    rpc_host: \"\"\n", "deployments.d.rpc_host: must be an address string"),
])
def test_bad_llamacpp_keys_are_one_line_naming_the_key(tmp_path: Path, tiny: Path, body: str, needle: str):
    r = cli("check", str(_manifest(tmp_path, body, tiny)))
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_quantized_cache_that_does_not_divide_the_head_size_fails_heads(tmp_path: Path, tiny: Path):
    r = cli("check", str(_manifest(tmp_path, "    engine: llamacpp\n    cache_type_k: q8_0\n", tiny)), "--json")
    heads = json.loads(r.stdout)["deployments"]["d"]["checks"]["heads"]
    assert r.returncode == 1 and heads["status"] == "fail" and "do not divide the head size 16" in heads["message"]


def test_rpc_to_another_host_fails_unless_the_manifest_says_where_it_listens(tmp_path: Path, tiny: Path):
    body = "    engine: llamacpp\n    rpc: [192.168.1.20:50052]\n"
    r = cli("check", str(_manifest(tmp_path, body, tiny)), "--json")
    links = json.loads(r.stdout)["deployments"]["d"]["checks"]["links"]
    assert r.returncode == 1 and links["status"] == "fail" and "rpc_host" in links["message"]
    r = cli("check", str(_manifest(tmp_path, body + "    rpc_host: 192.168.1.20\n", tiny)), "--json")
    links = json.loads(r.stdout)["deployments"]["d"]["checks"]["links"]
    assert links["status"] == "warn" and "insecure proof of concept" in links["message"]


# -- logs -------------------------------------------------------------------------------------------
def _paste(name: str) -> str:
    """The log lines of a file in tests/data/logs/llamacpp/, without the source header above ``---``."""
    text = (LOGS / name).read_text(encoding="utf-8")
    _head, sep, body = text.partition("\n---\n")
    return body if sep else text


# Real logs: pasted in public issue threads (README.md there names each source) or recorded here.
# name, KV MiB in all, KV MiB per buffer, each KV cache's (MiB, cells, layers), KV pool tokens, error kind
@pytest.mark.parametrize(("name", "kv_mib", "buffers", "caches", "tokens", "kind"), [
    # current format, two GPUs (-ts 1 1), then the compute buffer does not fit
    ("current-2gpu-oom-koboldcpp1882.log", 23480.0, {"CUDA0": 9979.0, "CUDA1": 13501.0},
     [(23480.0, 150272, 40)], 150272, "oom"),
    # 2024 format on two GPUs (-ts 10,6): kv_size / n_layer header, then KV self size
    ("older-2gpu-q8-kv-self-11200.log", 4352.0, {"CUDA0": 2788.0, "CUDA1": 1564.0},
     [(4352.0, 32768, 64)], 32768, None),
    # mid-2025: llama_kv_cache_unified with a KV self size total
    ("unified-kv-self-cpu-llmaz402.log", 2048.0, {"CPU": 2048.0}, [(2048.0, 4096, 32)], 4096, None),
    # iswa model: a non-SWA cache (0 layers on DSV4) and an SWA cache, several KV lines
    ("swa-iswa-dsv4-27680.log", 182.75, {"CUDA0": 182.75}, [(0.0, 64000, 0)], 64000, None),
    # the weights do not fit on device 0: no KV line at all
    ("oom-weights-cuda0-20431.log", None, {}, [], None, "oom"),
    ("real-cpu-b11434.log", 0.75, {"CPU": 0.75}, [(0.75, 512, 4)], 1536, None),
])
def test_parse_log_llamacpp(tmp_path: Path, name: str, kv_mib: float | None, buffers: dict[str, float],
                            caches: list[tuple[float, int, int]], tokens: int | None, kind: str | None):
    log = parse_llamacpp_log(_paste(name))
    assert log.kv_mib == kv_mib and dict(log.kv_buffers_mib) == buffers
    assert [(r.mib, r.cells, r.layers) for r in log.kv] == caches
    assert log.to_startup_log().kv_tokens == tokens and log.error_kind == kind
    paste = tmp_path / name
    paste.write_text(_paste(name), encoding="utf-8")
    r = cli("parse-log", str(paste), "--engine", "llamacpp", "--json")
    assert r.returncode == (1 if kind else 0), r.stderr
    out = json.loads(r.stdout)
    assert out["engine"] == "llamacpp" and out["kv_tokens"] == tokens and out["error_kind"] == kind
    assert out["llamacpp"]["kv_mib"] == kv_mib and out["llamacpp"]["kv_buffers_mib"] == buffers
    assert [(c["mib"], c["cells"], c["layers"]) for c in out["llamacpp"]["kv_caches"]] == caches
    assert out["available_kv_gib"] == (round(kv_mib / 1024, 4) if kv_mib is not None else None)


def test_older_kv_self_size_takes_cells_and_layers_from_the_kv_size_line():
    """b4462 prints cells and layers only in ``llama_kv_cache_init: kv_size = 32768, ..., n_layer = 64``."""
    log = parse_llamacpp_log(_paste("older-2gpu-q8-kv-self-11200.log"))
    (cache,) = log.kv
    assert (cache.cells, cache.layers, cache.type_k, cache.type_v) == (32768, 64, "q8_0", "q8_0")
    assert (cache.k_mib, cache.v_mib) == (2176.0, 2176.0)


def test_compute_buffer_retry_without_pipeline_parallelism_is_not_an_error():
    """ggml-org/llama.cpp#26297: 51748.72 MiB fails on device 1, llama.cpp retries without pipeline
    parallelism and the server initializes its slots: no error, and the watcher does not stop."""
    from pytest_gpulayout.engines.llamacpp.log import LlamaCppLogWatcher
    w = LlamaCppLogWatcher()
    for line in _paste("retry-no-pp-recovered-26297.log").splitlines():
        w.feed(line)
    assert not w.failed and w.result().error_kind is None and w.is_llamacpp


def test_failure_after_the_retry_names_the_allocation_that_stopped_the_load():
    """LostRuins/koboldcpp#1882: device 0's 12710.31 MiB was retried; the load stopped on the host
    buffer of 2546057216 bytes (2428.11 MiB) that the smaller graph needed."""
    log = parse_llamacpp_log(_paste("current-2gpu-oom-koboldcpp1882.log"))
    assert log.error_kind == "oom" and log.error_numbers["tried_mib"] == 2428.11
    assert log.error_line is not None and "CUDA_Host buffer of size 2546057216" in log.error_line


def test_parse_log_llamacpp_refuses_a_vllm_log():
    vllm = next((ROOT / "tests" / "data" / "logs" / "vllm-cpu").glob("*.log"))
    r = cli("parse-log", str(vllm), "--engine", "llamacpp")
    assert r.returncode == 2 and "no llama.cpp line" in r.stderr


def test_version_output_of_both_eras():
    assert parse_version_output("version: 0.6.0-dev (build 11434, commit b11434)\nbuilt with GNU") == "b11434"
    assert parse_version_output("version: 4567 (1a2b3c4d)\nbuilt with cc") == "b4567"


# -- the real thing ------------------------------------------------------------------------------


@pytest.mark.engine
@pytest.mark.parametrize(("ctx", "parallel", "cache"), [(1000, 3, "f16"), (4096, 2, "q8_0"), (700, None, "f16")])
def test_real_llama_server_kv_equals_prediction(tmp_path: Path, ctx: int, parallel: int | None, cache: str):
    # head size 32 so that q8_0's blocks of 32 divide it (llama.cpp refuses otherwise; see the heads test)
    tiny = write_tiny_llama(tmp_path / "tiny.gguf", n_head=2, n_head_kv=1)
    from pytest_gpulayout.launch.launcher import process_table
    from pytest_gpulayout.launch.startup import launch_deployment
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.runner import load_models

    server = llama_server()
    body = (f"version: 1\ndeployments:\n  tiny:\n    engine: llamacpp\n    engine_version: b11434\n"
            f"    model: {tiny}\n    ctx_size: {ctx}\n"
            + (f"    parallel: {parallel}\n" if parallel else "")
            + f"    cache_type_k: {cache}\n    cache_type_v: {cache}\n"
            + f"    launch:\n      command: [{server}]\n      timeout_s: 120\n")
    (tmp_path / "gpulayout.yaml").write_text(body)
    manifest = load_manifest(tmp_path / "gpulayout.yaml")
    dep = manifest.deployments[0]
    model = load_models([dep])["tiny"]
    report = launch_deployment(dep, model, engine=ENGINES[dep.engine].launch,
                               machine=Machine(gpus=(), source="cpu"), log_dir=tmp_path / "logs")
    f = report.finding
    assert f.status.value == "pass", f.message
    assert f.data["kv_matches_prediction"] is True
    spec = load_gguf(tiny)
    flags = dep.llamacpp
    assert flags is not None
    predicted = kv_total_bytes(spec, flags, context_size(spec, flags))
    assert f.data["predicted_kv_bytes"] == predicted
    assert f.data["kv_mib"] == round(predicted / MIB, 2)
    assert f.data["llamacpp"]["kv_caches"][0]["cells"] == context_size(spec, flags).cells
    # what it said it ran with agrees with the deployment (build, context per slot and in all, slots)
    said = f.data["engine_config"]
    assert f.data["contradictions"] == [] and said["version"] == "b11434"
    want = context_size(spec, flags)
    assert (int(said["n_ctx"]), int(said["n_ctx_seq"])) == (want.n_ctx, want.cells)
    assert int(said["n_seq_max"]) == flags.slots and said["kv_unified"] == str(flags.kv_unified).lower()
    argv = f.data["command"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert report.result is not None and report.result.leftover_pids == ()
    assert report.result.pid not in process_table()


def test_what_a_topo_paste_cannot_show_is_never_a_pass(tmp_path: Path) -> None:
    # a pasted `nvidia-smi topo -m` has no memory and no processes: llama.cpp's default split (by free
    # memory) and the GPUs' tenants are unknown, so neither placement nor kv_pool may say "pass"
    from pytest_gpulayout.engines.llamacpp.checks import check_kv_pool, check_placement
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.model.load import load_model

    topo = (ROOT / "tests" / "data" / "topo" / "001.txt").read_text().split("---\n", 1)[1]
    (tmp_path / "topo.txt").write_text(topo)
    machine = load_machine(str(tmp_path / "topo.txt"))
    manifest = load_manifest(ROOT / "examples" / "06-llamacpp-mismatched" / "gpulayout.yaml")
    dep = manifest.deployment("layer-by-free-memory")
    model = load_model(dep.model, dep.base_dir)
    pool = check_kv_pool(subject(dep, machine, model))
    assert pool.status is Status.WARN and "NOT known" in pool.message and "free memory" in pool.message
    place = check_placement(subject(dep, machine, model))
    assert place.status is Status.WARN and "unknown" in place.message
