"""vLLM V1's KV cache for models that mix attention kinds: groups, blocks, the logged token count
and the maximum concurrency, release by release.

Read in the wheels (``pip download --no-deps vllm==X``): ``v1/kv_cache_interface.py`` (each layer's
spec and what one request needs of it), ``v1/core/kv_cache_utils.py`` (``get_kv_cache_groups``,
``get_num_blocks``, ``get_max_concurrency_for_kv_cache_config``; ``v1/core/kv_cache_planning.py`` in
0.33), ``config/vllm.py`` (``max_in_flight_tokens`` from 0.26). What it computes:

* layers of one kind (full, sliding window, chunked local, linear-attention state) form groups of
  ``group_size`` layers, each kind split into ``cdiv(n, group_size)`` groups, the last one padded
  ("Add %d padding layers"): ``group_size = min count`` over the kinds up to 0.11 (0.10.2
  ``kv_cache_utils.py`` L981, 0.11.1 L974); ``max count if max < 1.25 x min count`` from 0.12
  (0.12.0 L1017; 0.11.2 not read); ``max < 1.5 x min`` from 0.18 (0.18.0 L1043; 0.17.1 is 1.25);
* ``num_blocks = budget // (page x group_size)`` (one block of every layer of a group);
* one request needs, per group: full ``cdiv(L, block)``; sliding
  ``cdiv(min(window - 1 + T, L), block) + 1``; chunked ``cdiv(min(chunk + T, L), block)``, with T the
  tokens in flight: ``max_num_batched_tokens`` up to 0.25, ``max_concurrent_batches x`` it from 0.26
  (2 with async scheduling at PP=1, the default; PP stages otherwise);
* ``max_concurrency = num_blocks / sum over groups of the blocks one request needs``;
* the logged "GPU KV cache size": ``num_blocks // len(groups) x block`` up to 0.20.0,
  ``int(max_concurrency x max_model_len)`` from 0.20.1.

Linear-attention / Mamba layers (``MambaSpec``, one fixed state per request) share the attention
pages from 0.10 (``HybridAttentionMambaModelConfig``: ``model_executor/models/config.py`` L327-415 in
0.10.2, ``Platform._align_hybrid_block_size`` in ``platforms/interface.py`` from 0.20, L939-1135 in
0.32.0). ``hybrid_layout`` below is that arithmetic:

* the attention block is raised to ``align x cdiv(state page, align x attention bytes per token)``
  tokens, and the state page is padded to the attention page ("Padding mamba page size by X%");
  ``align`` is 16 up to 0.11 (0.10.2 config.py L381); 64 for MLA from 0.12 (0.12.0 config.py
  L356); from 0.20 ``max(the backend's smallest kernel block, block_size)`` (16 for FlashAttention,
  FlashInfer and Triton; 128 at least for MLA: 0.32.0 interface.py L1062-1082). A larger
  ``--block-size`` wins where it is larger (0.10.2 config.py L387);
* the state layers form groups of their own: one spec for all of them, grouped with the rule above;
* one request needs per state group 1 block (``MambaSpec.max_memory_usage_bytes``, 0.10.2
  ``v1/kv_cache_interface.py`` L209) with ``mamba_cache_mode`` "none"; 2 with "align" (0.19.1
  kv_cache_interface.py L297), and 3 for Mamba2 mixers from 0.32 (``num_prefill_checkpoint_blocks=1``:
  0.32.0 ``mamba_mixer2.py`` L1107, kv_cache_interface.py L1077); ``cdiv(max_model_len, block)`` with
  "all" (0.19.1 L294), whose attention block is a multiple of ``lcm(mamba chunk, align)`` instead
  (0.19.1 config.py L256-264). The mode follows prefix caching: forced off for hybrids up to 0.11
  (0.11.0 config.py L296), off by default 0.12-0.25 (``ModelConfig.is_prefix_caching_supported``:
  0.25.0 config/model.py L1883), on from 0.26 (0.26.0 L1895), when the mode defaults to "all" for
  models with Mamba prefix caching (Mamba1/Mamba2 families: 0.26.0 models/config.py L560) and
  "align" otherwise, "align" for all from 0.28 (0.28.0 models/config.py L603);
* ``num_blocks = budget // (page x group_size)`` over all groups alike; the logged count and the
  concurrency follow the rules above with the state groups' blocks in the per-request sum.

Before 0.10 (V0 / the first V1) the state is charged per request next to the attention blocks, an
approximation the message says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.model.spec import CHUNKED, NO_KV, SLIDING, ModelSpec

#: The hybrid KV cache manager (one group per attention kind) exists in V1 from 0.10.
HYBRID_SINCE = Version("0.10")
#: ``group_size``: the min count up to 0.11, the max where max < 1.25 x min from 0.12, 1.5 x from 0.18.
GROUP_MAX_SINCE = Version("0.12")
GROUP_MAX_15_SINCE = Version("0.18")
#: The hybrid block's alignment comes from the attention backend (``update_block_size_for_backend``).
BACKEND_ALIGNMENT_SINCE = Version("0.20")
#: MLA hybrids align the block to 64 tokens from 0.12 (0.12.0 models/config.py L356), to 128 at
#: least from 0.20 (``_align_hybrid_block_size``: 0.32.0 interface.py L1082).
MLA_ALIGN_SINCE = Version("0.12")
#: Prefix caching (and so a ``mamba_cache_mode`` other than "none") is on by default for hybrids from
#: 0.26; "all" for Mamba-prefix-caching models in 0.26-0.27, "align" for every hybrid from 0.28.
HYBRID_PREFIX_CACHING_SINCE = Version("0.26")
ALIGN_MODE_ONLY_SINCE = Version("0.28")
#: Mamba2 mixers keep one prefill checkpoint block per request in "align" mode from 0.32 (not in 0.28).
CHECKPOINT_BLOCK_SINCE = Version("0.32")
#: The state kinds whose vLLM layers declare ``SupportsMambaPrefixCaching`` (0.26.0: mamba, mamba2,
#: jamba, nemotron_h, granitemoehybrid, falcon_h1, zamba2; not Qwen3-Next's Gated DeltaNet, MiniMax).
MAMBA_PREFIX_CACHING_KINDS = ("mamba1", "mamba2")
#: ``ModelConfig.get_mamba_chunk_size`` when the config names none (Mamba2's SSD chunk).
DEFAULT_MAMBA_CHUNK = 256
#: The kind name of the state groups in ``VllmKvCache.group_kinds``.
STATE = "state"

#: The logged token count became ``int(max_concurrency x max_model_len)`` in 0.20.1.
CONCURRENCY_TOKENS_SINCE = Version("0.20.1")
#: Tokens in flight doubled with async scheduling from 0.26 (``max_concurrent_batches``).
IN_FLIGHT_SINCE = Version("0.26")
#: ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` exists from 0.10.1 (``envs.py``, default "0" up to
#: 0.13.0) and defaults to "1" from 0.14.0 (0.14.0 ``envs.py``; 0.33.0 L1931-1932). Unset or "0",
#: ``VllmConfig.__post_init__`` turns the hybrid KV cache manager off for a chunked-local-attention model (0.14.0
#: ``config/vllm.py`` L967-976, 0.33.0 L2246-2251: "Disabling it, by default"), and every group is unified into
#: full attention (``unify_hybrid_kv_cache_specs``): Llama 4's chunked layers then need a whole request's blocks.
CHUNKED_HYBRID_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
CHUNKED_HYBRID_ENV_SINCE = Version("0.10.1")
CHUNKED_HYBRID_SINCE = Version("0.14")


def chunked_hybrid(version: Version, env: Mapping[str, str]) -> bool:
    """Whether the release keeps chunked local attention in a group of its own with ``env`` (see above)."""
    if version < CHUNKED_HYBRID_ENV_SINCE:
        return False
    raw = (env.get(CHUNKED_HYBRID_ENV) or "").strip()
    if raw.lstrip("-").isdigit():
        return bool(int(raw))
    return version >= CHUNKED_HYBRID_SINCE


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class VllmKvCache:
    """One worker's KV cache as vLLM lays it out."""

    num_blocks: int
    block_size: int
    group_kinds: tuple[str, ...]       # the kind of each KV cache group (``STATE``: linear-attention state)
    padding_layers: int
    blocks_per_request: int            # over all groups, for one max_model_len request
    max_concurrency: float
    logged_tokens: int                 # what "GPU KV cache size: N tokens" says
    hybrid: bool                       # more than one kind of group
    state_page_bytes: int = 0          # one state layer's page as laid out (padded to the attention page)
    state_padding: float = 0.0         # "Padding mamba page size by X%" (a fraction)
    state_blocks_per_request: int = 0  # of blocks_per_request, in the state groups
    mamba_cache_mode: str = ""         # "none", "align" or "all" where the model keeps a state
    approximated: bool = False         # state charged per request (before 0.10), not laid out


