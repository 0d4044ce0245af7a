"""vLLM's config-time refusals of ``engines/vllm/rules_post4.py``: speculative decoding with watermarking, sampling
distribution replay, returned routed experts under adaptive verification, a DCP KV-cache interleave above 1 and
ReplaySSM. Each command line is read by the release's own parser and judged in the release's words at its line;
each refusal has its accepted neighbour."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import EnvCase, LineCase, case_id, judge, layout
from vllm_line_cases import model_of as line_model_of

from pytest_gpulayout.engines.vllm import rules_post4
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

MODELS = Path(__file__).parent.parent / "data" / "models"
NEMOTRON_H = "nemotron-h-8b"            # NemotronHForCausalLM: SupportsReplaySSM, IsHybrid


def model_of(name: str) -> ModelSpec:
    """The cases' models: the shared ones, or a local config of tests/data/models."""
    if name == NEMOTRON_H:
        return load_model(str(MODELS / name))
    return line_model_of(name)


def spec(**keys: object) -> str:
    return f"--speculative-config {json.dumps(keys, separators=(',', ':'))}"


Case = LineCase
WATERMARK = rules_post4.WATERMARK_SPEC
REPLAY = rules_post4.REPLAY_SPEC
ROUTED = rules_post4.ROUTED_ADAPTIVE
INTERLEAVE = rules_post4.INTERLEAVE_SPEC
SSM = rules_post4.REPLAYSSM_SPEC
ASYNC = rules_post4.ASYNC_MAMBA
ALIGN = rules_post4.ALIGN_V2
HC_SP = rules_post4.HC_SP_MODEL
SHARDED = rules_post4.BATCH_SHARDED
SHARDED_WORDS = ("Batch-sharded sampling was explicitly enabled via the --enable-batch-sharded-sampling flag, but is "
                 "not supported in this configuration for the following reason(s): ")

GUMBEL = '--watermark-config {"key":1}'
DUAL = '--watermark-config {"key":1,"algorithm":"dual_key_gumbel"}'
TARGET_ONLY = '--watermark-config {"key":1,"allow_target_only_watermarking":true}'
NGRAM = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}
EAGLE3 = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 2,
          "draft_sample_method": "probabilistic"}
PROB = {**NGRAM, "draft_sample_method": "probabilistic"}
REPLAY_OK = "--return-sampling-mask --logprobs-mode processed_logprobs"
ADAPT = spec(**NGRAM, enable_adaptive_verification=True)

