"""SGLang's refusals of an attention backend for the GPU, the KV cache dtype or the model
(``engines/sglang/rules_model.py``), each in the release's words at its line, beside the same line accepted
(another GPU, another backend, or a release without the check). The line is parsed by the release's own parser
(``engines/sglang/cli.py resolve``), so a flag the release does not have is its parser's refusal, not a rule's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_model
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.machine.capability import Capability
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec, Quantization
from pytest_gpulayout.refusals import Judged, Layout, load_ledger

A100, H100, B200, RTX5090 = (8, 0), (9, 0), (10, 0), (12, 0)
GPU_NAMES = {A100: "NVIDIA A100-SXM4-80GB", H100: "NVIDIA H100 80GB HBM3", B200: "NVIDIA B200",
             RTX5090: "NVIDIA GeForce RTX 5090"}
DEEPSEEK = "deepseek-ai/DeepSeek-V3"          # DeepseekV3ForCausalLM: MLA
QWEN = "Qwen/Qwen3-8B"                        # Qwen3ForCausalLM: MHA
V4 = "DeepseekV4ForCausalLM"
EXAONE = "Exaone4ForCausalLM+swp=LLLG"
HYBRID = str(Path(__file__).resolve().parent.parent / "data" / "models" / "qwen3-next-80b-a3b-instruct")


def on(cc: Capability | None, tp: int = 8) -> Layout:
    return Layout(tp, 1, 1, cc, GPU_NAMES.get(cc, "") if cc else "", 81559)


def model(name: str) -> ModelSpec:
    """A catalog model, or one of the families below as the model-specific branches see it: they read the
    architecture only (``hf_config.architectures[0]``), so the shape is Qwen3-8B's."""
    if "/" in name:                               # a catalog id or a local model folder
        return load_model(name)
    arch, _, extra = name.partition("+")          # "GptOssForCausalLM+mxfp4": its checkpoint's MXFP4 experts
    spec = replace(load_model(QWEN), architectures=(arch,))
    if extra == "mxfp4":
        return replace(spec, quantization=Quantization("mxfp4", 4.25, group_size=32, targets="experts"))
    if extra.startswith("swp="):                  # "Exaone4ForCausalLM+swp=LLLG": config.json sliding_window_pattern
        pattern = extra.removeprefix("swp=")
        return replace(spec, config_json=json.dumps({"sliding_window_pattern": None if pattern == "null" else pattern}))
    return spec