@dataclass(frozen=True)
class HybridLayout:
    """vLLM's page for a model whose attention pages hold the linear-attention state too."""

    block_size: int        # attention tokens per block
    page_bytes: int        # one attention layer's block = one state layer's (padded) page
    state_blocks: int      # blocks one request takes in each state group
    mode: str              # mamba_cache_mode
    padding: float         # the state page's padding, a fraction of the state


def mamba_cache_mode(version: Version, state_kind: str | None) -> str:
    """The ``mamba_cache_mode`` a hybrid gets by default (see the module docstring)."""
    if version < HYBRID_PREFIX_CACHING_SINCE:
        return "none"
    if version < ALIGN_MODE_ONLY_SINCE and state_kind in MAMBA_PREFIX_CACHING_KINDS:
        return "all"
    return "align"


def block_alignment(version: Version, *, block_size: int, is_mla: bool) -> int:
    """The multiple the hybrid attention block is rounded to: 16 up to 0.11 (0.10.2 models/config.py
    L377-381: "FA only support setting block size to multiple of 16"); 64 for MLA from 0.12 (0.12.0 L356; 128 with
    CUTLASS MLA, not assumed); from 0.20 ``max(min kernel block, block_size)`` with the backend a CUDA
    GPU gets by default (FlashAttention on Hopper and older, ``MultipleOf(16)``: 0.32.0
    ``flash_attn.py`` L365; FlashInfer and Triton also start at 16), MLA at least 128 (0.32.0
    interface.py L1082). Blackwell's FlashInfer head-256 case (32, 0.12.0 L375) is not modelled."""
    if version < MLA_ALIGN_SINCE:
        return 16
    if version < BACKEND_ALIGNMENT_SINCE:
        return 64 if is_mla else 16
    return max(128 if is_mla else 16, block_size)


