"""SGLang's speculative-decoding refusals of ``engines/sglang/rules_spec2.py``, each in the release's words at its
line, beside the same line accepted (the flag or variable off, another algorithm, or a release without the check).
The line is parsed by the release's own parser (``engines/sglang/cli.py resolve``); the environment is the
launch's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_spec2
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"
MIMO = "MiMoV2FlashForCausalLM"       # its model override turns multi-layer EAGLE on for EAGLE
DRAFT = "--speculative-draft-model-path d"
EAGLE3 = f"--speculative-algorithm EAGLE3 {DRAFT}"
WIDTHS = "--speculative-num-steps 3 --speculative-eagle-topk {k} --speculative-num-draft-tokens 4"
ON = {"SGLANG_ENABLE_SPEC_V2": "1"}
COORD = {"SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION": "true"}
STAGING = {"SGLANG_DISAGG_STAGING_BUFFER": "1"}


def model(name: str) -> ModelSpec:
    """Qwen3-8B's shape, under ``name``'s architecture where it is not Qwen3-8B."""
    spec = load_model(QWEN)
    return spec if name == QWEN else replace(spec, architectures=(name,))


def judge(version: str, words: str, name: str = QWEN, tp: int = 8, env: Mapping[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(tp, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)
    return config_check(line, model(name), layout, Version(version), env=env)


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words; None: accepted
    source: str | None = None           # file:line in that release
    env: Mapping[str, str] = field(default_factory=dict)
    model: str = QWEN
    tp: int = 8
    exception: str = "ValueError"


SPEC = "sglang/srt/arg_groups/speculative_hook.py"
CASES = [
    # -- a PD decode server's radix cache with an algorithm the release does not list for it (0.5.23)
    Case("sglang.spec2.decode_radix_cache", "0.5.23",
         "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --speculative-algorithm ngram",
         "--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
         "(--speculative-algorithm NGRAM)", f"{SPEC}:169"),
    Case("sglang.spec2.decode_radix_cache", "0.5.23",
         f"--disaggregation-mode decode --disaggregation-decode-enable-radix-cache {EAGLE3}"),
    Case("sglang.spec2.decode_radix_cache", "0.5.23", "--disaggregation-mode decode --speculative-algorithm NGRAM"),
    # -- SGLANG_ENABLE_SPEC_V2 with a top-k above 1 (0.5.7 - 0.5.10; STANDALONE from 0.5.8)
    Case("sglang.spec2.spec_v2_topk", "0.5.8", f"{EAGLE3} {WIDTHS.format(k=4)}",
         "Spec v2 currently only supports topk = 1 for speculative decoding.", "sglang/srt/server_args.py:2152",
         env=ON),
    Case("sglang.spec2.spec_v2_topk", "0.5.8", f"{EAGLE3} {WIDTHS.format(k=4)}"),
    Case("sglang.spec2.spec_v2_topk", "0.5.8", f"{EAGLE3} {WIDTHS.format(k=4)}", env={"SGLANG_ENABLE_SPEC_V2": "no"}),
    Case("sglang.spec2.spec_v2_topk", "0.5.8", f"{EAGLE3} {WIDTHS.format(k=1)}", env=ON),
    Case("sglang.spec2.spec_v2_topk", "0.5.8", f"--speculative-algorithm STANDALONE {DRAFT} {WIDTHS.format(k=4)}",
         "Spec v2 currently only supports topk = 1", "sglang/srt/server_args.py:2152", env=ON),
    Case("sglang.spec2.spec_v2_topk", "0.5.7", f"--speculative-algorithm STANDALONE {DRAFT} {WIDTHS.format(k=4)}",
         env=ON),
    Case("sglang.spec2.spec_v2_topk", "0.5.7", f"--speculative-algorithm NEXTN {WIDTHS.format(k=2)}",
         "Spec v2 currently only supports topk = 1", "sglang/srt/server_args.py:2012", env=ON),
    # -- SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION: read for every line from 0.5.21
    Case("sglang.spec2.dp_spec_coordination", "0.5.21", "",
         "DP spec/prefill coordination requires single-layer EAGLE or EAGLE3", f"{SPEC}:227", env=COORD),
    Case("sglang.spec2.dp_spec_coordination", "0.5.21", ""),
    Case("sglang.spec2.dp_spec_coordination", "0.5.21", EAGLE3, env=COORD),
    Case("sglang.spec2.dp_spec_coordination", "0.5.21", f"{EAGLE3} --enable-multi-layer-eagle",
         "DP spec/prefill coordination requires single-layer EAGLE or EAGLE3", f"{SPEC}:227", env=COORD),
    Case("sglang.spec2.dp_spec_coordination", "0.5.21", f"--speculative-algorithm DSPARK {DRAFT}",
         "requires single-layer EAGLE or EAGLE3", f"{SPEC}:227", env=COORD),
    Case("sglang.spec2.dp_spec_coordination", "0.5.23", f"--speculative-algorithm DSPARK {DRAFT}", env=COORD),
    Case("sglang.spec2.dp_spec_coordination", "0.5.23", "--speculative-algorithm ngram",
         "DP spec/prefill coordination requires single-layer EAGLE, EAGLE3 or DSPARK", f"{SPEC}:257", env=COORD),
    # -- DFLASH with attention DP and the coordination on (0.5.23)
    Case("sglang.spec2.dflash_coordination", "0.5.23",
         f"--speculative-algorithm DFLASH {DRAFT} --attn-dp-size 2 --enable-dp-lm-head",
         "DFLASH with dp attention requires SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=0.", f"{SPEC}:314",
         env=COORD),
    Case("sglang.spec2.dflash_coordination", "0.5.23",
         f"--speculative-algorithm DFLASH {DRAFT} --attn-dp-size 2 --enable-dp-lm-head"),
    Case("sglang.spec2.dflash_coordination", "0.5.23", f"--speculative-algorithm DFLASH {DRAFT}", env=COORD),
    # -- SGLANG_DISAGG_STAGING_BUFFER with a transfer backend it does not take (mooncake; nixl too from 0.5.12)
    Case("sglang.spec2.staging_buffer", "0.5.10", "--disaggregation-mode prefill --disaggregation-transfer-backend "
         "nixl", "SGLANG_DISAGG_STAGING_BUFFER requires disaggregation_transfer_backend='mooncake', got 'nixl'.",
         "sglang/srt/server_args.py:3262", env=STAGING),
    Case("sglang.spec2.staging_buffer", "0.5.10", "--disaggregation-mode prefill --disaggregation-transfer-backend "
         "nixl"),
    Case("sglang.spec2.staging_buffer", "0.5.12", "--disaggregation-mode prefill --disaggregation-transfer-backend "
         "nixl", env=STAGING),
    Case("sglang.spec2.staging_buffer", "0.5.23", "--disaggregation-mode decode --disaggregation-transfer-backend "
         "mooncake_tcp", env=STAGING),
    Case("sglang.spec2.staging_buffer", "0.5.23", "--disaggregation-transfer-backend nixl", env=STAGING),
    # -- features that take no draft
    Case("sglang.spec2.features", "0.5.3", f"--attention-backend flex_attention {EAGLE3}",
         "Speculative decoding is currently not supported with Flex Attention backend",
         "sglang/srt/server_args.py:866", exception="AssertionError"),
    Case("sglang.spec2.features", "0.5.3", "--attention-backend flex_attention"),
    Case("sglang.spec2.features", "0.5.23", f"--attention-backend flex_attention {EAGLE3}",
         "Speculative decoding is currently not supported with Flex Attention backend",
         "sglang/srt/arg_groups/attention_hook.py:161", exception="AssertionError"),
    Case("sglang.spec2.features", "0.5.23", f"--attention-backend triton {EAGLE3}"),
    Case("sglang.spec2.features", "0.5.23", "--dwdp-size 8 --speculative-algorithm NGRAM",
         "DWDP does not support speculative decoding (MTP/draft workers)",
         "sglang/srt/arg_groups/parallel_hook.py:451", exception="AssertionError"),
    Case("sglang.spec2.features", "0.5.18", "--dwdp-size 8 --speculative-algorithm NGRAM",
         "DWDP does not support speculative decoding", "sglang/srt/server_args.py:6616",
         exception="AssertionError"),
    Case("sglang.spec2.features", "0.5.23", "--dwdp-size 8"),
    Case("sglang.spec2.features", "0.5.23", "--weight-cache-mode client --speculative-algorithm NGRAM",
         "--weight-cache-mode is not supported together with speculative decoding",
         "sglang/srt/arg_groups/model_path_hook.py:282"),
    Case("sglang.spec2.features", "0.5.23", "--speculative-algorithm NGRAM"),
    Case("sglang.spec2.features", "0.5.23", "--enable-lmcache --speculative-algorithm NGRAM",
         "LMCacheUnifiedRadixCache does not yet support speculative decoding",
         "sglang/srt/arg_groups/kv_cache_hook.py:450", exception="NotImplementedError"),
    Case("sglang.spec2.features", "0.5.23", "--enable-lmcache"),
    # -- --enable-watermark with speculative decoding (0.5.22+)
    Case("sglang.spec2.watermark", "0.5.23", f"--enable-watermark --speculative-algorithm DFLASH {DRAFT}",
         "--enable-watermark supports speculative algorithms NGRAM, EAGLE, and EAGLE3, got 'DFLASH'",
         "sglang/srt/arg_groups/validation_hook.py:91"),
    Case("sglang.spec2.watermark", "0.5.23", "--enable-watermark --speculative-algorithm ngram"),
    Case("sglang.spec2.watermark", "0.5.23", f"--enable-watermark {EAGLE3} --speculative-use-rejection-sampling",
         "--enable-watermark is incompatible with --speculative-use-rejection-sampling",
         "sglang/srt/arg_groups/validation_hook.py:101"),
    Case("sglang.spec2.watermark", "0.5.22", f"--enable-watermark {EAGLE3} --speculative-use-block-verification",
         "--enable-watermark is incompatible with --speculative-use-rejection-sampling",
         "sglang/srt/arg_groups/validation_hook.py:100"),
    Case("sglang.spec2.watermark", "0.5.23", f"{EAGLE3} --speculative-use-rejection-sampling"),
    # -- rejection sampling with multi-layer EAGLE
    Case("sglang.spec2.multi_layer_rejection", "0.5.14", f"{EAGLE3} --enable-multi-layer-eagle "
         "--speculative-use-rejection-sampling",
         "--speculative-use-rejection-sampling is not supported with multi-layer EAGLE (--enable-multi-layer-eagle).",
         f"{SPEC}:373", exception="NotImplementedError"),
    Case("sglang.spec2.multi_layer_rejection", "0.5.14", f"{EAGLE3} --speculative-use-rejection-sampling"),
    Case("sglang.spec2.multi_layer_rejection", "0.5.16", f"{EAGLE3} --enable-multi-layer-eagle "
         f"--speculative-use-rejection-sampling {WIDTHS.format(k=2)}",
         "--speculative-use-rejection-sampling with multi-layer EAGLE (--enable-multi-layer-eagle) requires "
         "--speculative-eagle-topk 1", f"{SPEC}:614"),
    Case("sglang.spec2.multi_layer_rejection", "0.5.16", f"{EAGLE3} --enable-multi-layer-eagle "
         f"--speculative-use-rejection-sampling {WIDTHS.format(k=1)}"),
    Case("sglang.spec2.multi_layer_rejection", "0.5.23", f"{EAGLE3} --enable-multi-layer-eagle "
         f"--speculative-use-rejection-sampling {WIDTHS.format(k=2)}",
         "requires --speculative-eagle-topk 1; rejection sampling is only implemented for the linear (topk=1) chain.",
         f"{SPEC}:1245"),
    Case("sglang.spec2.multi_layer_rejection", "0.5.23", f"{EAGLE3} --speculative-use-rejection-sampling "
         f"{WIDTHS.format(k=2)}"),
    # -- DFLASH's draft window against its draft-token count
    Case("sglang.spec2.dflash_window", "0.5.23", f"--speculative-algorithm DFLASH {DRAFT} "
         "--speculative-draft-window-size 8 --speculative-dflash-block-size 16",
         "--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). window_size=8, "
         "block_size=16.", f"{SPEC}:430"),
    Case("sglang.spec2.dflash_window", "0.5.23", f"--speculative-algorithm DFLASH {DRAFT} "
         "--speculative-draft-window-size 16 --speculative-dflash-block-size 16"),
    Case("sglang.spec2.dflash_window", "0.5.11", f"--speculative-algorithm DFLASH {DRAFT} "
         "--speculative-dflash-draft-window-size 8 --speculative-num-draft-tokens 16",
         "DFLASH --speculative-dflash-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
         "window_size=8, block_size=16.", "sglang/srt/server_args.py:3424"),
    Case("sglang.spec2.dflash_window", "0.5.11", f"--speculative-algorithm DFLASH {DRAFT} "
         "--speculative-dflash-draft-window-size 32 --speculative-num-draft-tokens 16"),
    Case("sglang.spec2.dflash_window", "0.5.16", f"--speculative-algorithm DFLASH {DRAFT} "
         "--speculative-draft-window-size 4 --speculative-num-draft-tokens 8",
         "window_size=4, block_size=8.", f"{SPEC}:247"),
    # -- UNO's attention backends (0.5.20+)
    Case("sglang.spec2.uno_fa3", "0.5.20", "--speculative-algorithm UNO --uno-lora-path l --attention-backend triton",
         "UNO requires FA3 for both prefill and decode attention; got prefill='triton', decode='triton'.",
         f"{SPEC}:505", tp=1),
    Case("sglang.spec2.uno_fa3", "0.5.23", "--speculative-algorithm UNO --uno-lora-path l --attention-backend fa3 "
         "--decode-attention-backend flashinfer",
         "got prefill='fa3', decode='flashinfer'.", f"{SPEC}:608", tp=1),
    Case("sglang.spec2.uno_fa3", "0.5.23", "--speculative-algorithm UNO --uno-lora-path l --attention-backend fa3",
         tp=1),
    # -- DSPARK's draft tokens against its block size (gamma)
    Case("sglang.spec2.dspark_draft_tokens", "0.5.23", f"--speculative-algorithm DSPARK {DRAFT} "
         "--speculative-dspark-block-size 4 --speculative-num-draft-tokens 4",
         "DSpark speculative_num_draft_tokens must equal gamma + 1 (= 5 for gamma=4), but got "
         "speculative_num_draft_tokens=4.", f"{SPEC}:830"),
    Case("sglang.spec2.dspark_draft_tokens", "0.5.23", f"--speculative-algorithm DSPARK {DRAFT} "
         "--speculative-dspark-block-size 4 --speculative-num-draft-tokens 5"),
    Case("sglang.spec2.dspark_draft_tokens", "0.5.16", f"--speculative-algorithm DSPARK {DRAFT} "
         "--speculative-dspark-block-size 7 --speculative-num-draft-tokens 4",
         "(= 8 for gamma=7), but got speculative_num_draft_tokens=4.", f"{SPEC}:376"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{'refused' if c.refused else 'ok'}")
def test_case(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.tp, case.env)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source or "")


def test_promoted_eagle_is_not_judged_for_the_decode_radix_cache() -> None:
    """EAGLE with a draft model may become FROZEN_KV_MTP (a Gemma 4 assistant draft), which the check refuses:
    the release reads the draft's config, so the line is not judged, and the report says why."""
    judged = judge("0.5.23", f"--disaggregation-mode decode --disaggregation-decode-enable-radix-cache "
                             f"--speculative-algorithm EAGLE {DRAFT}")
    assert not [r for r in judged.refusals if r.rule == "sglang.spec2.decode_radix_cache"]
    assert any("sglang.spec2.decode_radix_cache" in n and "FROZEN_KV_MTP" in n for n in judged.not_judged)


