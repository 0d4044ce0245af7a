"""vLLM V1's KV cache for models that mix attention kinds: groups, blocks, the logged token count
and the maximum concurrency, release by release.

Read in the wheels (``pip download --no-deps vllm==X``): ``v1/kv_cache_interface.py`` (each layer's
spec and what one request needs of it), ``v1/core/kv_cache_utils.py`` (``get_kv_cache_groups``,
``get_num_blocks``, ``get_max_concurrency_for_kv_cache_config``; ``v1/core/kv_cache_planning.py`` in
0.33), ``config/vllm.py`` (``max_in_flight_tokens`` from 0.26). What it computes:

* layers of one kind (full, sliding window, chunked local) form groups of ``group_size`` layers:
  ``group_size = max count if max < 1.5 x min count else min count`` over the kinds, each kind split
  into ``cdiv(n, group_size)`` groups, the last one padded ("Add %d padding layers");
* ``num_blocks = budget // (page x group_size)`` (one block of every layer of a group);
* one request needs, per group: full ``cdiv(L, block)``; sliding
  ``cdiv(min(window - 1 + T, L), block) + 1``; chunked ``cdiv(min(chunk + T, L), block)``, with T the
  tokens in flight: ``max_num_batched_tokens`` up to 0.25, ``max_concurrent_batches x`` it from 0.26
  (2 with async scheduling at PP=1, the default; PP stages otherwise);
* ``max_concurrency = num_blocks / sum over groups of the blocks one request needs``;
* the logged "GPU KV cache size": ``num_blocks // len(groups) x block`` up to 0.20.0,
  ``int(max_concurrency x max_model_len)`` from 0.20.1.

Linear-attention / Mamba layers (``MambaSpec``) hold a fixed state per request; vLLM unifies their
page with the attention pages by enlarging the attention block. That unification is approximated:
their state is charged per request next to the attention blocks (the concurrency and the token
count follow), and the message says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.model.spec import CHUNKED, NO_KV, SLIDING

#: The hybrid KV cache manager (one group per attention kind) exists in V1 from 0.10.
HYBRID_SINCE = Version("0.10")
#: The logged token count became ``int(max_concurrency x max_model_len)`` in 0.20.1.
CONCURRENCY_TOKENS_SINCE = Version("0.20.1")
#: Tokens in flight doubled with async scheduling from 0.26 (``max_concurrent_batches``).
IN_FLIGHT_SINCE = Version("0.26")
#: ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` defaults to "1" from 0.19 ("0" in 0.11):
#: before, Llama 4's chunked layers are unified into full attention.
CHUNKED_HYBRID_SINCE = Version("0.19")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class VllmKvCache:
    """One worker's KV cache as vLLM lays it out."""

    num_blocks: int
    block_size: int
    group_kinds: tuple[str, ...]       # the kind of each KV cache group
    padding_layers: int
    blocks_per_request: int            # over all groups, for one max_model_len request
    max_concurrency: float
    logged_tokens: int                 # what "GPU KV cache size: N tokens" says
    hybrid: bool                       # more than one kind of group


def in_flight_tokens(version: Version, max_num_batched_tokens: int, pp: int) -> int:
    """Tokens a sliding or chunked layer must keep beyond its window while requests are in flight."""
    if version < IN_FLIGHT_SINCE:
        return max_num_batched_tokens
    return max_num_batched_tokens * (2 if pp <= 1 else pp)


