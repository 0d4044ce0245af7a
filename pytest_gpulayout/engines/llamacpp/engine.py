"""llama.cpp as an ``Engine``: its names, flags, defaults and checks, from the modules beside this one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from packaging.version import Version

from pytest_gpulayout.engines.llamacpp.checks import CHECKS

if TYPE_CHECKING:

    from pytest_gpulayout.model.spec import ModelSpec

from pytest_gpulayout.engine import CheckTable, Flags, FractionDefault, RayCluster, ShardLayout
from pytest_gpulayout.engines.llamacpp.flags import (
    ENGINE,
    NAME,
    ROW_SPLIT_GONE_BUILD,
    build_number,
)
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.shards import ShardRules, WidthProblem


class LlamaCppEngine:
    """llama.cpp's ``llama-server`` behind the common ``Engine`` protocol.

    Its layouts are split modes over one process, not TP x PP x DP ranks: the manifest's llama.cpp
    keys (``manifest/llamacpp.py``) carry them, its rules answer under the shared check names
    (``rules/llamacpp.py``) and its launch has its own argv and log lines (``launch/llamacpp.py``).
    What the protocol asks about memory fractions and ranks has the fixed answers below.
    """

    name = ENGINE
    display = NAME
    distributions: tuple[str, ...] = ()          # a binary, not a Python package
    latest_known = f"b{ROW_SPLIT_GONE_BUILD}"     # the build whose source the rules were read from
    kv_cache_dtypes: tuple[str, ...] = ()  # its cache types are cache_type_k / cache_type_v
    long_context_env = ""
    pp_partition_env = ""
    server_module = ""
    #: layers split by memory, no TP groups: answers of its own under the same check names
    checks: CheckTable | None = CHECKS
    flags = Flags(model="-m", tensor_parallel_size="", pipeline_parallel_size="", data_parallel_size="",
                  max_model_len="", memory_fraction="", kv_cache_dtype="")  # own keys: manifest/llamacpp.py

    def parse_version(self, text: str) -> Version:
        """llama.cpp's releases are build numbers (``b11434``), compared as ``Version("11434")``."""
        build = build_number(text)
        if build is None:
            raise InputError(f"not a llama.cpp build: {text!r} (e.g. b11434)", key="engine_version")
        return Version(str(build))

    def default_command(self, version: Version | None, python: str) -> list[str]:
        return ["llama-server"]

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        return FractionDefault(1.0, f"{NAME} has no memory fraction: it allocates what the layers need")

    def knobs(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchKnobs:
        return LaunchKnobs(env=MappingProxyType(dict(env)))

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        """One process holds every expert whole (its layer split is by memory, not TP ranks)."""
        return 1, 1

    def shard_rules(self) -> ShardRules:
        return ShardRules(ep_spans="", dp_splits_experts=False)

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        """No TP shares: its own checks (``checks.py``) judge the layer split."""
        return [], []

    def mig_note(self) -> str:
        return ""

    def ray_cluster(self) -> RayCluster | None:
        return None

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        return 1, 1


LLAMACPP = LlamaCppEngine()
