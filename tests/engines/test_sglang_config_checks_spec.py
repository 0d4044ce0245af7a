"""SGLang's config-time refusals about speculative decoding, LoRA adapters and the metrics bucket rules
(``engines/sglang/rules_spec.py``): each refused line in the release's words, at its file:line, with its
exception, beside an accepted neighbour (the line without the conflict, or a release without the check). The
lines go through each release's own parser tables (``cli.resolve``), so its defaults are the ones judged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_spec
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import RULES, config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout

H100 = (9, 0)
QWEN = "Qwen/Qwen3-8B"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
MINE = tuple(rules_spec.RULES)


def on(tp: int = 1, pp: int = 1) -> Layout:
    return Layout(tp, pp, 1, H100, "NVIDIA H100 80GB HBM3", 81559)


def judge(version: str, words: str, layout: Layout | None = None, model: str = QWEN) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), layout or on(), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    layout: Layout = on()
    refused: str | None = None          # the release's words (exactly), or None where it accepts the line
    source: str = ""                    # file:line in that release
    exception: str = "ValueError"
    model: str = QWEN


SA = "sglang/srt/server_args.py"
HOOK = "sglang/srt/arg_groups/speculative_hook.py"
LORA = "sglang/srt/arg_groups/lora_hook.py"
VAL = "sglang/srt/arg_groups/validation_hook.py"
STANDALONE = "--speculative-algorithm STANDALONE --speculative-draft-model-path d"
EAGLE3_RS = "--speculative-algorithm EAGLE3 --speculative-use-rejection-sampling"
STEPS_TOPK4 = "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
DFLASH = "--speculative-algorithm DFLASH --speculative-draft-model-path d"
DSPARK = "--speculative-algorithm DSPARK --speculative-draft-model-path d"
PREFILL, DECODE = "--disaggregation-mode prefill", "--disaggregation-mode decode"
FAKE, RADIX = "--disaggregation-transfer-backend fake", "--disaggregation-decode-enable-radix-cache"
UNO = "--speculative-algorithm UNO --uno-lora-path u"

CASES = [
    # -- the EAGLE family's steps / top-k / draft tokens: all three, or none (the release picks them)
    Case("sglang.spec.eagle_params", "0.4.10.post2", "--speculative-algorithm EAGLE --speculative-eagle-topk 4",
         refused="", source=f"{SA}:561", exception="AssertionError"),
    Case("sglang.spec.eagle_params", "0.4.10.post2", "--speculative-algorithm NEXTN --speculative-num-draft-tokens 4",
         refused="", source=f"{SA}:561", exception="AssertionError"),    # NEXTN is EAGLE
    Case("sglang.spec.eagle_params", "0.4.10.post2",
         "--speculative-algorithm EAGLE --speculative-eagle-topk 4 --speculative-num-steps 3"),
    Case("sglang.spec.eagle_params", "0.5.8", "--speculative-algorithm EAGLE3 --speculative-eagle-topk 4",
         refused="", source=f"{SA}:2193", exception="AssertionError"),
    Case("sglang.spec.eagle_params", "0.5.8", "--speculative-algorithm EAGLE3"),
    Case("sglang.spec.eagle_params", "0.5.23", "--speculative-algorithm nextn --speculative-eagle-topk 4",
         refused="", source=f"{HOOK}:1160", exception="AssertionError"),  # upper-cased, then EAGLE
    Case("sglang.spec.eagle_params", "0.5.23", "--speculative-algorithm NGRAM --speculative-eagle-topk 4"),
    # -- STANDALONE with attention DP
    Case("sglang.spec.standalone", "0.5.2", f"{STANDALONE} --enable-dp-attention --dp-size 2", on(tp=2),
         refused="Currently standalone speculative decoding does not support dp attention.", source=f"{SA}:726",
         exception="AssertionError"),
    Case("sglang.spec.standalone", "0.5.8", f"{STANDALONE} --enable-dp-attention --dp-size 2", on(tp=2),
         refused="Currently standalone speculative decoding does not support dp attention.", source=f"{SA}:2130"),
    Case("sglang.spec.standalone", "0.5.8", STANDALONE, on(tp=2)),
    Case("sglang.spec.standalone", "0.5.23", f"{STANDALONE} --enable-dp-attention --dp-size 2", on(tp=2),
         refused="Currently standalone speculative decoding does not support dp attention.", source=f"{HOOK}:1082"),
    Case("sglang.spec.standalone", "0.5.23", f"{STANDALONE} --attn-dp-size 2", on(tp=2),
         refused="Currently standalone speculative decoding does not support dp attention.", source=f"{HOOK}:1082"),
    Case("sglang.spec.standalone", "0.5.23", "--speculative-algorithm EAGLE --attn-dp-size 2", on(tp=2)),
    # -- NGRAM with attention DP
    Case("sglang.spec.ngram", "0.5.8", "--speculative-algorithm NGRAM --enable-dp-attention --dp-size 2", on(tp=2),
         refused="Currently ngram speculative decoding does not support dp attention.", source=f"{SA}:2268"),
    Case("sglang.spec.ngram", "0.5.8", "--speculative-algorithm NGRAM", on(tp=2)),
    Case("sglang.spec.ngram", "0.5.23", "--speculative-algorithm NGRAM --attn-dp-size 2", on(tp=2),
         refused="Currently ngram speculative decoding does not support dp attention.", source=f"{HOOK}:1369"),
    Case("sglang.spec.ngram", "0.5.23", "--speculative-algorithm NGRAM", on(tp=2)),
    Case("sglang.spec.ngram", "0.5.12", "--speculative-algorithm NGRAM --speculative-ngram-external-corpus-path c",
         refused="--speculative-ngram-external-sam-budget must be positive when "
                 "--speculative-ngram-external-corpus-path is set."),            # the budget defaults to 0
    Case("sglang.spec.ngram", "0.5.23", "--speculative-algorithm NGRAM --speculative-ngram-external-corpus-path c "
                                        "--speculative-ngram-external-sam-budget 12",
         refused="speculative_ngram_external_sam_budget must be less than or equal to speculative_num_draft_tokens "
                 "- 1 (11)."),                                                   # 12 draft tokens by default
    Case("sglang.spec.ngram", "0.5.23", "--speculative-algorithm NGRAM --speculative-ngram-external-corpus-path c "
                                        "--speculative-ngram-external-sam-budget 12 --speculative-num-draft-tokens 16"),
    # -- the algorithm-wide flags
    Case("sglang.spec.flags", "0.5.16", "--speculative-draft-window-size 0",
         refused="--speculative-draft-window-size must be positive, got 0."),
    Case("sglang.spec.flags", "0.5.23", "--speculative-algorithm EAGLE3 --speculative-draft-window-size 0",
         refused="--speculative-draft-window-size must be positive, got 0."),
    Case("sglang.spec.flags", "0.5.23", "--speculative-algorithm EAGLE3 --speculative-draft-window-size 64"),
    Case("sglang.spec.flags", "0.5.23", "--speculative-draft-sink-size 4",
         refused="--speculative-draft-sink-size requires --speculative-draft-window-size."),
    Case("sglang.spec.flags", "0.5.23", "--speculative-draft-sink-size 4 --speculative-draft-window-size 64"),
    Case("sglang.spec.flags", "0.5.11", "--speculative-algorithm DFLASH --speculative-draft-model-path d "
                                        "--speculative-dflash-draft-window-size 0",
         refused="DFLASH requires --speculative-dflash-draft-window-size to be positive, got 0."),
    Case("sglang.spec.flags", "0.5.12", "--speculative-algorithm EAGLE3 --speculative-skip-dp-mlp-sync",
         refused="--speculative-skip-dp-mlp-sync is only supported with speculative_algorithm == EAGLE, got EAGLE3.",
         exception="AssertionError"),
    Case("sglang.spec.flags", "0.5.11", "--speculative-algorithm NEXTN --speculative-skip-dp-mlp-sync"),  # EAGLE
    Case("sglang.spec.flags", "0.5.23", "--speculative-algorithm STANDALONE --speculative-draft-model-path d "
                                        "--speculative-use-block-verification",
         refused="--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / DSPARK."),
    Case("sglang.spec.flags", "0.5.23", "--speculative-algorithm DFLASH --speculative-draft-model-path d "
                                        "--speculative-use-block-verification"),
    # -- DFLASH: PP, its draft model, its block size, attention DP
    Case("sglang.spec.dflash", "0.5.12", DFLASH, on(pp=2),
         refused="Currently DFLASH speculative decoding only supports pp_size == 1.", source=f"{SA}:3596"),
    Case("sglang.spec.dflash", "0.5.12", DFLASH),
    Case("sglang.spec.dflash", "0.5.12", "--speculative-algorithm DFLASH",
         refused="DFLASH speculative decoding requires setting --speculative-draft-model-path.", source=f"{SA}:3601"),
    Case("sglang.spec.dflash", "0.5.12", f"{DFLASH} --speculative-dflash-block-size 8 --speculative-num-draft-tokens 4",
         refused="Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ. "
                 "For DFLASH they must match. speculative_num_draft_tokens=4, speculative_dflash_block_size=8.",
         source=f"{SA}:3637"),
    Case("sglang.spec.dflash", "0.5.12",
         f"{DFLASH} --speculative-dflash-block-size 8 --speculative-num-draft-tokens 8"),
    Case("sglang.spec.dflash", "0.5.16", f"{DFLASH} --enable-dp-attention --dp-size 2", on(tp=2),
         refused="Currently DFLASH speculative decoding does not support dp attention."),
    Case("sglang.spec.dflash", "0.5.23", f"{DFLASH} --attn-dp-size 2", on(tp=2),
         refused="DFLASH with dp attention requires --enable-dp-lm-head.", source=f"{HOOK}:308"),
    Case("sglang.spec.dflash", "0.5.23", f"{DFLASH} --attn-dp-size 2 --enable-dp-lm-head", on(tp=2)),
    Case("sglang.spec.dflash", "0.5.23", DFLASH, on(pp=2),
         refused="Currently DFLASH speculative decoding only supports pp_size == 1.", source=f"{HOOK}:320"),
    # -- UNO: one GPU, no draft model, its LoRA path, no Multi-LoRA
    Case("sglang.spec.uno", "0.5.23", UNO, on(tp=2), refused="UNO requires TP=PP=1."),
    Case("sglang.spec.uno", "0.5.23", UNO),
    Case("sglang.spec.uno", "0.5.20", "--speculative-algorithm UNO", refused="UNO requires --uno-lora-path."),
    Case("sglang.spec.uno", "0.5.20", f"{UNO} --speculative-draft-model-path d",
         refused="UNO reuses the target model and does not accept --speculative-draft-model-path."),
    Case("sglang.spec.uno", "0.5.23", f"{UNO} --lora-paths a",
         refused="UNO does not support public Multi-LoRA serving."),
    # -- UNO's widths: linear (K = 1) or a tree of F = steps + 1 levels
    Case("sglang.spec.uno_shape", "0.5.23", UNO,
         refused="UNO requires --speculative-num-draft-tokens to be a positive integer denoting the linear width or "
                 "tree verify width Q."),
    Case("sglang.spec.uno_shape", "0.5.23", f"{UNO} --speculative-num-draft-tokens 4"),
    Case("sglang.spec.uno_shape", "0.5.23", f"{UNO} --speculative-num-draft-tokens 8 --speculative-eagle-topk 4",
         refused="UNO tree mode requires --speculative-num-steps so its draft width F can be derived as "
                 "speculative_num_steps + 1."),
    Case("sglang.spec.uno_shape", "0.5.20", f"{UNO} --speculative-num-draft-tokens 64 --speculative-eagle-topk 2 "
                                            "--speculative-num-steps 3",
         refused="UNO tree mode cannot build the requested Q from F and K: Q=64 exceeds capacity=15 for F=4, K=2."),
    Case("sglang.spec.uno_shape", "0.5.20", f"{UNO} --speculative-num-draft-tokens 6 --speculative-eagle-topk 2 "
                                            "--speculative-num-steps 3"),
    Case("sglang.spec.uno_shape", "0.5.23", f"{UNO} --speculative-num-draft-tokens 4 --enable-deterministic-inference",
         refused="UNO does not support --enable-deterministic-inference because its sampling path does not use "
                 "per-request seeds."),
    # -- LoRA: counts and modules
    Case("sglang.lora.args", "0.5.8", "--lora-paths a=b a=c --max-loaded-loras 1 --max-loras-per-batch 1",
         refused="The number of LoRA paths should not exceed max_loaded_loras. max_loaded_loras=1, lora_paths=2",
         source=f"{SA}:5093", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.8", "--lora-paths a=b a=c --max-loaded-loras 2 --max-loras-per-batch 1"),
    Case("sglang.lora.args", "0.4.10.post2",   # a dict by name then: two words of one name are one adapter
         "--lora-paths a=b a=c --max-loaded-loras 1 --max-loras-per-batch 1 --disable-radix-cache"),
    Case("sglang.lora.args", "0.5.23", "--lora-paths a --max-loaded-loras 4",
         refused="max_loaded_loras should be greater than or equal to max_loras_per_batch. max_loaded_loras=4, "
                 "max_loras_per_batch=8", source=f"{LORA}:158", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.23", "--max-loras-per-batch 0", refused="max_loras_per_batch must be positive",
         source=f"{LORA}:36", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.23", "--enable-lora --lora-target-modules all q_proj --max-lora-rank 8",
         refused="If 'all' is specified in --lora-target-modules, it should be the only module specified.",
         source=f"{LORA}:147", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.23", "--enable-lora --lora-target-modules all all --max-lora-rank 8"),  # a set
    Case("sglang.lora.args", "0.4.10.post2", "--enable-lora --lora-target-modules q_proj",
         refused="When no initial --lora-paths is provided, you need to specify both --max-lora-rank and "
                 "--lora-target-modules for LoRA initialization.", source=f"{SA}:2015", exception="AssertionError"),
    Case("sglang.lora.args", "0.4.10.post2", "--lora-target-modules q_proj"),                # LoRA is off
    Case("sglang.lora.args", "0.5.8", "--lora-paths a --enable-lora-overlap-loading",
         refused="Enabling LoRA overlap loading requires pinning LoRA adapter weights in CPU memory, so "
                 "--max-loaded-loras must be less than or equal to double --max-loras-per-batch: 16",
         source=f"{SA}:5005", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.8", "--lora-paths a --enable-lora-overlap-loading --max-loaded-loras 16"),
    Case("sglang.lora.args", "0.5.12", "--lora-paths a --lora-drain-wait-threshold -1",
         refused="--lora-drain-wait-threshold must be non-negative.", exception="AssertionError"),
    Case("sglang.lora.paths_json", "0.5.8", '--lora-paths {"lora_path":"/a"}',
         refused="'{\"lora_path\":\"/a\"}' looks like a JSON str, but it does not contain 'lora_name' and "
                 "'lora_path' keys.", exception="AssertionError"),
    Case("sglang.lora.paths_json", "0.5.23", '--lora-paths {"lora_name":"a","lora_path":"/a"} b=/b'),
    Case("sglang.lora.paths_json", "0.5.23", '--lora-paths {"name":"a"}',
         refused="'{\"name\":\"a\"}' looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' "
                 "keys.", exception="AssertionError", source="sglang/srt/arg_groups/argparse_actions.py:"),
    Case("sglang.lora.args", "0.5.11", "--lora-paths a --lora-use-virtual-experts",
         refused="--lora-use-virtual-experts requires --lora-backend triton. Got: csgmv", exception="AssertionError"),
    Case("sglang.lora.args", "0.5.11", "--lora-paths a --lora-use-virtual-experts --lora-backend triton"),
    # -- speculative decoding against the attention backend the line gives (None where it gives none)
    Case("sglang.spec.attention_backend", "0.4.10.post2",
         "--speculative-algorithm EAGLE --attention-backend trtllm_mla",
         refused="trtllm_mla backend does not support speculative decoding yet."),
    Case("sglang.spec.attention_backend", "0.4.10.post2", "--attention-backend trtllm_mla"),
    Case("sglang.spec.attention_backend", "0.5.1", "--speculative-algorithm NEXTN --attention-backend flashinfer "
                                                   "--page-size 16", model=DEEPSEEK,
         refused="Speculative decoding with page_size != 1 is not supported. Please set page_size to 1."),
    Case("sglang.spec.attention_backend", "0.5.1", "--speculative-algorithm NEXTN --attention-backend flashinfer",
         model=DEEPSEEK),
    Case("sglang.spec.attention_backend", "0.5.1", "--speculative-algorithm EAGLE --attention-backend flashinfer "
                                                   "--page-size 16"),                       # Qwen3: not checked
    # -- the LoRA MoE runner (0.5.23)
    Case("sglang.lora.moe_runner", "0.5.23", "--moe-runner-backend lora_triton",
         refused="--moe-runner-backend lora_triton requires --enable-lora (or --lora-paths)"),
    Case("sglang.lora.moe_runner", "0.5.23", "--moe-runner-backend lora_triton --lora-paths a",
         refused="--moe-runner-backend lora_triton requires --lora-backend triton_v2"),
    Case("sglang.lora.moe_runner", "0.5.23",
         "--moe-runner-backend lora_triton --lora-paths a --lora-backend triton_v2"),
    Case("sglang.lora.moe_runner", "0.5.23", "--moe-runner-backend triton --lora-paths a"),
    Case("sglang.lora.draft_moe_runner", "0.5.23",
         "--speculative-algorithm EAGLE3 --speculative-moe-runner-backend lora_triton",
         refused="--speculative-moe-runner-backend lora_triton is not supported: the LoRA MoE runner serves adapter "
                 "traffic on the target model"),
    Case("sglang.lora.draft_moe_runner", "0.5.23", "--speculative-algorithm EAGLE3 --moe-runner-backend lora_triton "
                                                   "--lora-paths a --lora-backend triton_v2"),   # the draft: auto
    # -- the speculative MoE runner (0.5.7 - 0.5.11)
    Case("sglang.spec.moe_runner", "0.5.8", "--speculative-moe-runner-backend flashinfer_trtllm",
         refused="Currently speculative MoE runner backend cannot be flashinfer_trtllm for risk in some draft models.",
         exception="AssertionError"),
    Case("sglang.spec.moe_runner", "0.5.10", "--speculative-moe-runner-backend flashinfer_trtllm",
         refused="Currently speculative MoE runner backend doesn't support flashinfer_trtllm, please use triton or "
                 "auto backend for speculative moe runner instead.", exception="AssertionError"),
    Case("sglang.spec.moe_runner", "0.5.10", "--speculative-moe-runner-backend triton"),
    Case("sglang.spec.moe_runner", "0.5.12", "--speculative-moe-runner-backend flashinfer_trtllm"),   # no check then
    # -- LoRA with speculative decoding (0.5.5.post3 - 0.5.18)
    Case("sglang.lora.speculative", "0.5.8", "--lora-paths a --speculative-algorithm EAGLE",
         refused="Currently LoRA is only compatible with NGRAM speculative decoding.", source=f"{SA}:5015"),
    Case("sglang.lora.speculative", "0.5.8", "--lora-paths a --speculative-algorithm NGRAM"),
    Case("sglang.lora.speculative", "0.5.5", "--lora-paths a --speculative-algorithm EAGLE"),
    Case("sglang.lora.speculative", "0.5.23", f"--lora-paths a {STANDALONE}",
         refused="LoRA is only compatible with NGRAM, EAGLE, NEXTN, EAGLE3, DFLASH, or DSPARK speculative decoding, "
                 "not STANDALONE.", source=f"{LORA}:260"),
    Case("sglang.lora.speculative", "0.5.23", "--lora-paths a --speculative-algorithm EAGLE3 "
                                              "--speculative-draft-model-path d"),
    Case("sglang.lora.speculative", "0.5.23", STANDALONE),                                    # LoRA is off
    # -- rejection sampling (0.5.14+), over the top-k as it stands after the release's auto choice
    Case("sglang.spec.rejection_sampling", "0.5.16", f"{STANDALONE} --speculative-use-rejection-sampling",
         refused="--speculative-use-rejection-sampling is only supported for EAGLE / EAGLE3 / NEXTN, not "
                 "speculative_algorithm=STANDALONE.", exception="NotImplementedError"),
    Case("sglang.spec.rejection_sampling", "0.5.16",
         f"{EAGLE3_RS} --speculative-num-steps 3 --speculative-eagle-topk 1"),
    Case("sglang.spec.rejection_sampling", "0.5.23", f"{EAGLE3_RS} {STEPS_TOPK4}",
         refused="--speculative-use-rejection-sampling requires --speculative-eagle-topk=1."),
    Case("sglang.spec.rejection_sampling", "0.5.23",
         f"--speculative-algorithm EAGLE3 --speculative-use-block-verification {STEPS_TOPK4}",
         refused="--speculative-use-rejection-sampling requires --speculative-eagle-topk=1."),   # block verification
    Case("sglang.spec.rejection_sampling", "0.5.19", f"{EAGLE3_RS} --speculative-accept-threshold-single 0.5",
         refused="--speculative-use-rejection-sampling is incompatible with --speculative-accept-threshold-single / "
                 "--speculative-accept-threshold-acc; rejection sampling ignores the accept thresholds."),
    Case("sglang.spec.rejection_sampling", "0.5.19",
         "--speculative-algorithm EAGLE3 --speculative-accept-threshold-single 0.5"),
    # -- DSPARK and pipeline parallelism
    Case("sglang.spec.dspark", "0.5.16", DSPARK, on(pp=2),
         refused="Currently DSpark speculative decoding only supports pp_size == 1."),
    Case("sglang.spec.dspark", "0.5.16", DSPARK),
    Case("sglang.spec.dspark", "0.5.23", DSPARK, on(pp=2),
         refused="DSpark pipeline parallelism requires PD prefill; decode and non-disaggregated serving require "
                 "pp_size == 1."),
    Case("sglang.spec.dspark", "0.5.23", f"{DSPARK} {PREFILL}", on(pp=2)),
    Case("sglang.spec.dspark", "0.5.18", f"{DSPARK} --enable-dp-attention --dp-size 2", on(tp=2),
         refused="DSpark with dp attention requires --enable-dp-lm-head."),
    Case("sglang.spec.dspark", "0.5.18", f"{DSPARK} --enable-dp-attention --dp-size 2 --enable-dp-lm-head", on(tp=2)),
    Case("sglang.spec.dspark", "0.5.23", f"{DSPARK} --attn-dp-size 2", on(tp=2),
         refused="DSpark with dp attention requires --enable-dp-lm-head."),
    Case("sglang.spec.dspark", "0.5.23", f"{DSPARK} --attn-dp-size 2 --enable-dp-lm-head --attn-cp-size 2", on(tp=4),
         refused="DSpark with dp attention does not support context parallel (attn_cp_size=2)."),
    Case("sglang.spec.dspark", "0.5.19", f"{DSPARK} --speculative-dspark-block-size 0",
         refused="DSpark requires --speculative-dspark-block-size to be positive, got 0."),
    # -- pipeline parallelism with speculative decoding (the PP handler turns the overlap schedule off first)
    Case("sglang.spec.pipeline_parallel", "0.4.9", "--speculative-algorithm EAGLE", on(pp=2),
         refused="Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked "
                 "prefill.", exception="AssertionError"),
    Case("sglang.spec.pipeline_parallel", "0.4.9", "", on(pp=2)),
    Case("sglang.spec.pipeline_parallel", "0.4.9", "--enable-mixed-chunk", on(pp=2),
         refused="Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked "
                 "prefill.", exception="AssertionError"),
    Case("sglang.spec.pipeline_parallel", "0.5.12", "--enable-mixed-chunk", on(pp=2)),          # no longer checked
    Case("sglang.spec.pipeline_parallel", "0.5.12", "--speculative-algorithm NGRAM", on(pp=2),
         refused="Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
         exception="AssertionError"),
    Case("sglang.spec.pipeline_parallel", "0.5.12", "--speculative-algorithm NGRAM"),
    Case("sglang.spec.pipeline_parallel", "0.5.20", "--speculative-algorithm EAGLE", on(pp=2),
         refused="Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
         exception="AssertionError"),
    Case("sglang.spec.pipeline_parallel", "0.5.23", DSPARK, on(pp=2),
         refused="Pipeline parallel DSPARK requires disaggregation-mode=prefill", exception="AssertionError"),
    Case("sglang.spec.pipeline_parallel", "0.5.23", f"{DSPARK} {PREFILL}", on(pp=2)),
    # -- LoRA and the radix cache (before 0.5.1)
    Case("sglang.lora.radix_cache", "0.4.9", "--lora-paths a",
         refused="compatibility of lora and radix attention is in progress", exception="AssertionError"),
    Case("sglang.lora.radix_cache", "0.4.9", "--lora-paths a --disable-radix-cache"),
    Case("sglang.lora.radix_cache", "0.4.9", "--lora-paths a --disaggregation-mode decode"),   # decode sets it
    Case("sglang.lora.radix_cache", "0.4.10.post2", "--lora-paths a",
         refused="compatibility of lora and radix attention is in progress", source=f"{SA}:1960",
         exception="AssertionError"),
    Case("sglang.lora.radix_cache", "0.4.6", "--lora-paths a --disable-radix-cache",
         refused="compatibility of lora and cuda graph and radix attention is in progress", exception="AssertionError"),
    Case("sglang.lora.radix_cache", "0.4.6", "--lora-paths a --disable-radix-cache --attention-backend torch_native"),
    Case("sglang.lora.radix_cache", "0.4.6", "--lora-paths a --disable-radix-cache --disable-cuda-graph"),
    Case("sglang.lora.radix_cache", "0.5.1", "--lora-paths a"),
    # -- the metrics bucket rules
    Case("sglang.metrics.buckets", "0.5.2", "--prompt-tokens-buckets custom 1 2",
         refused="Unsupported --prompt-tokens-buckets rule type: 'custom'. Must be one of: 'tse', 'default', "
                 "'customer'", source=f"{SA}:2396", exception="AssertionError"),
    Case("sglang.metrics.buckets", "0.5.2", "--prompt-tokens-buckets customer 1 2"),
    Case("sglang.metrics.buckets", "0.5.3", "--prompt-tokens-buckets custom 1 2"),
    Case("sglang.metrics.buckets", "0.5.8", "--generation-tokens-buckets tse 1 2 0",
         refused="--generation-tokens-buckets TSE count must be positive, got: 0", source=f"{SA}:5137",
         exception="AssertionError"),
    Case("sglang.metrics.buckets", "0.5.8", "--generation-tokens-buckets tse 1000 1.5 30"),
    Case("sglang.metrics.buckets", "0.5.8", "--prompt-tokens-buckets tse 1 2 x",
         refused="--prompt-tokens-buckets TSE rule parameters must be: ['tse', <float:middle>, <float:base>, "
                 "<int:count>]", source=f"{SA}:5133", exception="AssertionError"),
    Case("sglang.metrics.buckets", "0.5.23", "--prompt-tokens-buckets default 1",
         refused="--prompt-tokens-buckets default rule should only have one parameter: ['default'], got 2",
         exception="AssertionError"),
    Case("sglang.metrics.buckets", "0.5.23", "--prompt-tokens-buckets default"),
    Case("sglang.metrics.buckets", "0.5.23", "--prompt-tokens-buckets custom 10 -1",
         refused="--prompt-tokens-buckets custom rule bucket values should be non-negative",
         exception="AssertionError"),
    Case("sglang.metrics.buckets", "0.5.23", "--prompt-tokens-buckets custom 10 ten",
         refused="--prompt-tokens-buckets custom rule bucket values must be numeric", exception="AssertionError"),
    # -- PD disaggregation
    Case("sglang.pd.decode_flags", "0.4.9", "--disaggregation-mode decode --disaggregation-decode-tp 2", on(tp=2),
         refused="Cannot set --disaggregation-decode-tp for the decode engine.", exception="AssertionError"),
    Case("sglang.pd.decode_flags", "0.5.8", "--disaggregation-mode decode --disaggregation-decode-dp 2", on(tp=2),
         refused="Cannot set --disaggregation-decode-dp for the decode engine.", exception="AssertionError"),
    Case("sglang.pd.decode_flags", "0.5.8", "--disaggregation-mode prefill --disaggregation-decode-tp 2", on(tp=2)),
    Case("sglang.pd.tp_ratio", "0.5.8", "--disaggregation-mode prefill --disaggregation-decode-tp 6", on(tp=4),
         refused="Different tp size is supported only when one tp is multiple of the other. decode_tp=6, "
                 "prefill_tp=4", exception="AssertionError"),
    Case("sglang.pd.tp_ratio", "0.5.8", "--disaggregation-mode prefill --disaggregation-decode-tp 8", on(tp=4)),
    Case("sglang.pd.tp_ratio", "0.4.9", "--disaggregation-mode prefill --disaggregation-decode-tp 3", on(tp=2),
         refused="Different tp size is supported only when one tp is multiple of the other. decode_tp=3, "
                 "prefill_tp=2", exception="AssertionError"),
    Case("sglang.pd.tp_ratio", "0.4.9", "--disaggregation-mode prefill", on(tp=2)),   # the decode TP is its own
    Case("sglang.pd.transfer_backend", "0.5.10", f"{PREFILL} {FAKE}",
         refused="Prefill server does not support 'fake' as the transfer backend", exception="AssertionError"),
    Case("sglang.pd.transfer_backend", "0.5.10", f"{DECODE} {FAKE}"),
    Case("sglang.pd.transfer_backend", "0.5.23", f"{PREFILL} {FAKE}",
         refused="Prefill server does not support 'fake' as the transfer backend", exception="AssertionError",
         source="sglang/srt/arg_groups/pd_disaggregation_hook.py:146"),
    Case("sglang.pd.transfer_backend", "0.5.11", f"{DECODE} {RADIX}",
         refused=f"{RADIX} currently requires --disaggregation-transfer-backend nixl"),
    Case("sglang.pd.transfer_backend", "0.5.12", f"{DECODE} {RADIX}"),
    Case("sglang.pd.transfer_backend", "0.5.19",
         "--disaggregation-mode decode --dcp-size 2 --disaggregation-transfer-backend ascend", on(tp=2),
         refused="PD decode DCP requires --disaggregation-transfer-backend mooncake, nixl, or fake for synthetic "
                 "benchmarking, got 'ascend'."),
    Case("sglang.pd.transfer_backend", "0.5.23",
         "--disaggregation-mode decode --dcp-size 2 --disaggregation-transfer-backend ascend", on(tp=2)),
    Case("sglang.pd.decode_radix_cache", "0.5.12",
         "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --speculative-algorithm nextn",
         refused="--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
                 "(--speculative-algorithm nextn)"),               # read before speculative decoding resolves it
    Case("sglang.pd.decode_radix_cache", "0.5.21",
         "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --speculative-algorithm dspark",
         refused="--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
                 "(--speculative-algorithm dspark)"),
    Case("sglang.pd.decode_radix_cache", "0.5.21",
         "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --speculative-algorithm DSPARK"),
    Case("sglang.pd.decode_radix_cache", "0.5.21", "--disaggregation-decode-enable-radix-cache --enable-hisparse"),
    Case("sglang.pd.decode_radix_cache", "0.5.21",
         "--disaggregation-mode decode --disaggregation-decode-enable-radix-cache --enable-hisparse",
         refused="--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse"),
    Case("sglang.pd.host_receive", "0.5.23", "--disaggregation-decode-host-receive-threshold 1.5",
         refused="--disaggregation-decode-host-receive-threshold must be between 0 and 1"),
    Case("sglang.pd.host_receive", "0.5.23",
         "--disaggregation-mode decode --disaggregation-decode-host-receive-threshold 0.5 --enable-pd-role-switch",
         refused="Decode host receive does not yet support HiSparse or role switching"),
    Case("sglang.pd.host_receive", "0.5.23", f"{DECODE} --disaggregation-decode-host-receive-threshold 0.5"),
    Case("sglang.pd.host_receive", "0.5.21",
         "--disaggregation-decode-host-receive-threshold 0.5 --disaggregation-decode-retraction-backup cpu_tensor",
         refused="Decode host KV buffering requires host_pool retraction"),
    Case("sglang.pd.host_receive", "0.5.21", "--disaggregation-decode-retraction-backup cpu_tensor"),  # 0: off then
    Case("sglang.pd.encoder", "0.5.8", "--enable-prefix-mm-cache",
         refused="--enable-prefix-mm-cache requires --encoder-only to be enabled"),
    Case("sglang.pd.encoder", "0.5.23", f"--encoder-only {PREFILL}",
         refused="Cannot set --encoder-only and --disaggregation-mode prefill/decode together"),
    Case("sglang.pd.encoder", "0.5.8", "--language-only",
         refused="requires at least one encoder urls to be set via --encoder-urls"),
    Case("sglang.pd.encoder", "0.5.23", "--language-only",                          # Qwen3-8B is text only
         refused="Model type Qwen3ForCausalLM is not supported for encoder disaggregation. Supported architectures: "
                 "Qwen2VL, Qwen3VL, Qwen3.5, InternS2, Qwen2Audio, Qwen2.5Omni, Dots3-Note, Kimi, MiMoV2, GLM5Next, "
                 "MiniMax-M3, MuseSpark."),
    Case("sglang.pd.encoder", "0.5.23", "--encoder-urls http://e:8000"),
    Case("sglang.metrics.buckets", "0.5.23", "--generation-tokens-buckets exp 2",
         refused="Unsupported --generation-tokens-buckets rule type: 'exp'. Must be one of: 'tse', 'default', "
                 "'custom'", exception="AssertionError"),
]


def _id(c: Case) -> str:
    return f"{c.rule.removeprefix('sglang.')}-{c.version}-{c.words.replace(' ', '_')[:60]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.layout, case.model)
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("SGLang") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert r.message == case.refused, r.text("SGLang")
    assert (r.exception, r.release) == (case.exception, case.version)
    if case.source:
        assert r.source == case.source if not case.source.endswith(":") else r.source.startswith(case.source)


def test_every_rule_of_the_area_has_a_refused_and_an_accepted_case() -> None:
    mine = set(rules_spec.RULES)
    assert mine <= set(RULES)
    assert {c.rule for c in CASES if c.refused is not None} == mine
    assert {c.rule for c in CASES if c.refused is None} == mine


def test_the_eagle_family_with_a_draft_model_is_not_judged_where_a_gemma_draft_may_promote_it() -> None:
    """From 0.5.12 EAGLE / NEXTN with a Gemma 4 assistant draft is FROZEN_KV_MTP (its config decides): the
    EAGLE family's assert is said to be not judged, never guessed."""
    line = "--speculative-algorithm EAGLE --speculative-eagle-topk 4 --speculative-draft-model-path d"
    judged = judge("0.5.23", line)
    assert not [r for r in judged.refusals if r.rule == "sglang.spec.eagle_params"]
    assert any("FROZEN_KV_MTP" in n for n in judged.not_judged)
    judged = judge("0.5.8", line)
    assert [r.rule for r in judged.refusals] == ["sglang.spec.eagle_params"]


