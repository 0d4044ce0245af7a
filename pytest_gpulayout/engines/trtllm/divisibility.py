"""What TensorRT-LLM refuses about a layout, with its own texts: the ``Mapping`` rules, the expert split,
and the memory fraction's bounds.

``tensorrt_llm/mapping.py`` (``MappingBase.__init__``, 1.2.0rc2, commit b35ac1b6):

* ``world_size == tp_size * pp_size * cp_size`` else ``ValueError("world_size must equal to tp_size *
  pp_size * cp_size, but got {world_size} != {tp_size} * {pp_size} * {cp_size}.")``
* without MoE sizes ``moe_tp_size = tp_size // moe_cluster_size``; with ``moe_ep_size`` given
  ``moe_tp_size = tp_size // (moe_ep_size * moe_cluster_size)``; then ``moe_tp_size * moe_ep_size *
  moe_cluster_size == tp_size`` (the MoE world is TP under Ulysses CP) else ``ValueError("moe_tp_size *
  moe_ep_size * moe_cluster_size must equal to moe_world_size, but got {x} != {moe_world_size}")``
* ``ep_experts``: each EP rank gets ``num_experts // moe_ep_size`` experts (a remainder has no rank).
  No TensorRT-LLM text for an uneven split was found in the files read, so the finding says so.
* ``pp_layers``: ``torch.tensor_split`` of the layers, so the *first* ``num_layers % pp`` stages take
  one more layer (``stage_split``); a stage without layers gets one KV layer anyway
  (``resource_manager.get_pp_layers``), and the shared ``heads`` check refuses PP above the layer count.

KV heads per rank are ``ceil(num_kv_heads / tp_size)`` (``resource_manager.KVCacheManager``; 1 with
attention DP), which the shared per-rank arithmetic gives for every TP the head rule lets through.
TensorRT-LLM's quantized-share rules (FP8 blocks, int4 groups) were not read: not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpulayout.engine import ShardLayout
from pytest_gpulayout.engines.trtllm.defaults import FRACTION_BELOW_ONE_TEXT, FRACTION_RANGE_TEXT
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.shards import ShardRules, WidthProblem

MAPPING_SOURCE = "tensorrt_llm/mapping.py MappingBase.__init__ (1.2.0rc2)"
RULES = ShardRules(ep_spans="TP", dp_splits_experts=False)


@dataclass(frozen=True)
class MappingRefusal:
    """One layout ``Mapping`` (or the KV cache config) refuses: TensorRT-LLM's text and where it is."""

    text: str
    source: str


def expert_layout(tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
    """``(moe_ep_size, moe_tp_size)``: EP = TP when expert parallel is on (``--ep_size TP``), else every
    expert is split over the TP group (``moe_tp_size = tp_size``). trtllm-serve has no DP replicas."""
    return (tp, 1) if expert_parallel else (1, tp)


def mapping_refusals(*, world: int, tp: int, pp: int, cp: int | None = None, ep: int | None = None,
                     cluster: int | None = None, num_experts: int | None = None) -> list[MappingRefusal]:
    """Every ``Mapping`` rule the layout breaks, in the order ``MappingBase.__init__`` raises them."""
    out: list[MappingRefusal] = []
    cp_size = cp or 1
    if tp * pp * cp_size != world:
        out.append(MappingRefusal("ValueError: world_size must equal to tp_size * pp_size * cp_size, "
                                  f"but got {world} != {tp} * {pp} * {cp_size}.", MAPPING_SOURCE))
    cluster_size = cluster or 1
    moe_world = tp  # Ulysses CP (the default): the MoE world is the TP group
    if ep is None:
        moe_tp, moe_ep = moe_world // cluster_size, 1
    else:
        moe_ep = ep
        moe_tp = moe_world // (ep * cluster_size) if ep * cluster_size else 0
    product = moe_tp * moe_ep * cluster_size
    if product != moe_world:
        out.append(MappingRefusal("ValueError: moe_tp_size * moe_ep_size * moe_cluster_size must equal to "
                                  f"moe_world_size, but got {product} != {moe_world}", MAPPING_SOURCE))
    if num_experts and moe_ep > 1 and num_experts % moe_ep:
        out.append(MappingRefusal(
            f"{num_experts} experts do not split over moe_ep_size {moe_ep}: Mapping.ep_experts gives each rank "
            f"num_experts // moe_ep_size = {num_experts // moe_ep} and no rank the other "
            f"{num_experts % moe_ep} (no TensorRT-LLM text of its own found)",
            "tensorrt_llm/mapping.py MappingBase.ep_experts (1.2.0rc2)"))
    return out


def fraction_refusal(fraction: float) -> MappingRefusal | None:
    """The fraction's bounds: ``KvCacheConfig``'s validator (0..1), then the KV manager's ``< 1.0``."""
    if not 0 <= fraction <= 1:
        return MappingRefusal(f"ValueError: {FRACTION_RANGE_TEXT}",
                              "tensorrt_llm/llmapi/llm_args.py KvCacheConfig.validate_free_gpu_memory_fraction")
    if fraction >= 1.0:
        return MappingRefusal("AssertionError: " + FRACTION_BELOW_ONE_TEXT.format(f=fraction),
                              "tensorrt_llm/_torch/pyexecutor/resource_manager.py "
                              "KVCacheManager.calculate_max_num_blocks (1.2.0rc2)")
    return None


def shard_problems(model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """No quantized-share rule of TensorRT-LLM is modelled; say so for a quantized checkpoint."""
    if model.quantization is not None:
        return [], [f"TensorRT-LLM's per-rank rules for {model.quantization.method} shares are not modelled"]
    return [], []