def judge(version: str, words: str, name: str, cc: Capability | None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, model(name), on(cc), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str
    gpu: Capability | None
    refused: str | None = None          # the release's words; None: accepted
    source: str | None = None           # file:line in that release
    exception: str = "ValueError"


CASES = [
    # -- the GPU a backend runs on
    Case("sglang.attention.gpu_arch", "0.5.23", "--attention-backend trtllm_mla", DEEPSEEK, H100,
         "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend.",
         "sglang/srt/arg_groups/overrides.py:1211"),
    Case("sglang.attention.gpu_arch", "0.5.23", "--attention-backend trtllm_mla", DEEPSEEK, B200),
    Case("sglang.attention.gpu_arch", "0.5.23", "--attention-backend trtllm_mla", DEEPSEEK, RTX5090),
    Case("sglang.attention.gpu_arch", "0.5.8", "--attention-backend trtllm_mla", DEEPSEEK, H100,
         "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.",
         "sglang/srt/server_args.py:1741"),
    Case("sglang.attention.gpu_arch", "0.5.8", "--decode-attention-backend trtllm_mla", DEEPSEEK, A100,
         "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100)."),
    Case("sglang.attention.gpu_arch", "0.5.3", "--attention-backend trtllm_mla", DEEPSEEK, RTX5090,  # SM100 only
         "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100).", "sglang/srt/server_args.py:899"),
    Case("sglang.attention.gpu_arch", "0.4.10.post2", "--attention-backend trtllm_mla", DEEPSEEK, H100,
         "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100).", "sglang/srt/server_args.py:430"),
    Case("sglang.attention.gpu_arch", "0.4.10.post2", "--attention-backend trtllm_mla", DEEPSEEK, B200),
    # TRT-LLM MHA: SM100 only to 0.5.9; from 0.5.10 decode also on SM90 / SM120, prefill from 0.5.19 too
    Case("sglang.attention.gpu_arch", "0.5.8", "--attention-backend trtllm_mha", QWEN, H100,
         "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100).", "sglang/srt/server_args.py:1762"),
    Case("sglang.attention.gpu_arch", "0.5.14", "--attention-backend trtllm_mha", QWEN, H100,
         "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100)."),
    Case("sglang.attention.gpu_arch", "0.5.14", "--prefill-attention-backend fa3 --decode-attention-backend "
         "trtllm_mha", QWEN, H100),
    Case("sglang.attention.gpu_arch", "0.5.23", "--attention-backend trtllm_mha", QWEN, H100),
    Case("sglang.attention.gpu_arch", "0.5.23", "--attention-backend trtllm_mha", QWEN, A100,
         "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs.",
         "sglang/srt/arg_groups/attention_hook.py:203"),
    Case("sglang.attention.gpu_arch", "0.5.23", "--decode-attention-backend trtllm_mha", QWEN, A100,
         "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100) and (SM120) GPUs."),
    Case("sglang.attention.gpu_arch", "0.5.14", "--attention-backend tokenspeed_mla --kv-cache-dtype fp8_e4m3",
         DEEPSEEK, H100, "tokenspeed_mla backend is only supported on Blackwell GPUs (SM100/SM12x)."),
    Case("sglang.attention.gpu_arch", "0.5.13", "--decode-attention-backend cutedsl_mla", DEEPSEEK, RTX5090,
         "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100)."),
    Case("sglang.attention.gpu_arch", "0.5.13", "--decode-attention-backend cutedsl_mla", DEEPSEEK, B200),
    # -- the KV cache dtype an MLA backend takes
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.23", "--attention-backend trtllm_mla --kv-cache-dtype "
         "fp8_e5m2", DEEPSEEK, B200,
         "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.",
         "sglang/srt/arg_groups/overrides.py:1215"),
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.23", "--attention-backend trtllm_mla --kv-cache-dtype "
         "fp8_e4m3", DEEPSEEK, B200),
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.8", "--attention-backend trtllm_mla --kv-cache-dtype "
         "fp8_e5m2", DEEPSEEK, B200,
         "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, fp4_e2m1, bf16, or auto.",
         "sglang/srt/server_args.py:1752"),
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.3", "--attention-backend trtllm_mla --kv-cache-dtype "
         "fp8_e5m2", DEEPSEEK, B200,
         "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3 or auto.",
         "sglang/srt/server_args.py:910"),
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.14", "--attention-backend tokenspeed_mla", DEEPSEEK, B200,
         "tokenspeed_mla backend requires kv-cache-dtype=fp8_e4m3, got auto."),
    Case("sglang.attention.mla_kv_cache_dtype", "0.5.14", "--attention-backend tokenspeed_mla --kv-cache-dtype "
         "fp8_e4m3", DEEPSEEK, B200),
    # -- a backend for one phase only
    Case("sglang.attention.phase_only", "0.5.4", "--attention-backend fa4", QWEN, B200,
         "FA4 backend is only supported for prefill. Please use `--prefill-attention-backend fa4` instead.",
         "sglang/srt/server_args.py:1144"),
    Case("sglang.attention.phase_only", "0.5.4", "--prefill-attention-backend fa4", QWEN, B200),
    Case("sglang.attention.phase_only", "0.5.8", "--attention-backend fa4", QWEN, B200),   # check removed
    Case("sglang.attention.phase_only", "0.5.13", "--prefill-attention-backend cutedsl_mla", DEEPSEEK, B200,
         "CuteDSL MLA only supports decoding for now", exception="AssertionError"),
    Case("sglang.attention.phase_only", "0.5.14", "--attention-backend intel_xpu", DEEPSEEK, H100,
         "intel_xpu backend is only supported on decode for MLA models", "sglang/srt/server_args.py:4689"),
    Case("sglang.attention.phase_only", "0.5.19", "--prefill-attention-backend intel_xpu", DEEPSEEK, H100,
         "intel_xpu backend is only supported on decode for MLA models"),
    Case("sglang.attention.phase_only", "0.5.14", "--attention-backend intel_xpu", QWEN, H100),   # MHA
    Case("sglang.attention.phase_only", "0.5.14", "--decode-attention-backend intel_xpu", DEEPSEEK, H100),
    # -- GPT-OSS: the release's list
    Case("sglang.gpt_oss.attention_backend", "0.5.23", "--attention-backend flashinfer", "GptOssForCausalLM", H100,
         "GptOssForCausalLM requires one of ['triton', 'trtllm_mha', 'fa3', 'fa4', 'ascend', 'intel_amx', "
         "'intel_xpu', 'aiter'] attention backend, but got the following backends\n- Prefill: flashinfer\n"
         "- Decode: flashinfer\n", "sglang/srt/arg_groups/model_hook.py:536", "AssertionError"),
    Case("sglang.gpt_oss.attention_backend", "0.5.23", "--attention-backend fa3", "GptOssForCausalLM", H100),
    Case("sglang.gpt_oss.attention_backend", "0.5.23", "", "GptOssForCausalLM", A100),   # the release picks triton
    Case("sglang.gpt_oss.attention_backend", "0.5.3", "--attention-backend fa4", "GptOssForCausalLM", B200,
         "GptOssForCausalLM requires one of ['triton', 'trtllm_mha', 'fa3'] attention backend, but got 'fa4'",
         "sglang/srt/server_args.py:746", "AssertionError"),
    Case("sglang.gpt_oss.attention_backend", "0.5.3.post1", "--attention-backend fa4", "GptOssForCausalLM", B200),
    Case("sglang.gpt_oss.attention_backend", "0.5.23", "--attention-backend fa3 --decode-attention-backend "
         "flashinfer", "GptOssForCausalLM", H100, "- Prefill: fa3\n- Decode: flashinfer\n",
         exception="AssertionError"),
    Case("sglang.gpt_oss.attention_backend", "0.5.23", "--attention-backend flashinfer", QWEN, H100),  # not GPT-OSS
    # -- Gemma 4: fa4 listed from 0.5.22
    Case("sglang.gemma4.attention_backend", "0.5.21", "--attention-backend fa4", "Gemma4ForCausalLM", B200,
         "Gemma4 only supports trtllm_mha, triton, ascend, intel_xpu, intel_amx, or aiter attention backend, got "
         "prefill=fa4, decode=fa4", exception="AssertionError"),
    Case("sglang.gemma4.attention_backend", "0.5.22", "--attention-backend fa4", "Gemma4ForCausalLM", B200),
    Case("sglang.gemma4.attention_backend", "0.5.13", "--attention-backend flashinfer", "Gemma4ForCausalLM", H100,
         "Gemma4 only supports trtllm_mha, triton, or intel_xpu attention backend, got prefill=flashinfer, "
         "decode=flashinfer", exception="AssertionError"),
    Case("sglang.gemma4.attention_backend", "0.5.13", "", "Gemma4ForCausalLM", H100),
    # -- the hybrid models whose first layer may not be attention
    Case("sglang.lfm2.no_triton", "0.5.23", "--attention-backend triton", "Lfm2ForCausalLM", H100,
         "Lfm2ForCausalLM does not support triton attention backend, as the first layer might not be an attention "
         "layer", "sglang/srt/arg_groups/model_hook.py:719", "AssertionError"),
    Case("sglang.lfm2.no_triton", "0.5.23", "--attention-backend flashinfer", "Lfm2ForCausalLM", H100),
    Case("sglang.lfm2.no_triton", "0.5.23", "", "Lfm2ForCausalLM", A100),
    Case("sglang.lfm2.no_triton", "0.5.16", "--attention-backend triton", "Lfm2MoeForCausalLM", H100),  # Lfm2 only
    Case("sglang.lfm2.no_triton", "0.5.17", "--attention-backend triton", "Lfm2MoeForCausalLM", H100,
         "Lfm2MoeForCausalLM does not support triton attention backend", exception="AssertionError"),
    Case("sglang.nemotron_h.no_triton", "0.5.9", "--attention-backend triton", "NemotronHForCausalLM", H100,
         "NemotronHForCausalLM does not support triton attention backend,as the first layer might not be an "
         "attention layer", exception="AssertionError"),
    Case("sglang.nemotron_h.no_triton", "0.5.13", "--attention-backend triton", "NemotronHForCausalLM", H100,
         "NemotronHForCausalLM does not support triton attention backend",
         "sglang/srt/arg_groups/nemotron_h_hook.py:63", "AssertionError"),
    Case("sglang.nemotron_h.no_triton", "0.5.13", "--attention-backend triton", "NemotronHPuzzleForCausalLM", H100,
         "NemotronHForCausalLM does not support triton attention backend", exception="AssertionError"),
    Case("sglang.nemotron_h.no_triton", "0.5.12", "--attention-backend triton", "NemotronHPuzzleForCausalLM", H100),
    Case("sglang.nemotron_h.no_triton", "0.5.9", "--attention-backend flashinfer", "NemotronHForCausalLM", H100),
    # -- GPT-OSS: triton_kernel MoE runs without expert parallelism only
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.23", "--moe-runner-backend triton_kernel --ep-size 8",
         "GptOssForCausalLM", H100, "Triton kernel MoE is only supported when ep_size == 1",
         "sglang/srt/arg_groups/model_hook.py:569", "AssertionError"),
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.23", "--moe-runner-backend triton_kernel", "GptOssForCausalLM", H100),
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.23", "--ep-size 8", "GptOssForCausalLM", H100),   # auto: not picked
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.8", "--moe-runner-backend triton_kernel --ep-size 8",
         "GptOssForCausalLM", H100, "Triton kernel MoE is only supported when ep_size == 1",
         exception="AssertionError"),
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.3", "--moe-runner-backend triton_kernel --ep-size 8",
         "GptOssForCausalLM+mxfp4", H100, "Triton kernel MoE is only supported when ep_size == 1",
         exception="AssertionError"),
    # on SM100 an MXFP4 checkpoint takes the FlashInfer branch before 0.5.5: the assert is not reached
    Case("sglang.gpt_oss.triton_kernel_ep", "0.5.3", "--moe-runner-backend triton_kernel --ep-size 8",
         "GptOssForCausalLM+mxfp4", B200),
    # -- DeepSeek-V4: its KV cache dtypes and the trtllm backend
    Case("sglang.deepseek_v4.kv_cache_dtype", "0.5.13", "--kv-cache-dtype bfloat16", V4, H100,
         "bfloat16 is not supported for DeepseekV4ForCausalLM", exception="AssertionError"),
    Case("sglang.deepseek_v4.kv_cache_dtype", "0.5.14", "--kv-cache-dtype bfloat16", V4, H100),
    Case("sglang.deepseek_v4.kv_cache_dtype", "0.5.13", "", V4, H100),               # auto: fp8_e4m3
    Case("sglang.deepseek_v4.kv_cache_dtype", "0.5.23", "--kv-cache-dtype fp8_e5m2", V4, B200,
         "fp8_e5m2 is not supported for DeepseekV4ForCausalLM", "sglang/srt/arg_groups/overrides.py:907",
         "AssertionError"),
    Case("sglang.deepseek_v4.kv_cache_dtype", "0.5.23", "--kv-cache-dtype fp8_e5m2", QWEN, B200),  # V4's only
    Case("sglang.deepseek_v4.trtllm", "0.5.23", "--dsv4-attn-backend trtllm", V4, H100,
         "--dsv4-attn-backend trtllm requires an SM100/SM103 (Blackwell) GPU.",
         "sglang/srt/arg_groups/deepseek_v4_hook.py:104", "AssertionError"),
    Case("sglang.deepseek_v4.trtllm", "0.5.23", "--dsv4-attn-backend trtllm", V4, B200),
    Case("sglang.deepseek_v4.trtllm", "0.5.20", "--dsv4-attn-backend trtllm --kv-cache-dtype bfloat16", V4, B200,
         "--dsv4-attn-backend trtllm requires kv_cache_dtype=fp8_e4m3, got bfloat16.", exception="AssertionError"),
    Case("sglang.deepseek_v4.trtllm", "0.5.23", "--dsv4-attn-backend trtllm --chunked-prefill-size -1", V4, B200,
         "--dsv4-attn-backend trtllm requires chunked prefill (--chunked-prefill-size > 0).",
         exception="AssertionError"),
    Case("sglang.deepseek_v4.trtllm", "0.5.23", "--dsv4-attn-backend trtllm --chunked-prefill-size 8192", V4, B200),
    Case("sglang.deepseek_v4.trtllm", "0.5.22", "--dsv4-attn-backend trtllm --attn-cp-size 2", V4, B200,
         "--dsv4-attn-backend trtllm does not support context parallelism", exception="AssertionError"),
    # -- Mamba extra_buffer: refused by the model's branch in 0.5.7 - 0.5.8.post1
    Case("sglang.mamba.extra_buffer", "0.5.8", "--mamba-scheduler-strategy extra_buffer", "NemotronHForCausalLM",
         H100, "mamba extra_buffer is not supported for NemotronHForCausalLM model", exception="AssertionError"),
    Case("sglang.mamba.extra_buffer", "0.5.7", "--mamba-scheduler-strategy extra_buffer", "FalconH1ForCausalLM",
         H100, "mamba extra_buffer is not supported for FalconH1ForCausalLM model", exception="AssertionError"),
    Case("sglang.mamba.extra_buffer", "0.5.8", "--mamba-scheduler-strategy no_buffer", "NemotronHForCausalLM", H100),
    Case("sglang.mamba.extra_buffer", "0.5.9", "--mamba-scheduler-strategy extra_buffer", "NemotronHForCausalLM",
         H100),
    # -- linear attention's decode backend (read for every model)
    Case("sglang.linear_attn.decode_backend", "0.5.23", "--linear-attn-decode-backend flashinfer", HYBRID, B200,
         "--linear-attn-decode-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got None",
         "sglang/srt/arg_groups/attention_hook.py:341"),
    Case("sglang.linear_attn.decode_backend", "0.5.23", "--linear-attn-decode-backend flashinfer --mamba-ssm-dtype "
         "bfloat16", HYBRID, B200),
    Case("sglang.linear_attn.decode_backend", "0.5.23", "--linear-attn-decode-backend flashinfer", HYBRID, H100),
    Case("sglang.linear_attn.decode_backend", "0.5.10", "--linear-attn-backend flashinfer --mamba-ssm-dtype float32",
         HYBRID, B200, "--linear-attn-decode-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got "
         "'float32'"),
    Case("sglang.linear_attn.decode_backend", "0.5.15", "--linear-attn-decode-backend flashkda", HYBRID, H100,
         "--linear-attn-decode-backend flashkda is not supported: FlashKDA is prefill-only."),
    Case("sglang.linear_attn.decode_backend", "0.5.15", "--linear-attn-prefill-backend flashkda", HYBRID, H100),
    # -- EXAONE 4 with sliding-window layers: none given is refused until the override picks one (0.5.22)
    Case("sglang.exaone4.attention_backend", "0.5.21", "", EXAONE, H100,
         "One of the attention backends in ['fa3', 'triton', 'trtllm_mha'] is required for Exaone4ForCausalLM, but "
         "got None", exception="AssertionError"),
    Case("sglang.exaone4.attention_backend", "0.5.9", "", EXAONE, H100,
         "is required for Exaone4ForCausalLM, but got None", "sglang/srt/server_args.py:1496", "AssertionError"),
    Case("sglang.exaone4.attention_backend", "0.5.21", "--attention-backend fa3", EXAONE, H100),
    Case("sglang.exaone4.attention_backend", "0.5.22", "", EXAONE, H100),
    Case("sglang.exaone4.attention_backend", "0.5.22", "", EXAONE, B200),
    Case("sglang.exaone4.attention_backend", "0.5.23", "--attention-backend flashinfer", EXAONE, H100,
         "is required for Exaone4ForCausalLM, but got flashinfer", "sglang/srt/arg_groups/model_hook.py:679",
         "AssertionError"),
    Case("sglang.exaone4.attention_backend", "0.5.21", "", "Exaone4ForCausalLM+swp=null", H100),  # no sliding window
    # -- FlashInfer MoE runners' quantization and EP size (0.4.8 - 0.5.2)
    Case("sglang.moe_runner.flashinfer", "0.5.2", "--moe-runner-backend flashinfer_cutlass", DEEPSEEK, B200,
         "modelopt_fp4 quantization is required for Flashinfer MOE", "sglang/srt/server_args.py:653",
         "AssertionError"),
    Case("sglang.moe_runner.flashinfer", "0.5.2", "--moe-runner-backend flashinfer_cutlass --quantization "
         "modelopt_fp4", DEEPSEEK, B200),
    Case("sglang.moe_runner.flashinfer", "0.5.2", "--moe-runner-backend flashinfer_cutlass --quantization "
         "modelopt_fp4 --ep-size 2", DEEPSEEK, B200,
         "The expert parallel size must be 1 or the same as the tensor parallel size", exception="AssertionError"),
    Case("sglang.moe_runner.flashinfer", "0.5.2", "--enable-flashinfer-trtllm-moe --quantization fp8", DEEPSEEK, B200),
    Case("sglang.moe_runner.flashinfer", "0.5.2", "--enable-flashinfer-trtllm-moe", DEEPSEEK, B200,
         "modelopt_fp4 quantization is required for Flashinfer TRTLLM MoE", exception="AssertionError"),
    Case("sglang.moe_runner.flashinfer", "0.4.9.post3", "--enable-flashinfer-moe", DEEPSEEK, B200,
         "modelopt_fp4 quantization is required for Flashinfer MOE", exception="AssertionError"),
    Case("sglang.moe_runner.flashinfer", "0.4.10", "--enable-flashinfer-trtllm-moe", DEEPSEEK, B200,
         "EP MoE is required for Flashinfer TRTLLM MOE", exception="AssertionError"),
    Case("sglang.moe_runner.flashinfer", "0.4.10", "--enable-flashinfer-trtllm-moe --enable-ep-moe", DEEPSEEK, B200),
    # -- Moss-VL: flashinfer prefill only (0.5.11 - 0.5.14)
    Case("sglang.moss_vl.prefill_backend", "0.5.12", "--attention-backend fa3", "MossVLForConditionalGeneration",
         H100, "MossVLForConditionalGeneration requires flashinfer prefill attention backend for cross-attention "
         "custom mask support.", "sglang/srt/server_args.py:2235", "AssertionError"),
    Case("sglang.moss_vl.prefill_backend", "0.5.12", "", "MossVLForConditionalGeneration", H100),
    Case("sglang.moss_vl.prefill_backend", "0.5.14", "--decode-attention-backend fa3", "MossVLForConditionalGeneration",
         H100, "requires flashinfer prefill attention backend", exception="AssertionError"),
    Case("sglang.moss_vl.prefill_backend", "0.5.14",
         "--prefill-attention-backend flashinfer --decode-attention-backend fa3", "MossVLForConditionalGeneration",
         H100),
    # -- DeepEP's auto mode and attention DP (0.4.6 - 0.4.8.post1)
    Case("sglang.deepep.auto_with_dp_attention", "0.4.6", "--enable-deepep-moe --enable-dp-attention --dp-size 8",
         DEEPSEEK, H100, "DeepEP MoE `auto` mode is not supported with DP Attention.",
         "sglang/srt/server_args.py:305", "AssertionError"),
    Case("sglang.deepep.auto_with_dp_attention", "0.4.6", "--enable-deepep-moe --deepep-mode normal "
         "--enable-dp-attention --dp-size 8", DEEPSEEK, H100),
    Case("sglang.deepep.auto_with_dp_attention", "0.4.9", "--enable-deepep-moe --enable-dp-attention --dp-size 8",
         DEEPSEEK, H100),
    # -- LMCache (0.5.21+)
    Case("sglang.lmcache.incompatible", "0.5.23", "--enable-lmcache --enable-hierarchical-cache", QWEN, H100,
         "--enable-lmcache and --enable-hierarchical-cache are mutually exclusive",
         "sglang/srt/arg_groups/kv_cache_hook.py:435"),
    Case("sglang.lmcache.incompatible", "0.5.23", "--enable-lmcache --disable-radix-cache", QWEN, H100,
         "--enable-lmcache requires radix cache to be enabled"),
    Case("sglang.lmcache.incompatible", "0.5.21", "--enable-lmcache --enable-dp-attention --dp-size 8", DEEPSEEK,
         H100, "LMCacheUnifiedRadixCache does not yet support DP attention", exception="NotImplementedError"),
    Case("sglang.lmcache.incompatible", "0.5.23", "--enable-lmcache --attn-dp-size 8", DEEPSEEK, H100,
         "LMCacheUnifiedRadixCache does not yet support DP attention", exception="NotImplementedError"),
    Case("sglang.lmcache.incompatible", "0.5.23", "--enable-lmcache --disaggregation-mode prefill", QWEN, H100,
         "LMCacheUnifiedRadixCache currently supports colocated prefill/decode scheduling only",
         exception="NotImplementedError"),
    Case("sglang.lmcache.incompatible", "0.5.23", "--enable-hierarchical-cache --disable-radix-cache", QWEN, H100),
    Case("sglang.lmcache.incompatible", "0.5.20", "--enable-lmcache --enable-hierarchical-cache", QWEN, H100),
    # -- check_server_args: the served name and flag values
    Case("sglang.served_model_name.colon", "0.5.23", "--served-model-name qwen:8b", QWEN, H100,
         "served_model_name cannot contain a colon (':') character. The colon is reserved for the 'model:adapter' "
         "syntax used in LoRA adapter specification. Invalid value: 'qwen:8b'",
         "sglang/srt/arg_groups/validation_hook.py:215", "AssertionError"),
    Case("sglang.served_model_name.colon", "0.5.23", "--served-model-name qwen-8b", QWEN, H100),
    Case("sglang.served_model_name.colon", "0.5.9", "--served-model-name qwen:8b", QWEN, H100,
         "served_model_name cannot contain a colon", exception="AssertionError"),
    Case("sglang.served_model_name.colon", "0.5.5", "--served-model-name qwen:8b", QWEN, H100),   # no check yet
    Case("sglang.check.flag_values", "0.5.23", "--gc-threshold 1 2 3 4", QWEN, H100,
         "When setting gc_threshold, it must contain 1 to 3 integers.", "sglang/srt/arg_groups/validation_hook.py:370"),
    Case("sglang.check.flag_values", "0.5.23", "--gc-threshold 700 10 10", QWEN, H100),
    Case("sglang.check.flag_values", "0.5.10", "--gc-threshold 1 2 3 4", QWEN, H100,
         "When setting gc_threshold, it must contain 1 to 3 integers."),
    Case("sglang.check.flag_values", "0.5.23", "--pp-max-micro-batch-size 0", QWEN, H100,
         "pp_max_micro_batch_size must be a positive integer or None (for auto-compute). Got: 0",
         exception="AssertionError"),
    Case("sglang.check.flag_values", "0.5.14", "--disable-cuda-graph-padding --enable-torch-compile", QWEN, H100,
         "--disable-cuda-graph-padding is incompatible with --enable-torch-compile.", exception="AssertionError"),
    Case("sglang.check.flag_values", "0.5.11", "--disable-cuda-graph-padding --enable-torch-compile", QWEN, H100),
    Case("sglang.check.flag_values", "0.5.13", "--kv-canary-sweep-interval 5", QWEN, H100,
         "--kv-canary-sweep-interval requires --kv-canary in {log, raise}"),
    Case("sglang.check.flag_values", "0.5.13", "--kv-canary-sweep-interval 5 --kv-canary log", QWEN, H100),
    Case("sglang.check.flag_values", "0.5.8", "--export-metrics-to-file", QWEN, H100,
         "--export-metrics-to-file-dir is required when --export-metrics-to-file is enabled"),
    Case("sglang.check.flag_values", "0.5.8", "--export-metrics-to-file --export-metrics-to-file-dir /tmp/m", QWEN,
         H100),
]


