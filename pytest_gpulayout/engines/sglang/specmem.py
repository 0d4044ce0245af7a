"""Speculative decoding in SGLang's memory, per release: the default ``mem_fraction_static`` it lowers, and where the
draft worker's memory comes from.

Read in the wheels (``sglang-<v>/``):

* The target's pool is sized first, from the target alone (``model_executor/model_runner.py profile_max_num_token``);
  with EAGLE / EAGLE3 / NEXTN / STANDALONE the target then raises its ``max_total_num_tokens`` by a headroom for the
  draft and verify tokens it shares its token indices with, ``max_num_reqs x (speculative_num_steps x
  speculative_eagle_topk + speculative_num_draft_tokens) + 100`` (``draft_runner_cache_size``, 0.5.6
  ``model_runner.py`` L1696-1718), which the draft worker (``speculative/eagle_worker.py``, ``standalone_worker.py``)
  then allocates as its own KV pool, with its weights and its CUDA graphs, out of what the target left: the
  ``(1 - mem_fraction_static)`` slack. So the draft takes nothing out of the pool the checks predict (the headroom
  tokens are for the draft and verify tokens, not for requests); it takes memory out of the slack, which is why the
  default fraction is lowered for it.
* The default ``mem_fraction_static`` reserves more for it (``server_args.py``): 0.4.8 - 0.5.1.post3 ``reserved_mem +=
  2 * 1024`` for any algorithm ("draft model and larger cuda graph buffers", 0.4.8 L307-309, before the attention-DP
  term); 0.5.2 6 GiB for STANDALONE, else 2 (L486-492); 0.5.3 - 0.5.9 after the 10 GiB floor, 6 GiB for STANDALONE, 2
  for the others but NGRAM (0.5.6 L848-853); 0.5.10 - 0.5.13.post1 4 GiB instead of 2 ("eagle draft models and cuda
  graphs", 0.5.10 L1316-1322, 0.5.13 L1628-1634); 0.5.14 on, no speculative term (0.5.14 ``server_args.py``
  L3278-3312, 0.5.23 ``arg_groups/memory_hook.py`` L296-316). Before 0.4.8 the default is the TP table this model
  reads (``engine.memory_defaults``); 0.4.7's speculative term is not read.
"""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft
from pytest_gpulayout.memory.draft import NO_DRAFT, DraftMemory

#: the flags whose effect on the checks this module models (the default fraction; the draft's place in the slack)
SPEC_FLAGS = frozenset({
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens",
})
#: ``reserved_mem`` (MiB) the default fraction adds for speculative decoding: (from, {algorithm: MiB}, otherwise MiB,
#: added after the 10 GiB floor) by release (the module docstring)
SPEC_RESERVE: tuple[tuple[Version, dict[str, float], float, bool], ...] = (
    (Version("0.4.8"), {}, 2 * 1024, False),
    (Version("0.5.2"), {"STANDALONE": 6 * 1024}, 2 * 1024, False),
    (Version("0.5.3"), {"STANDALONE": 6 * 1024, "NGRAM": 0}, 2 * 1024, True),
    (Version("0.5.10"), {"STANDALONE": 6 * 1024, "NGRAM": 0}, 4 * 1024, True),
    (Version("0.5.14"), {}, 0, True),
)
#: the first release whose default fraction this model reads the speculative term of
SPEC_RESERVE_SINCE = SPEC_RESERVE[0][0]


def speculative_reserve_mib(version: Version, algorithm: str | None) -> float:
    """MiB the release's default ``mem_fraction_static`` reserves for ``algorithm`` (0: none, or before 0.4.8)."""
    if not algorithm:
        return 0.0
    rows = [row for row in SPEC_RESERVE if version >= row[0]]
    if not rows:
        return 0.0
    _, by_algorithm, other, _ = rows[-1]
    return by_algorithm.get(algorithm.upper(), other)


def speculative_draft(args: ResolvedArgs, version: Version) -> SpecDraft | None:
    """``--speculative-algorithm`` and ``--speculative-draft-model-path`` as the line gives them (None: none given)."""
    if not args.is_set("speculative_algorithm"):
        return None
    algorithm = args.get("speculative_algorithm")
    if not isinstance(algorithm, str) or not algorithm:
        return None
    path = args.get("speculative_draft_model_path") if args.is_set("speculative_draft_model_path") else None
    return SpecDraft(method=algorithm.upper(), ref=path if isinstance(path, str) else "")


def draft_memory(knobs: LaunchKnobs, version: Version) -> DraftMemory:
    """Nothing out of the pool (the module docstring); the note says where the draft's memory comes from."""
    d = knobs.draft
    if d is None:
        return NO_DRAFT
    if d.method == "NGRAM":
        return DraftMemory(notes=("Speculative decoding by NGRAM: no draft model, nothing beside the target.",))
    draft = f"the draft {d.ref}" if d.ref else "the draft"
    if d.ref and d.model is None:
        draft += f" (not read: {d.unread})"
    return DraftMemory(notes=(
        f"Speculative decoding ({d.method}): SGLang {version} sizes the target's pool first and builds {draft}'s "
        f"weights, KV pool (the target's token count plus a draft/verify headroom, model_runner.py "
        f"draft_runner_cache_size) and CUDA graphs out of the (1 - mem_fraction_static) slack, not out of the pool; "
        f"whether they fit the slack is what a launch measures.",))