CASES = [
    # watermarking with speculative decoding: the default draft_sample_method is greedy (config/vllm.py:1355-1359 in
    # 0.33.0, 1154-1158 in 0.30.0, 1305-1309 in 0.31.0, 1293-1297 in 0.32.0)
    Case(WATERMARK, "0.33.0", f"{GUMBEL} {spec(**NGRAM)}", layout(),
         refused="Speculative decoding with watermarking requires draft_sample_method='probabilistic'.",
         source="vllm/config/vllm.py:1361"),
    Case(WATERMARK, "0.30.0", f"{GUMBEL} {spec(**NGRAM)}", layout(),
         refused="Speculative decoding with watermarking requires draft_sample_method='probabilistic'.",
         source="vllm/config/vllm.py:1155"),
    Case(WATERMARK, "0.32.0", f"{DUAL} {spec(**EAGLE3)}", layout()),
    Case(WATERMARK, "0.33.0", f"{DUAL} {spec(**EAGLE3)}", layout()),
    Case(WATERMARK, "0.30.0", f"{DUAL} {spec(**EAGLE3)}", layout()),
    Case(WATERMARK, "0.33.0", GUMBEL, layout()),
    # the method: ngram is not an autoregressive drafter (0.33.0 :1378-1387, 0.31.0 :1321-1325)
    Case(WATERMARK, "0.33.0", f"{DUAL} {spec(**PROB)}", layout(),
         refused="Watermarking supports only dflash, dspark, eagle, eagle3 and mtp speculative decoding.",
         source="vllm/config/vllm.py:1384"),
    Case(WATERMARK, "0.31.0", f"{DUAL} {spec(**PROB)}", layout(),
         refused="Watermarking supports only autoregressive model-based speculative decoding.",
         source="vllm/config/vllm.py:1323"),
    # parallel drafting off DSpark (0.32.0 :1302-1308)
    Case(WATERMARK, "0.32.0", f"{DUAL} {spec(**EAGLE3, parallel_drafting=True)}", layout(),
         refused="Parallel speculative drafting is not supported with watermarking.",
         source="vllm/config/vllm.py:1307"),
    # the algorithm without target-only watermarking (0.33.0 :1391-1400, 0.30.0 :1176-1185)
    Case(WATERMARK, "0.33.0", f"{GUMBEL} {spec(**EAGLE3)}", layout(),
         refused="The 'gumbel' watermarking algorithm does not support speculative decoding. Set "
         "allow_target_only_watermarking=true", source="vllm/config/vllm.py:1397"),
    Case(WATERMARK, "0.30.0", f"{GUMBEL} {spec(**EAGLE3)}", layout(),
         refused="The 'gumbel' watermarking algorithm does not support speculative decoding.",
         source="vllm/config/vllm.py:1180"),
    Case(WATERMARK, "0.33.0", f"{TARGET_ONLY} {spec(**EAGLE3)}", layout()),
    # sampling distribution replay with speculative decoding (0.28-0.31: any; 0.32+: adaptive verification)
    Case(REPLAY, "0.28.0", f"{REPLAY_OK} {spec(**NGRAM)}", layout(),
         refused="sampling distribution replay does not support speculative decoding",
         source="vllm/config/vllm.py:1034"),
    Case(REPLAY, "0.31.0", f"{REPLAY_OK} {spec(**NGRAM)}", layout(),
         refused="sampling distribution replay does not support speculative decoding",
         source="vllm/config/vllm.py:1269"),
    Case(REPLAY, "0.31.0", REPLAY_OK, layout()),
    Case(REPLAY, "0.33.0", f"{REPLAY_OK} {ADAPT}", layout(),
         refused="sampling distribution replay with speculative decoding requires fixed verification boundaries",
         source="vllm/config/vllm.py:1315"),
    Case(REPLAY, "0.32.0", f"{REPLAY_OK} {ADAPT}", layout(),
         refused="sampling distribution replay with speculative decoding requires fixed verification boundaries",
         source="vllm/config/vllm.py:1248"),
    Case(REPLAY, "0.33.0", f"{REPLAY_OK} {spec(**NGRAM)}", layout()),
    # returned routed experts with adaptive verification (0.31.0 :1182-1189, 0.33.0 :1209-1216)
    Case(ROUTED, "0.33.0", f"--enable-return-routed-experts {ADAPT}", layout(), model="moe",
         refused="--enable-return-routed-experts is incompatible with adaptive speculative verification.",
         source="vllm/config/vllm.py:1213"),
    Case(ROUTED, "0.31.0", f"--enable-return-routed-experts {ADAPT}", layout(), model="moe",
         refused="--enable-return-routed-experts is incompatible with adaptive speculative verification.",
         source="vllm/config/vllm.py:1186"),
    Case(ROUTED, "0.33.0", f"--enable-return-routed-experts {spec(**NGRAM)}", layout(), model="moe"),
    # MTP with a DCP KV-cache interleave above 1 (0.11.1 :623-626, 0.12.0 :803-806 after :781-788's copy)
    Case(INTERLEAVE, "0.11.1", f"-dcp 2 --dcp-kv-cache-interleave-size 2 {spec(**NGRAM)}", layout(tp=8),
         model="moe", exception="AssertionError",
         refused="MTP with dcp_kv_cache_interleave_size > 1 is not supported now.", source="vllm/config/vllm.py:625"),
    Case(INTERLEAVE, "0.11.1", f"-dcp 2 {spec(**NGRAM)}", layout(tp=8), model="moe"),
    Case(INTERLEAVE, "0.11.1", "-dcp 2 --dcp-kv-cache-interleave-size 2", layout(tp=8), model="moe"),
    Case(INTERLEAVE, "0.12.0", f"-dcp 2 --dcp-kv-cache-interleave-size 2 {spec(**NGRAM)}", layout(tp=8),
         model="moe", exception="AssertionError",
         refused="MTP with cp_kv_cache_interleave_size > 1 is not supported now.", source="vllm/config/vllm.py:806"),
    Case(INTERLEAVE, "0.12.0", f"-dcp 2 --cp-kv-cache-interleave-size 2 {spec(**NGRAM)}", layout(tp=8),
         model="moe", exception="AssertionError",
         refused="MTP with cp_kv_cache_interleave_size > 1 is not supported now.", source="vllm/config/vllm.py:806"),
    Case(INTERLEAVE, "0.12.0", f"-dcp 2 --cp-kv-cache-interleave-size 1 {spec(**NGRAM)}", layout(tp=8),
         model="moe"),
    # ReplaySSM with speculative tokens (0.27.0 :2354-2355, 0.28.0 :2574-2575)
    Case(SSM, "0.27.0", f"--use-replayssm --no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H,
         refused="--use-replayssm does not support speculative decoding", source="vllm/config/vllm.py:2355"),
    Case(SSM, "0.28.0", f"--use-replayssm --no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H,
         refused="--use-replayssm does not support speculative decoding", source="vllm/config/vllm.py:2575"),
    Case(SSM, "0.28.0", "--use-replayssm --no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    Case(SSM, "0.28.0", f"--no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H),
    # --async-scheduling with Mamba prefix caching (0.16.0 :640-644)
    Case(ASYNC, "0.16.0", "--async-scheduling --enable-prefix-caching", layout(), model=NEMOTRON_H,
         refused="Currently, async scheduling is not compatible with prefix caching for Mamba models.",
         source="vllm/config/vllm.py:643"),
    Case(ASYNC, "0.16.0", "--async-scheduling --no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    # --enable-hc-sp on a class without SupportsHCSP (0.33.0 config/model.py:1552-1553, 0.32.0 :1540-1541)
    Case(HC_SP, "0.33.0", "--enable-hc-sp", layout(tp=2), refused="--enable-hc-sp is not supported for this model",
         source="vllm/config/model.py:1553"),
    Case(HC_SP, "0.32.0", "--enable-hc-sp", layout(tp=2), refused="--enable-hc-sp is not supported for this model",
         source="vllm/config/model.py:1540"),
    Case(HC_SP, "0.33.0", "--enable-hc-sp", layout()),
    Case(HC_SP, "0.33.0", "", layout(tp=2)),
    # batch-sharded sampling's blockers (0.33.0 :3182-3222, 0.29.0 :2685-2732, 0.30.0 :2960-3000)
    Case(SHARDED, "0.33.0", "--enable-batch-sharded-sampling", layout(),
         refused=SHARDED_WORDS + "tensor_parallel_size is 1, so there is nothing to shard.",
         source="vllm/config/vllm.py:3215"),
    Case(SHARDED, "0.33.0", "--enable-batch-sharded-sampling --max-num-seqs 2 --max-logprobs -1", layout(tp=4),
         refused=SHARDED_WORDS + "max_num_seqs (2) is below tensor_parallel_size (4); max_logprobs is -1, allowing "
         "vocab-size logprob requests.", source="vllm/config/vllm.py:3215"),
    Case(SHARDED, "0.33.0", "--enable-batch-sharded-sampling --max-num-seqs 4", layout(tp=4)),
    Case(SHARDED, "0.33.0", "--enable-batch-sharded-sampling", layout(tp=2)),
    Case(SHARDED, "0.29.0", f"--enable-batch-sharded-sampling {ADAPT}", layout(tp=2),
         refused=SHARDED_WORDS + "it does not yet work with adaptive verification",
         source="vllm/config/vllm.py:2717"),
    Case(SHARDED, "0.29.0", f"--enable-batch-sharded-sampling {spec(**NGRAM)}", layout(tp=2)),
    Case(SHARDED, "0.30.0", f"--enable-batch-sharded-sampling {REPLAY_OK}", layout(tp=2),
         refused=SHARDED_WORDS + "return_sampling_mask is set and the batch-sharded gather does not forward sampling "
         "masks.", source="vllm/config/vllm.py:2992"),
    # 0.32+: Mamba2 ReplaySSM speculative decoding (0.33.0 :3507-3526, 0.32.0 :3371-3390)
    Case(SSM, "0.33.0", f"--use-replayssm --no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H,
         refused="Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer",
         source="vllm/config/vllm.py:3522"),
    Case(SSM, "0.32.0", f"--use-replayssm --no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H,
         refused="Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer",
         source="vllm/config/vllm.py:3386"),
    Case(SSM, "0.33.0", f"--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching {spec(**NGRAM)}",
         layout(), model=NEMOTRON_H),
    Case(SSM, "0.33.0", f"--use-replayssm --mamba-backend flashinfer --replayssm-buffer-len 2 "
         f"--no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H,
         refused="FlashInfer ReplaySSM speculative decoding requires --replayssm-buffer-len >= 1 + "
         "num_speculative_tokens (3); got 2", source="vllm/config/vllm.py:3515"),
    Case(SSM, "0.33.0", f"--use-replayssm --mamba-backend flashinfer --replayssm-buffer-len 3 "
         f"--no-enable-prefix-caching {spec(**NGRAM)}", layout(), model=NEMOTRON_H),
    Case(SSM, "0.33.0", f"--use-replayssm --mamba-backend flashinfer --enable-prefix-caching {spec(**NGRAM)}",
         layout(), model=NEMOTRON_H,
         refused="FlashInfer ReplaySSM speculative decoding does not support prefix caching",
         source="vllm/config/vllm.py:3509"),
    Case(SSM, "0.32.0", f"--use-replayssm --mamba-backend flashinfer --enable-prefix-caching {spec(**NGRAM)}",
         layout(), model=NEMOTRON_H,
         refused="FlashInfer ReplaySSM speculative decoding requires --mamba-cache-mode none",
         source="vllm/config/vllm.py:3373"),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)




V2_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "1"),)
ALIGN_LINE = "--enable-prefix-caching --mamba-cache-mode align"