def _id(c: Case) -> str:
    return (f"{c.rule.removeprefix('sglang.')}-{c.version}-{c.words.replace(' ', '') or 'defaults'}-"
            f"{c.model.rsplit('/', 1)[-1]}-sm{c.gpu[0] if c.gpu else '?'}-{'refused' if c.refused else 'passes'}")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.gpu)
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("SGLang") for r in mine]
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]          # SGLang raises the first; the next follows once it is fixed
    assert case.refused in r.message, r.message
    assert (r.exception, r.release) == (case.exception, case.version)
    if case.source:
        assert r.source == case.source


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    pp = [Case("sglang.spec.pipeline_parallel", v, w, QWEN, H100, r) for v, w, r in PP_CASES]
    for rule in rules_model.RULES:
        refused = {c.version for c in CASES + pp if c.rule == rule and c.refused}
        accepted = [c for c in CASES + pp if c.rule == rule and not c.refused]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2, rule


def test_the_release_defaults_refuse_nothing_on_any_gpu() -> None:
    """No backend on the line: the release picks one its own checks take (trtllm_* only on SM100)."""
    for version in ("0.4.10.post2", "0.5.3", "0.5.8", "0.5.14", "0.5.18", "0.5.23"):
        for name in (DEEPSEEK, QWEN, V4, "GptOssForCausalLM", "Gemma4ForCausalLM", "Lfm2ForCausalLM",
                     "NemotronHForCausalLM"):
            for cc in (A100, H100, B200, RTX5090):
                judged = judge(version, "", name, cc)
                # DeepSeek V4 sets its own attention CP size, which the parallel rules name as not resolved
                unresolved = tuple(n for n in judged.not_judged if not (name == V4 and "context-parallel size" in n))
                assert (judged.refusals, unresolved) == ((), ()), (version, name, cc, judged)


