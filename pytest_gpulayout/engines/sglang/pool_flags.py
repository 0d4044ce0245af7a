"""The flags that set SGLang's token pool after it is sized from memory, release by release.

* ``--max-total-tokens`` caps the pool: ``min(profiled, max_total_tokens)``, with the warning
  "max_total_tokens=N is larger than the profiled value P. Use the profiled value instead." when it is the larger
  (0.4.6 ``model_executor/model_runner.py`` l.773-779; 0.5.10 ``model_runner_kv_cache_mixin.py
  _resolve_token_capacity`` l.808-823; 0.5.23 ``mem_cache/kv_cache_configurator.py _apply_token_constraints``
  l.3090-3105).
* ``--page-size`` rounds it down to whole pages: ``tokens // page_size * page_size`` (0.4.6 l.781-785; 0.5.10
  l.825-826; 0.5.23 ``model_executor/pool_configurator.py calculate_pool_sizes`` l.646, re-aligned after the cap).
  The default is 1; attention backends that force a page (FlashMLA 64, cutlass MLA 128, TRT-LLM MLA) are not
  read here.
* ``--max-running-requests`` changes nothing of it: the request pool (``_resolve_max_num_reqs``, ``min(given //
  dp_size, estimate)`` per DP worker) is sized from the token capacity after it is fixed, and the decode CUDA graphs
  it caps are captured after the pool (``cuda_graph_runner.py``: batch sizes above ``req_to_token_pool.size``
  are dropped); the default ``mem_fraction_static`` never reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: what a deployment's launch flags set of the pool, read here (``budget.py`` applies them)
POOL_FLAGS = frozenset({"--max-total-tokens", "--page-size", "--max-running-requests"})


@dataclass(frozen=True)
class PoolFlags:
    """``--max-total-tokens`` (None: no cap) and ``--page-size`` as given."""

    max_total_tokens: int | None = None
    page_size: int = 1


def given_int(given: Mapping[str, str | None], flag: str) -> int | None:
    """The whole number ``flag`` was given (None: not given, or not a number)."""
    return _number(given.get(flag))


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)  # ``type=int`` in every release (the line was parsed by it first)
    except ValueError:
        return None


def pool_flags(given: Mapping[str, str | None]) -> PoolFlags:
    """What ``given`` (``LaunchKnobs.given``, canonical spellings) sets of the pool."""
    cap = _number(given.get("--max-total-tokens"))
    page = _number(given.get("--page-size"))
    return PoolFlags(cap if cap is not None and cap > 0 else None, page if page and page > 0 else 1)


def apply(tokens: int, flags: PoolFlags) -> int:
    """The pool SGLang allocates from ``tokens`` profiled on one rank: capped, then whole pages."""
    if flags.max_total_tokens is not None:
        tokens = min(tokens, flags.max_total_tokens)
    return tokens // flags.page_size * flags.page_size