def hybrid_layout(version: Version, *, token_bytes: int, state_page: int, block_size: int, max_model_len: int,
                  is_mla: bool = False, state_kind: str | None = None, mamba_chunk: int | None = None,
                  ) -> HybridLayout:
    """The attention block and the shared page of a hybrid (``HybridAttentionMambaModelConfig`` /
    ``_align_hybrid_block_size``): ``token_bytes`` is one attention layer's KV for one token on this
    rank, ``state_page`` one state layer's state, ``block_size`` the block vLLM starts from (the
    user's ``--block-size`` or its default)."""
    mode = mamba_cache_mode(version, state_kind)
    align = block_alignment(version, block_size=block_size, is_mla=is_mla)
    if mode == "all":  # 0.19.1 models/config.py L256-264: a multiple of the Mamba2 chunk
        chunk = math.lcm(mamba_chunk or DEFAULT_MAMBA_CHUNK, align)
        need = chunk * cdiv(cdiv(state_page, token_bytes), chunk)
    else:
        need = align * cdiv(state_page, align * token_bytes)
    block = max(block_size, need)
    page = block * token_bytes
    if mode == "all":
        per_request = cdiv(max_model_len, block)
    elif mode == "align":
        per_request = 2 + (1 if version >= CHECKPOINT_BLOCK_SINCE and state_kind == "mamba2" else 0)
    else:
        per_request = 1
    return HybridLayout(block, page, per_request, mode, (page - state_page) / state_page if state_page else 0.0)


#: NemotronH keeps its SSM state in float32 unless its config names a dtype, from 0.20
#: (``NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE``: 0.20.0 models/config.py L410; not in
#: 0.19.1). Other families keep the model dtype ("auto": ``MambaStateDtypeCalculator``).
NEMOTRON_H_FP32_SSM_SINCE = Version("0.20")