def test_an_unknown_gpu_leaves_the_gpu_checks_unjudged_and_says_so() -> None:
    judged = judge("0.5.23", "--attention-backend trtllm_mla", DEEPSEEK, None)
    assert not judged.refusals
    assert any("sglang.attention.gpu_arch" in n and "is_blackwell" in n for n in judged.not_judged), judged


def test_a_kv_dtype_against_the_backend_sglang_picks_on_blackwell_is_not_judged() -> None:
    """On a B200 DeepSeek-V3 gets trtllm_mla when no backend is given (0.5.8 ``server_args.py:1201-1210``): a
    --kv-cache-dtype it may not take is said, not passed."""
    judged = judge("0.5.8", "--kv-cache-dtype fp8_e5m2", DEEPSEEK, B200)
    assert not judged.refusals
    assert any("--kv-cache-dtype fp8_e5m2" in n for n in judged.not_judged), judged
    hopper = judge("0.5.8", "--kv-cache-dtype fp8_e5m2", DEEPSEEK, H100)     # no MLA backend picked there
    assert (hopper.refusals, hopper.not_judged) == ((), ())
    mha = judge("0.5.8", "--kv-cache-dtype fp8_e5m2", QWEN, B200)            # nor for an MHA model
    assert (mha.refusals, mha.not_judged) == ((), ())
    fp8 = judge("0.5.8", "--kv-cache-dtype fp8_e4m3", DEEPSEEK, B200)        # a dtype every MLA list takes
    assert (fp8.refusals, fp8.not_judged) == ((), ())