ENV_CASES = [
    # Mamba align mode on Model Runner V2 (0.21-0.24: config/vllm.py:1989-1992 in 0.21.0, 2155-2158 in 0.24.0)
    EnvCase(Case(ALIGN, "0.21.0", ALIGN_LINE, layout(), model=NEMOTRON_H, exception="AssertionError",
                 refused="Model Runner V2 has not yet supported mamba_cache_mode='align'.",
                 source="vllm/config/vllm.py:1990"), V2_RUNNER),
    EnvCase(Case(ALIGN, "0.24.0", ALIGN_LINE, layout(), model=NEMOTRON_H, exception="AssertionError",
                 refused="Model Runner V2 has not yet supported mamba_cache_mode='align'.",
                 source="vllm/config/vllm.py:2156"), V2_RUNNER),
    EnvCase(Case(ALIGN, "0.24.0", ALIGN_LINE, layout(), model=NEMOTRON_H), ()),
    EnvCase(Case(ALIGN, "0.21.0", ALIGN_LINE, layout(), model=NEMOTRON_H), (("VLLM_USE_V2_MODEL_RUNNER", "0"),)),
    EnvCase(Case(ALIGN, "0.24.0", "--no-enable-prefix-caching --mamba-cache-mode align", layout(), model=NEMOTRON_H),
            V2_RUNNER),
]