def vllm_state_bytes(model: ModelSpec, tp: int, version: Version) -> tuple[int, ...]:
    """Per layer, the state vLLM keeps on one rank (``MambaSpec`` before padding; 0 for attention
    layers): ``ModelSpec.layer_state_bytes`` with this release's state dtype. A config's own
    ``mamba_ssm_cache_dtype`` is not read: NemotronH's float32 default is assumed."""
    ls = model.linear_state
    if ls is None:
        return model.layer_state_bytes(tp)
    nemotron = any(a.startswith("NemotronH") for a in model.architectures)
    ssm = 4 if nemotron and version >= NEMOTRON_H_FP32_SSM_SINCE else None
    one = ls.bytes_per_rank(tp, model.served_dtype_bytes, ssm)
    return tuple(one if k == NO_KV else 0 for k in model.layer_kinds)


def in_flight_tokens(version: Version, max_num_batched_tokens: int, pp: int) -> int:
    """Tokens a sliding or chunked layer must keep beyond its window while requests are in flight."""
    if version < IN_FLIGHT_SINCE:
        return max_num_batched_tokens
    return max_num_batched_tokens * (2 if pp <= 1 else pp)


def group_size_of(version: Version, counts: Sequence[int]) -> int:
    """Layers per KV cache group (see the module docstring)."""
    lo, hi = min(counts), max(counts)
    if version >= GROUP_MAX_15_SINCE:
        return hi if hi < 1.5 * lo else lo
    if version >= GROUP_MAX_SINCE:
        return hi if hi < 1.25 * lo else lo
    return lo


def vllm_kv_cache(version: Version, *, kinds: Sequence[str], page_bytes: int, block_size: int,
                  budget_bytes: int, max_model_len: int, max_num_batched_tokens: int, pp: int,
                  sliding_window: int | None, chunk_size: int | None,
                  state_bytes: Sequence[int] = (), is_mla: bool = False, state_kind: str | None = None,
                  mamba_chunk: int | None = None, chunked_groups: bool | None = None,
                  num_blocks_override: int | None = None) -> VllmKvCache:
    """The KV cache of one worker whose layers have ``kinds``; ``page_bytes`` is one attention layer's
    block (``block_size`` tokens), ``budget_bytes`` the memory left for KV, ``state_bytes`` the
    per-request state of each layer (Mamba / linear attention, 0 for attention layers) as vLLM sizes
    it (``vllm_state_bytes``); ``state_kind`` its ``LinearState.kind``. ``chunked_groups``: chunked local attention
    keeps its own groups (``chunked_hybrid``; None: the release's default). ``num_blocks_override``:
    ``--num-gpu-blocks-override``, which replaces the blocks the budget gives (0.8.5 ``v1/core/kv_cache_utils.py``
    L624-630, 0.10.2 L799-805, 0.33.0 ``v1/core/kv_cache_planning.py`` L246-247)."""
    hybrid_chunks = chunked_hybrid(version, {}) if chunked_groups is None else chunked_groups
    counts: dict[str, int] = {}
    states = list(state_bytes) + [0] * (len(kinds) - len(state_bytes))
    for kind, st in zip(kinds, states[:len(kinds)], strict=True):
        if kind == NO_KV:
            if st and version >= HYBRID_SINCE:
                counts[STATE] = counts.get(STATE, 0) + 1
            continue
        if kind == CHUNKED and not (hybrid_chunks and chunk_size):
            kind = "full"
        elif kind == SLIDING and not sliding_window:
            kind = "full"
        elif kind not in (SLIDING, CHUNKED):
            kind = "full"
        counts[kind] = counts.get(kind, 0) + 1
    state = sum(states)
    budget = max(0, budget_bytes)
    if not counts:
        return VllmKvCache(0, block_size, (), 0, 0, 0.0, 0, False)
    if STATE in counts and len(counts) == 1:  # a stage of state layers only: one block per request
        one = max(states)
        num_blocks = budget // (one * counts[STATE]) if one else 0
        return VllmKvCache(num_blocks, max_model_len, (STATE,), 0, 1, float(num_blocks), num_blocks * max_model_len,
                           False, one, 0.0, 1, "none")
    if version < HYBRID_SINCE or len(counts) == 1:
        layers = sum(counts.values())
        num_blocks = budget // (page_bytes * layers) if page_bytes else 0
        num_blocks = num_blocks if num_blocks_override is None else num_blocks_override
        need = cdiv(max_model_len, block_size) * layers
        per_request_bytes = need * page_bytes + state
        conc = (budget / per_request_bytes) if per_request_bytes else 0.0
        if state:  # before 0.10: charged per request (see the module docstring)
            tokens = int(conc * max_model_len)
        else:
            tokens = num_blocks * block_size
        return VllmKvCache(num_blocks, block_size, ("full",) * (1 if counts else 0), 0, need,
                           conc if state else (num_blocks / cdiv(max_model_len, block_size) if max_model_len else 0.0),
                           tokens, False, approximated=bool(state))
    layout = None
    if STATE in counts:
        token_bytes = page_bytes // block_size if block_size else 0
        layout = hybrid_layout(version, token_bytes=token_bytes, state_page=max(states), block_size=block_size,
                               max_model_len=max_model_len, is_mla=is_mla, state_kind=state_kind,
                               mamba_chunk=mamba_chunk)
        block_size, page_bytes = layout.block_size, layout.page_bytes
    group_size = group_size_of(version, list(counts.values()))
    groups: list[str] = []
    padding = 0
    for kind, n in counts.items():
        n_groups = cdiv(n, group_size)
        groups += [kind] * n_groups
        padding += n_groups * group_size - n
    num_blocks = budget // (page_bytes * group_size) if page_bytes else 0
    num_blocks = num_blocks if num_blocks_override is None else num_blocks_override
    t = in_flight_tokens(version, max_num_batched_tokens, pp)
    per_kind = {
        "full": cdiv(max_model_len, block_size),
        SLIDING: cdiv(min((sliding_window or max_model_len) - 1 + t, max_model_len), block_size) + 1,
        CHUNKED: cdiv(min((chunk_size or max_model_len) + t, max_model_len), block_size),
        STATE: layout.state_blocks if layout else 0,
    }
    need = sum(per_kind[g] for g in groups)
    conc = num_blocks / need if need else 0.0
    if version >= CONCURRENCY_TOKENS_SINCE:
        tokens = int(conc * max_model_len)
    else:
        tokens = num_blocks // len(groups) * block_size
    if layout is None:
        return VllmKvCache(num_blocks, block_size, tuple(groups), padding, need, conc, tokens, True)
    return VllmKvCache(num_blocks, block_size, tuple(groups), padding, need, conc, tokens, True,
                       layout.page_bytes, layout.padding, groups.count(STATE) * layout.state_blocks, layout.mode)