def test_a_split_flag_alone_leaves_the_model_lists_unjudged_and_says_so() -> None:
    judged = judge("0.5.23", "--decode-attention-backend fa3", "GptOssForCausalLM", H100)
    assert not [r for r in judged.refusals if r.rule == "sglang.gpt_oss.attention_backend"]
    assert any("leaves unset is not resolved" in n for n in judged.not_judged), judged


def test_a_sliding_window_pattern_the_config_does_not_write_is_not_claimed() -> None:
    judged = judge("0.5.21", "", "Exaone4ForCausalLM", H100)
    assert not judged.refusals
    assert any("sglang.exaone4.attention_backend" in n and "sliding_window_pattern" in n
               for n in judged.not_judged), judged


def test_models_that_set_their_own_backends_are_not_claimed() -> None:
    """Kimi-K3 with DCP rewrites the line's backends (0.5.19 ``model_overrides/kimi_k3.py:78-105``)."""
    judged = judge("0.5.23", "--attention-backend trtllm_mla", "KimiK3ForConditionalGeneration", H100)
    assert not judged.refusals
    assert any("KimiK3ForConditionalGeneration" in n for n in judged.not_judged), judged


def test_the_backend_lists_are_the_ledgers_releases() -> None:
    """Every listed release whose GPT-OSS / Gemma 4 entry is in force has its list in the table."""
    ledger = load_ledger("sglang")
    for rule, table in (("sglang.gpt_oss.attention_backend", rules_model.GPT_OSS_BACKENDS),
                        ("sglang.gemma4.attention_backend", rules_model.GEMMA4_BACKENDS)):
        releases = [r for r in ledger.releases if ledger.held(rule, r)]
        assert releases and min(releases) >= table[0][0], rule