@pytest.mark.parametrize("env_case", ENV_CASES, ids=lambda c: case_id(c.case))
def test_line_with_env(env_case: EnvCase) -> None:
    judge(env_case.case, model_of, env_case.env)


def _mine(version: str, line: str, model: str, rule: str, env: dict[str, str] | None = None) -> tuple[
        list[str], tuple[str, ...]]:
    judged = config_check(resolve(line.split(), Version(version)), model_of(model), layout(), Version(version),
                          env=env or {})
    return [r.message for r in judged.refusals if r.rule == rule], judged.not_judged


def test_async_scheduling_with_mamba_prefix_caching() -> None:
    """0.16.0 (config/vllm.py:640-644): --async-scheduling given with prefix caching on a hybrid model (Mamba
    cache mode all or align), or a Mamba cache mode given on an attention-only model; accepted without prefix
    caching or on a dense model with prefix caching; a hybrid model's default prefix caching is named."""
    refused = "Currently, async scheduling is not compatible with prefix caching for Mamba models."
    assert _mine("0.16.0", "--async-scheduling --enable-prefix-caching", NEMOTRON_H, ASYNC)[0] == [refused]
    assert _mine("0.16.0", "--async-scheduling --mamba-cache-mode align", "dense", ASYNC)[0] == [refused]
    assert _mine("0.16.0", "--async-scheduling --no-enable-prefix-caching", NEMOTRON_H, ASYNC)[0] == []
    assert _mine("0.16.0", "--async-scheduling --enable-prefix-caching", "dense", ASYNC)[0] == []
    assert _mine("0.16.0", "--enable-prefix-caching", NEMOTRON_H, ASYNC)[0] == []
    mine, notes = _mine("0.16.0", "--async-scheduling", NEMOTRON_H, ASYNC)
    assert not mine and any(f"({ASYNC})" in n for n in notes), notes