def test_lora_with_an_eagle_draft_is_not_judged_where_it_may_be_promoted() -> None:
    """0.5.19+ LoRA takes EAGLE but not FROZEN_KV_MTP, which a Gemma 4 draft makes of it: said, not guessed."""
    judged = judge("0.5.23", "--lora-paths a --speculative-algorithm EAGLE --speculative-draft-model-path d")
    assert not [r for r in judged.refusals if r.rule == "sglang.lora.speculative"]
    assert any("sglang.lora.speculative" in n and "FROZEN_KV_MTP" in n for n in judged.not_judged)


def test_rejection_sampling_reads_the_top_k_only_where_the_line_fixes_it() -> None:
    """Without --speculative-num-steps the release picks steps / top-k / draft tokens by architecture: the top-k
    check is said to be not judged (never guessed); the algorithm check is judged."""
    judged = judge("0.5.23", EAGLE3_RS)
    assert not judged.refusals
    assert any("sglang.spec.rejection_sampling" in n and "speculative_eagle_topk" in n for n in judged.not_judged)


def test_encoder_disaggregation_takes_the_model_types_it_lists(tmp_path: Path) -> None:
    """A Qwen2.5-VL encoder server with the prefix multimodal cache: accepted by 0.5.10 and 0.5.23; a text-only
    Qwen3 as the language server is refused by both, in each release's words."""
    folder = tmp_path / "qwen2.5-vl"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl", "hidden_size": 3584,
        "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "intermediate_size": 18944,
        "vocab_size": 152064, "max_position_embeddings": 128000, "torch_dtype": "bfloat16"}))
    for version in ("0.5.10", "0.5.23"):
        judged = judge(version, "--encoder-only --enable-prefix-mm-cache", model=str(folder))
        assert not [r for r in judged.refusals if r.rule == "sglang.pd.encoder"], judged.refusals
    refused = [r for r in judge("0.5.10", "--language-only --encoder-urls http://e:8000").refusals
               if r.rule == "sglang.pd.encoder"]
    assert [r.message for r in refused] == ["Model type Qwen3ForCausalLM is not supported for encoder "
                                            "disaggregation, only Qwen models are supported for now."]


