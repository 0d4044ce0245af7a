"""The speculative steps / top-k / draft-token count an SGLang release picks when the line gives none.

``auto_choose_speculative_params`` (``server_args.py`` up to 0.5.13, ``arg_groups/speculative_hook.py``
``_auto_choose_speculative_params`` from 0.5.14) returns ``(steps, topk, draft_tokens)`` by the target's first
architecture; the EAGLE-family handler calls it only when ``--speculative-num-steps`` is not given (and, from the
releases that have it, ``--speculative-adaptive`` is off), then rewrites the draft-token count to ``steps + 1``
when the top-k is 1. The later checks (top-k against the page size, the draft-token budgets) read the values
after these two steps, so a rule that reads them takes them from here.

Per release (read from each release's source):

- 0.4.6 - 0.4.6.post5: ``(5, 4, 8)`` for every architecture (0.4.6 ``server_args.py:1357-1380``).
- 0.4.7 - 0.5.1.post3: ``(3, 1, 4)`` for DeepSeek V2 / V3 (and GPT-OSS from 0.5.1), else ``(5, 4, 8)``
  (0.4.7 ``server_args.py:1664-1690``, 0.5.1 ``server_args.py:2468-2490``).
- 0.5.2 on: ``(3, 1, 4)`` for ``--speculative-algorithm STANDALONE`` whatever the architecture
  (0.5.2 ``server_args.py:2689-2715``).
- 0.5.3 - 0.5.7.x: the ``(3, 1, 4)`` list grows (DeepSeek V3.2, Bailing; 0.5.6.post1 GLM-4 MoE, Mistral Large 3,
  Pixtral; 0.5.7 MiMo V2 Flash), the default stays ``(5, 4, 8)`` (0.5.7 ``server_args.py:5151-5180``).
- 0.5.8 on: the default is ``(3, 1, 4)``; only Llama and Grok-1 keep ``(5, 4, 8)``
  (0.5.8 ``server_args.py:5425-5455``, 0.5.23 ``arg_groups/speculative_hook.py:1430-1460``).

The top-k 1 rewrite is in every release (0.4.6 ``server_args.py:348-355``, 0.5.23
``arg_groups/speculative_hook.py:1255-1266``).
"""

from __future__ import annotations

import dataclasses

from packaging.version import Version

#: Architectures with ``(5, 4, 8)`` in every release that has the architecture list.
WIDE_ARCHS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})

WIDE = (5, 4, 8)
NARROW = (3, 1, 4)

#: From each release on, the architectures given ``(3, 1, 4)`` (cumulative), up to 0.5.7.x.
_NARROW_ARCHS: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.4.7"), frozenset({"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"})),
    (Version("0.5.1"), frozenset({"GptOssForCausalLM"})),
    (Version("0.5.3"), frozenset({"DeepseekV32ForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"})),
    (Version("0.5.6.post1"), frozenset({"Glm4MoeForCausalLM", "MistralLarge3ForCausalLM",
                                        "PixtralForConditionalGeneration"})),
    (Version("0.5.7"), frozenset({"MiMoV2FlashForCausalLM"})),
)

ARCH_LIST_SINCE = Version("0.4.7")
STANDALONE_SINCE = Version("0.5.2")
NARROW_DEFAULT_SINCE = Version("0.5.8")


@dataclasses.dataclass(frozen=True)
class SpecParams:
    """The steps, top-k and draft-token count after the auto choice and the top-k 1 rewrite."""

    steps: int
    topk: int
    draft_tokens: int
    auto: bool  # the release chose them (the line gave no --speculative-num-steps)


def auto_choose_speculative_params(version: Version, algorithm: str | None, arch: str | None) -> tuple[int, int, int]:
    """``(steps, topk, draft_tokens)`` the release picks for the target's first architecture ``arch``."""
    if version >= STANDALONE_SINCE and algorithm == "STANDALONE":
        return NARROW
    if version < ARCH_LIST_SINCE or arch in WIDE_ARCHS:
        return WIDE
    if version >= NARROW_DEFAULT_SINCE:
        return NARROW
    narrow = frozenset().union(*(archs for since, archs in _NARROW_ARCHS if version >= since))
    return NARROW if arch in narrow else WIDE


def eagle_params(version: Version, algorithm: str | None, arch: str | None, *, steps: int | None,
                 topk: int | None, draft_tokens: int | None) -> SpecParams | None:
    """The values after the auto choice and the top-k 1 rewrite; None where the line gives steps but not
    top-k and draft tokens (the release then asserts or reads defaults this function does not model)."""
    auto = steps is None
    if auto:
        steps, topk, draft_tokens = auto_choose_speculative_params(version, algorithm, arch)
    if steps is None or topk is None or draft_tokens is None:
        return None
    if topk == 1 and draft_tokens != steps + 1:
        draft_tokens = steps + 1
    return SpecParams(steps=steps, topk=topk, draft_tokens=draft_tokens, auto=auto)