def test_watermark_refuses_once_with_the_first_check() -> None:
    """The release raises at its first failing check: a line failing three of them is refused once, in the first's
    words (draft_sample_method), not in the method's or the algorithm's."""
    mine, _ = _mine("0.33.0", f"{GUMBEL} {spec(**NGRAM)}", "dense", WATERMARK)
    assert mine == ["Speculative decoding with watermarking requires draft_sample_method='probabilistic'."]


def test_a_method_the_draft_decides_is_named_not_guessed() -> None:
    """A draft model named without a method: the release's method comes from the draft's config, so the method
    checks are named as not judged and the line is not refused by them."""
    line = f"{DUAL} " + spec(model="org/some-draft", num_speculative_tokens=2, draft_sample_method="probabilistic")
    mine, notes = _mine("0.33.0", line, "dense", WATERMARK)
    assert not mine
    assert any(f"({WATERMARK})" in n for n in notes), notes


def test_replayssm_refuses_once_with_the_first_check() -> None:
    """Prefix caching, a short buffer and the Triton backend together: the release raises at the cache mode."""
    line = f"--use-replayssm --replayssm-buffer-len 2 --enable-prefix-caching {spec(**NGRAM)}"
    mine, _ = _mine("0.33.0", line, NEMOTRON_H, SSM)
    assert mine == ["FlashInfer ReplaySSM speculative decoding does not support prefix caching; use "
                    "--disable-prefix-caching"]


def test_replay_on_model_runner_v1_is_left_to_the_runner_check() -> None:
    """With VLLM_USE_V2_MODEL_RUNNER=0 the release refuses Model Runner V1 first: this rule says nothing there,
    and the runner rule refuses."""
    line = f"{REPLAY_OK} {spec(**NGRAM)}"
    mine, _ = _mine("0.31.0", line, "dense", REPLAY, {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert not mine
    runner, _ = _mine("0.31.0", line, "dense", "vllm.model_runner.sampling_replay", {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert runner == ["sampling distribution replay requires Model Runner V2"]


def test_routed_experts_on_a_dense_model_is_left_to_the_moe_check() -> None:
    """A dense model is refused by the MoE check that comes first; this rule does not add a second refusal."""
    mine, _ = _mine("0.33.0", f"--enable-return-routed-experts {ADAPT}", "dense", ROUTED,
                    {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert not mine


def test_hc_sp_on_a_qwen4exp_class_is_accepted() -> None:
    """The Qwen4Exp classes have SupportsHCSP: the same line at TP 2 is not refused by this rule."""
    model = replace(line_model_of("moe"), architectures=("Qwen4ExpForCausalLM",))
    version = Version("0.33.0")
    judged = config_check(resolve(["--enable-hc-sp"], version), model, layout(tp=2), version)
    assert not [r for r in judged.refusals if r.rule == HC_SP], judged.refusals
    judged = config_check(resolve(["--enable-hc-sp"], version), line_model_of("moe"), layout(tp=2), version)
    assert [r.rule for r in judged.refusals if r.rule == HC_SP] == [HC_SP]


def test_batch_sharded_sampling_without_a_resolved_max_num_seqs_is_named() -> None:
    """At TP > 1 the blocker list reads max_num_seqs: where it is not resolved the entry is named, never guessed;
    without the flag the function returns first and refuses nothing."""
    version = Version("0.33.0")
    judged = config_check(resolve(["--enable-batch-sharded-sampling"], version), line_model_of("dense"),
                          Layout(tensor_parallel_size=2, compute_capability=(9, 0)), version)
    assert not [r for r in judged.refusals if r.rule == SHARDED]
    assert any(f"({SHARDED})" in n for n in judged.not_judged), judged.not_judged
    mine, _ = _mine("0.33.0", "--max-logprobs -1", "dense", SHARDED)
    assert mine == []
