"""SGLang's refusals that read the attention backends it resolves (``engines/sglang/attention.py``), by release.

``handle_unified_memory_pool`` (0.5.22 ``arg_groups/kv_cache_hook.py`` l.711-720) asserts, with
``--enable-unified-memory``, that a ``trtllm_mha`` decode backend (``attention_backends_of`` after the backend pick,
``pipeline.py`` l.232 before l.326) runs without decode CUDA graphs. The decode graph is on by default
(``handle_cuda_graph_config``, ``cuda_graph_hook.py`` l.45-80: ``--disable-cuda-graph``,
``--disable-decode-cuda-graph``, ``--cuda-graph-backend-decode`` and ``--cuda-graph-config`` set it, read by
``rules_mamba2.phase_backends``); the hooks between turn it off only for the torch_native / flex_attention base
backend (``attention_hook.py`` l.123-151), ``--enable-mis`` (l.544), a PD prefill worker (``cuda_graph_hook.py``
l.520-528), DeepEP normal mode (``moe_hook.py`` l.325), the tensor-dump / msprobe debug flags (``serving_hook.py``
l.523-555), a diffusion LLM (``dllm_hook.py`` l.45), XPU and the HRM-text / embedding-Gemma models
(``platform_hook.py`` l.130-146, ``model_hook.py`` l.792 / l.916). Judged where the resolver resolves the decode
backend and none of those flags is on the line; else not judged, said.

``validate_kv_shard_attention_backend`` (0.5.22 ``kv_shard_hook.py`` l.26-45, 0.5.23 l.30-84; called by
``handle_kv_cache_sharding`` after its flag checks, 0.5.22 l.170, run after the backend pick, ``pipeline.py``
l.272, and again after the model capability adjustments, l.347) with ``--enable-kv-cache-sharding``: a prefill
backend other than fa3 / trtllm_mla refuses, and trtllm_mla on a model without MLA. 0.5.23 first takes the ``dsa``
backend and a DSA model (l.33-67): the resolver resolves neither, so those lines are not judged. The resolved prefill
backend is ``attention.resolve_backends``'; where it does not resolve, not judged, said.
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.attention import resolve_backends
from pytest_gpulayout.engines.sglang.rules_mamba2 import phase_backends
from pytest_gpulayout.refusals import Judged

UNIFIED_TRTLLM_MHA = "sglang.attn.unified_memory_trtllm_mha_graphs"

KV_SHARD_BACKEND = "sglang.attn.kv_shard_prefill_backend"

RULES: Mapping[str, str] = {
    KV_SHARD_BACKEND: "--enable-kv-cache-sharding with a prefill attention backend SGLang resolves (or the line "
                      "names) other than fa3 / trtllm_mla, or trtllm_mla on a model without MLA (0.5.22+)",
    UNIFIED_TRTLLM_MHA: "--enable-unified-memory with the trtllm_mha decode backend SGLang resolves (or the line "
                        "names) and decode CUDA graphs on (0.5.22)",
}

#: the releases whose ``handle_unified_memory_pool`` holds the assert (0.5.22 l.715; 0.5.23 drops it)
_SINCE, _UNTIL = Version("0.5.22"), Version("0.5.22")
#: flags whose hooks turn the decode graph off (see the module docstring)
_GRAPH_OFF_FLAGS = ("enable_mis", "debug_tensor_dump_output_folder", "msprobe_dump_config", "dllm_algorithm",
                    "deepep_mode", "moe_a2a_backend")


def judge(ask: Ask) -> Judged:
    """Both checks (see the module), each in its own frame."""
    parts = (judge_unified(ask), judge_kv_shard(ask))
    return Judged(tuple(r for p in parts for r in p.refusals), tuple(n for p in parts for n in p.not_judged))


def judge_kv_shard(ask: Ask) -> Judged:
    """KV sharding's prefill-backend check over the resolved prefill backend (see the module)."""
    rules = ask.among((KV_SHARD_BACKEND,))
    if not rules or not ask.args.get("enable_kv_cache_sharding"):
        return Judged()
    resolved = resolve_backends(ask.args, ask.model, ask.layout, ask.listed)
    if resolved.prefill is None:
        return Judged((), (f"{RULES[KV_SHARD_BACKEND]}: not judged ({resolved.reason})",))
    if resolved.prefill == "fa3":
        return Judged()  # the check returns (0.5.22 l.29-30)
    values: dict[str, object] = {"prefill_backend": resolved.prefill, "use_mla_backend": ask.model.is_mla,
                                 "is_deepseek_dsa": False}
    return ask.judge(values, rules)


def judge_unified(ask: Ask) -> Judged:
    """The unified-memory trtllm_mha decode-graph assert over the resolved decode backend (see the module)."""
    args, listed = ask.args, ask.listed
    rules = ask.among((UNIFIED_TRTLLM_MHA,))
    if not rules or not args.get("enable_unified_memory") or not (_SINCE <= listed <= _UNTIL):
        return Judged()
    resolved = resolve_backends(args, ask.model, ask.layout, listed)
    graphs = phase_backends(args)
    off_flag = next((f for f in _GRAPH_OFF_FLAGS if args.is_set(f) and args.get(f) not in (None, False, "none")),
                    None)
    why = (resolved.reason if resolved.decode is None else
           "--cuda-graph-config as the release's parser reads it is not resolved" if graphs is None else
           f"--{off_flag.replace('_', '-')} may turn the decode CUDA graph off" if off_flag is not None else
           "a PD prefill worker's decode graph is turned off" if args.get("disaggregation_mode") == "prefill" else
           f"the {resolved.base} base backend turns CUDA graphs off"
           if resolved.base in ("torch_native", "flex_attention") else None)
    if why is not None:
        return Judged((), (f"{RULES[UNIFIED_TRTLLM_MHA]}: not judged ({why})",))
    assert graphs is not None
    decode_graph = str(graphs.get("decode", "full"))
    values: dict[str, object] = {"decode_backend": resolved.decode, "_cg_cfg": "resolved",
                                 "_cg_cfg.decode.backend": decode_graph, "Backend.DISABLED": "disabled"}
    return ask.judge(values, rules)