def describe(cache: VllmKvCache, version: Version) -> str:
    """One sentence for the kv_pool finding: how vLLM will count this pool."""
    if not cache.hybrid:
        if cache.approximated:
            return (f"vLLM {version} keeps each request's linear-attention state beside its KV blocks; "
                    f"counted here as {cache.blocks_per_request:,} blocks and the state per request "
                    f"(an estimate: this release's layout was not read).")
        return ""
    kinds = {k: cache.group_kinds.count(k) for k in dict.fromkeys(cache.group_kinds)}
    names = {"full": "full-attention", SLIDING: "sliding window", CHUNKED: "chunked local-attention",
             STATE: "linear-attention state"}
    parts = ", ".join(f"{n} {names.get(k, k)} group{'s' if n > 1 else ''}" for k, n in kinds.items())
    pad = f", {cache.padding_layers} padding layers" if cache.padding_layers else ""
    how = ("max_concurrency x max_model_len" if version >= CONCURRENCY_TOKENS_SINCE
           else "num_blocks // groups x block")
    state = ""
    if cache.state_page_bytes:
        n_state = cache.group_kinds.count(STATE)
        each = cache.state_blocks_per_request // n_state if n_state else 0
        state = (f" The attention block is {cache.block_size} tokens so that one {cache.state_page_bytes:,}-byte "
                 f"page holds a layer's state (padded {cache.state_padding:.2%}); each request takes "
                 f"{each} page{'s' if each != 1 else ''} per state group (mamba_cache_mode "
                 f"{cache.mamba_cache_mode}).")
    return (f"vLLM {version} groups the KV cache as {parts}{pad}: {cache.num_blocks:,} blocks of "
            f"{cache.block_size} tokens, {cache.blocks_per_request:,} blocks per full-length request; "
            f"its 'GPU KV cache size' is {how}.{state}")


__all__ = ["HybridLayout", "VllmKvCache", "describe", "hybrid_layout", "in_flight_tokens", "mamba_cache_mode",
           "vllm_kv_cache", "vllm_state_bytes"]