def test_promoted_eagle_is_not_judged_for_the_watermark() -> None:
    judged = judge("0.5.23", f"--enable-watermark --speculative-algorithm EAGLE {DRAFT}")
    assert not [r for r in judged.refusals if r.rule == "sglang.spec2.watermark"]
    assert any("sglang.spec2.watermark" in n for n in judged.not_judged)


def test_a_model_that_turns_multi_layer_eagle_on_is_not_judged() -> None:
    """MiMo-V2's override turns multi-layer EAGLE on for EAGLE: the coordination check (which refuses it) and the
    rejection-sampling one are not judged for it, where the same line with Qwen3 passes."""
    words = f"{EAGLE3} --speculative-use-rejection-sampling {WIDTHS.format(k=2)}"
    judged = judge("0.5.23", words, MIMO, env=COORD)
    assert not [r for r in judged.refusals if r.rule.startswith("sglang.spec2.")]
    assert any("sglang.spec2.dp_spec_coordination" in n for n in judged.not_judged)
    assert any("sglang.spec2.multi_layer_rejection" in n for n in judged.not_judged)
    assert not [n for n in judge("0.5.23", words, env=COORD).not_judged if "sglang.spec2." in n]


def test_dflash_draft_tokens_from_the_draft_config_are_not_judged() -> None:
    """Without a block size or draft-token count DFLASH infers the count from the draft's config: not judged."""
    judged = judge("0.5.23", f"--speculative-algorithm DFLASH {DRAFT} --speculative-draft-window-size 8")
    assert not [r for r in judged.refusals if r.rule == "sglang.spec2.dflash_window"]
    assert any("sglang.spec2.dflash_window" in n for n in judged.not_judged)


def test_uno_with_a_backend_the_release_picks_is_not_judged() -> None:
    judged = judge("0.5.23", "--speculative-algorithm UNO --uno-lora-path l", tp=1)
    assert not [r for r in judged.refusals if r.rule == "sglang.spec2.uno_fa3"]
    assert any("sglang.spec2.uno_fa3" in n for n in judged.not_judged)


def test_every_rule_of_the_area_has_a_refusing_and_an_accepted_case() -> None:
    assert {c.rule for c in CASES if c.refused is not None} == set(rules_spec2.RULES)
    assert {c.rule for c in CASES if c.refused is None} == set(rules_spec2.RULES)
