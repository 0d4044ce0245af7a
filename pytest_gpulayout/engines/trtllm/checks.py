"""What TensorRT-LLM decides differently from the shared rules (``Engine.amend_check``: the shared finding
comes in, TensorRT-LLM's verdict goes out; this folder never imports ``rules/``).

* ``heads``: ``Mapping``'s rules with TensorRT-LLM's texts (``divisibility.mapping_refusals``:
  ``--ep_size`` / ``--cluster_size`` / ``--cp_size`` from ``launch.args`` and the YAML) before the shared
  head rule.
* ``kv_pool``: first the fraction's bounds (``divisibility.fraction_refusal``); then the shared
  prediction, where a pool that cannot hold one ``max_seq_len`` request is neither a pass nor a fail:
  TensorRT-LLM lowers ``max_seq_len`` to what the pool holds, warns, and starts
  (``resource_manager._validate_and_adjust_attention_windows``), unless
  ``--fail_fast_on_attention_window_too_large`` is given (then it refuses).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pytest_gpulayout.engine import Amend, Override, Subject
from pytest_gpulayout.engines.trtllm.defaults import SEQ_LEN_LOWERED_TEXT
from pytest_gpulayout.engines.trtllm.divisibility import fraction_refusal, mapping_refusals
from pytest_gpulayout.engines.trtllm.flags import parallel_sizes
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.memory.pool import PoolPrediction


def amend_heads(s: Subject, shared: Finding) -> Finding:
    """``Mapping``'s refusals with TensorRT-LLM's text, else the shared ``heads`` verdict."""
    dep = s.dep
    sizes = parallel_sizes(dep.launch.args, dep.base_dir)
    ep = sizes.ep if sizes.ep is not None else (dep.tp if dep.enable_expert_parallel else None)
    refusals = mapping_refusals(world=dep.gpu_count // max(1, dep.dp), tp=dep.tp, pp=dep.pp, cp=sizes.cp, ep=ep,
                                cluster=sizes.cluster, num_experts=s.model.num_experts if s.model.is_moe else None)
    if not refusals:
        return shared
    r = refusals[0]
    return Finding(shared.check, Status.FAIL,
                   f"TensorRT-LLM refuses TP={dep.tp} PP={dep.pp}"
                   + (f" EP={ep}" if ep is not None else "") + (f" CP={sizes.cp}" if sizes.cp else "")
                   + (f" cluster={sizes.cluster}" if sizes.cluster else "")
                   + f" on {dep.gpu_count} GPUs: \"{r.text}\" ({r.source}). Choose an ep_size that divides "
                   f"TP (moe_tp_size x moe_ep_size x moe_cluster_size = TP) and a layout whose TP x PP x CP "
                   f"is the GPU count.", shared.facts)


def _smallest(s: Subject) -> PoolPrediction | None:
    """The replica whose pool is the deployment's, where the pool was predicted."""
    try:
        replicas = s.replicas
    except Exception:  # the shared finding already says why there is no prediction
        return None
    return min(replicas, key=lambda p: p.kv_tokens) if replicas else None


def amend_kv_pool(s: Subject, f: Finding) -> Finding:
    """The fraction's bounds, then the shared pool, with TensorRT-LLM's start with a shorter max_seq_len."""
    dep = s.dep
    if dep.memory_fraction is not None:
        r = fraction_refusal(dep.memory_fraction)
        if r is not None:
            return Finding(f.check, Status.FAIL, f"memory_fraction {dep.memory_fraction:g} is "
                           f"--kv_cache_free_gpu_memory_fraction, and TensorRT-LLM refuses it: \"{r.text}\" "
                           f"({r.source}). Use a fraction below 1.", f.facts)
    limit = s.model.max_position_embeddings
    # the shared rule refuses such a max_model_len at config time (KvPoolFacts.refused_at_config) where the
    # pool itself did not already fail; TensorRT-LLM's config check for it was not read
    refused_at_config = f.status is Status.FAIL and getattr(f.facts, "refused_at_config", False)
    too_long = bool(dep.max_model_len and limit and dep.max_model_len > limit)
    if (too_long and f.status is not Status.FAIL) or refused_at_config:
        return Finding(f.check, Status.WARN,
                       f"max_model_len {dep.max_model_len:,} is beyond {s.model.name}'s "
                       f"{limit:,} positions; what TensorRT-LLM does then was not read (not "
                       f"modelled): use max_model_len {limit:,} or less to be sure.", f.facts)
    if f.status is not Status.WARN:
        return f
    p = _smallest(s)
    if p is None or p.fits_one_request is not False or p.kv_tokens <= 0:
        return f
    n = p.kv_tokens  # get_max_atten_window_upper_bound: whole blocks, beam width 1
    head = f.text
    if parallel_sizes(dep.launch.args, dep.base_dir).fail_fast:
        return Finding(f.check, Status.FAIL, f"TensorRT-LLM refuses to start: the pool of {n:,} tokens "
                       f"cannot hold one {p.max_model_len:,}-token request and "
                       f"--fail_fast_on_attention_window_too_large is set. {head}", f.facts)
    return Finding(f.check, Status.WARN,
                   f"starts with max_seq_len lowered to {n:,}: TensorRT-LLM's pool cannot hold one "
                   f"{p.max_model_len:,}-token request, so it warns \"{SEQ_LEN_LOWERED_TEXT.format(n=n)}\" and "
                   f"serves requests of at most {n:,} tokens (resource_manager.py "
                   f"_validate_and_adjust_attention_windows). {head}", f.facts)


#: the checks whose shared finding TensorRT-LLM amends, by name (``EngineRules.check_overrides``)
OVERRIDES: Mapping[str, Override] = MappingProxyType({"heads": Amend(amend_heads), "kv_pool": Amend(amend_kv_pool)})