def vllm_kv_cache(version: Version, *, kinds: Sequence[str], page_bytes: int, block_size: int,
                  budget_bytes: int, max_model_len: int, max_num_batched_tokens: int, pp: int,
                  sliding_window: int | None, chunk_size: int | None,
                  state_bytes: Sequence[int] = ()) -> VllmKvCache:
    """The KV cache of one worker whose layers have ``kinds``; ``page_bytes`` is one attention layer's
    block (``block_size`` tokens), ``budget_bytes`` the memory left for KV, ``state_bytes`` the
    per-request state of each layer (Mamba / linear attention, 0 for attention layers)."""
    hybrid_chunks = version >= CHUNKED_HYBRID_SINCE
    counts: dict[str, int] = {}
    for kind in kinds:
        if kind == NO_KV:
            continue
        if kind == CHUNKED and not (hybrid_chunks and chunk_size):
            kind = "full"
        elif kind == SLIDING and not sliding_window:
            kind = "full"
        elif kind not in (SLIDING, CHUNKED):
            kind = "full"
        counts[kind] = counts.get(kind, 0) + 1
    state = sum(state_bytes)
    if not counts:
        return VllmKvCache(0, block_size, (), 0, 0, 0.0, 0, False)
    if version < HYBRID_SINCE or len(counts) == 1:
        layers = sum(counts.values())
        num_blocks = max(0, budget_bytes) // (page_bytes * layers) if page_bytes else 0
        need = cdiv(max_model_len, block_size) * layers
        per_request_bytes = need * page_bytes + state
        conc = (max(0, budget_bytes) / per_request_bytes) if per_request_bytes else 0.0
        if state:
            tokens = int(conc * max_model_len)
        else:
            tokens = num_blocks * block_size
        return VllmKvCache(num_blocks, block_size, ("full",) * (1 if counts else 0), 0, need,
                           conc if state else (num_blocks / cdiv(max_model_len, block_size) if max_model_len else 0.0),
                           tokens, False)
    lo, hi = min(counts.values()), max(counts.values())
    group_size = hi if hi < 1.5 * lo else lo
    groups: list[str] = []
    padding = 0
    for kind, n in counts.items():
        n_groups = cdiv(n, group_size)
        groups += [kind] * n_groups
        padding += n_groups * group_size - n
    num_blocks = max(0, budget_bytes - 0) // (page_bytes * group_size) if page_bytes else 0
    t = in_flight_tokens(version, max_num_batched_tokens, pp)
    per_kind = {
        "full": cdiv(max_model_len, block_size),
        SLIDING: cdiv(min((sliding_window or max_model_len) - 1 + t, max_model_len), block_size) + 1,
        CHUNKED: cdiv(min((chunk_size or max_model_len) + t, max_model_len), block_size),
    }
    need = sum(per_kind[g] for g in groups)
    if state:  # charge the fixed state in attention blocks of the same page (see the module docstring)
        need += cdiv(state, page_bytes * group_size)
    conc = num_blocks / need if need else 0.0
    if version >= CONCURRENCY_TOKENS_SINCE:
        tokens = int(conc * max_model_len)
    else:
        tokens = num_blocks // len(groups) * block_size
    return VllmKvCache(num_blocks, block_size, tuple(groups), padding, need, conc, tokens, True)


def describe(cache: VllmKvCache, version: Version) -> str:
    """One sentence for the kv_pool finding: how vLLM will count this pool."""
    if not cache.hybrid:
        return ""
    kinds = {k: cache.group_kinds.count(k) for k in dict.fromkeys(cache.group_kinds)}
    names = {"full": "full-attention", SLIDING: "sliding window", CHUNKED: "chunked local-attention"}
    parts = ", ".join(f"{n} {names.get(k, k)} group{'s' if n > 1 else ''}" for k, n in kinds.items())
    pad = f", {cache.padding_layers} padding layers" if cache.padding_layers else ""
    how = ("max_concurrency x max_model_len" if version >= CONCURRENCY_TOKENS_SINCE
           else "num_blocks // groups x block")
    return (f"vLLM {version} groups the KV cache as {parts}{pad}: {cache.num_blocks:,} blocks of "
            f"{cache.block_size} tokens, {cache.blocks_per_request:,} blocks per full-length request; "
            f"its 'GPU KV cache size' is {how}.")


__all__ = ["VllmKvCache", "describe", "in_flight_tokens", "vllm_kv_cache"]