def test_gpulayout_check_fails_trtllm_mha_on_ampere(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the front door, in the release's words: TRT-LLM MHA on A100s is refused, on H100s it passes the
    config check (SM90 runs it from 0.5.10)."""
    from pytest_gpulayout.cli import main

    qwen = Path(__file__).resolve().parent.parent / "data" / "models" / "qwen3-14b"

    def check(machine: str) -> dict[str, object]:
        cmd = f"python -m sglang.launch_server --model-path {qwen} --tp 2 --attention-backend trtllm_mha"
        main(["check", "--cmd", cmd, "--machine", machine, "--json"])
        data = json.loads(capsys.readouterr().out)
        (dep,) = data["deployments"].values()
        return dict(dep["checks"]["config"])
    refused = check("preset:4xA100-80gb-sxm")
    assert refused["status"] == "fail"
    assert "TRTLLM MHA backend for prefill requires Hopper (SM90)" in str(refused["message"])
    assert check("preset:8xH100-sxm")["status"] == "pass"


@pytest.mark.parametrize("version", ["0.5.8", "0.5.14", "0.5.23"])
def test_eplb_reads_the_ep_size_under_either_destination(version: str) -> None:
    """``--ep-size 8`` is ``expert_parallel_size`` to 0.5.8's parser (``server_args.py:3756-3760``, copied to
    ``ep_size`` by ``from_cli_args``): EPLB with it is accepted, as without it it is refused."""
    with_ep = judge(version, "--enable-eplb --ep-size 8", DEEPSEEK, H100)
    assert not [r for r in with_ep.refusals if r.rule == "sglang.eplb.needs_ep"], with_ep
    without = judge(version, "--enable-eplb", DEEPSEEK, H100)
    assert [r.rule for r in without.refusals] == ["sglang.eplb.needs_ep"], without


PP_CASES = [
    # (release, the line, refused words or None)
    ("0.5.8", "--enable-mixed-chunk", "Pipeline parallelism is not compatible with overlap schedule, speculative "
                                      "decoding, mixed chunked prefill."),
    ("0.5.8", "", None),                                     # the release turns the overlap schedule off for PP
    ("0.5.11", "--enable-mixed-chunk", None),                # mixed chunk no longer refused with PP
    ("0.5.14", "--speculative-algorithm EAGLE", "Pipeline parallelism is not compatible with overlap schedule, "
                                                "speculative decoding"),
    ("0.5.19", "--speculative-algorithm EAGLE", "Pipeline parallelism is not compatible with overlap schedule"),
    ("0.5.19", "", None),
]


@pytest.mark.parametrize("case", PP_CASES, ids=[f"{c[0]}-{c[1] or 'defaults'}" for c in PP_CASES])
def test_pipeline_parallelism_with_speculative_decoding_or_mixed_chunk(case: tuple[str, str, str | None]) -> None:
    version, words, refused = case
    line = resolve(["--model-path", "m", "--pp-size", "2", *words.split()], Version(version))
    assert line.ok, line.errors
    judged = config_check(line, model(QWEN), Layout(4, 2, 1, H100, GPU_NAMES[H100], 81559), Version(version))
    mine = [r for r in judged.refusals if r.rule == "sglang.spec.pipeline_parallel"]
    if refused is None:
        assert not mine and not [n for n in judged.not_judged if "speculative_or_mixed_chunk" in n], judged
    else:
        assert mine and refused in mine[0].message and mine[0].exception == "AssertionError", judged
    single = config_check(line, model(QWEN), on(H100, tp=4), Version(version))    # the same line without PP
    assert not [r for r in single.refusals if r.rule == "sglang.spec.pipeline_parallel"]