def test_an_adaptive_line_leaves_the_steps_assert_not_judged() -> None:
    """``--speculative-adaptive`` may be turned off by the release first (``_maybe_disable_adaptive``)."""
    judged = judge("0.5.23", "--speculative-algorithm EAGLE --speculative-eagle-topk 4 --speculative-adaptive")
    assert not judged.refusals
    assert any("sglang.spec.eagle_params" in n and "speculative_adaptive" in n for n in judged.not_judged)


@pytest.mark.parametrize("version", ["0.4.6", "0.4.10.post2", "0.5.2", "0.5.8", "0.5.12", "0.5.16", "0.5.23"])
def test_the_documented_lines_pass_and_leave_nothing_unsaid(version: str) -> None:
    """SGLang's documented EAGLE and LoRA lines: refused by none of these rules, nothing left unjudged."""
    lines = ["--speculative-algorithm EAGLE --speculative-draft-model-path d --speculative-num-steps 3 "
             "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16",
             "--lora-paths lora0=/adapters/a lora1=/adapters/b --max-loras-per-batch 2 --disable-radix-cache"]
    if version == "0.4.6":  # LoRA needs CUDA graphs off too there
        lines[1] += " --disable-cuda-graph"
    for words in lines:
        judged = judge(version, words)
        assert not [r for r in judged.refusals if r.rule.startswith(MINE)], (words, judged.refusals)
        assert not [n for n in judged.not_judged if "sglang.spec" in n or "sglang.lora" in n], judged.not_judged
