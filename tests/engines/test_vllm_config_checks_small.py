"""vLLM's small configs judged at config time (``engines/vllm/rules_small.py``): LoRA, structured outputs, the KV and
encoder-cache connectors, tracing, the profiler, the attention config and Engram. Each line is read by the
release's own parser (``engines/vllm/cli.resolve``) and judged by the rules over the ledger's entries, in the
release's words and at its line (read in the unpacked wheels: ``vllm/config.py`` before 0.10.1,
``vllm/config/lora.py``, ``structured_outputs.py``, ``kv_transfer.py``, ``ec_transfer.py``, ``observability.py``,
``profiler.py``, ``attention.py``, ``engram.py``, ``vllm/engine/arg_utils.py``). Each refusal has its accepted
neighbour: the same line without the conflict, or a release without the check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest
from packaging.version import Version
from vllm_line_cases import layout

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.vllm import rules_small
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import RULES, book, config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec, Quantization
from pytest_gpulayout.refusals import Judged, Layout

M = "Qwen/Qwen3-8B"   # the served model, positional (0.8.x requires it)


def model_of(name: str) -> ModelSpec:
    base = load_model(M)
    # the model's class is what LoRA reads: a class without SupportsLoRA in 0.33.0, an Inkling class
    return {"dense": base, "falcon": replace(base, architectures=("FalconForCausalLM",)),
            "inkling": replace(base, architectures=("InklingForCausalLM",)),
            "unknown": replace(base, architectures=("NoSuchForCausalLM",)),
            "vision": load_model("google/gemma-3-12b-it")}[name]


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    line: str
    refused: str | None = None       # the release's words (a part); None: the rule refuses nothing
    source: str | None = None        # file:line in that release
    model: str = "dense"
    env: Mapping[str, str] = field(default_factory=dict)
    exception: str = "ValueError"
    dp: int = 1


def _judge(case: Case, where: Layout | None = None) -> Judged:
    version = Version(case.version)
    args = resolve(f"{M} {case.line}".split(), version)
    assert args.ok, args.errors
    return config_check(args, model_of(case.model), where or layout(dp=case.dp), version, env=dict(case.env))


def case_id(c: Case) -> str:
    return f"{c.rule.removeprefix('vllm.')}-{c.version}-{'refused' if c.refused is not None else 'passes'}"


V0 = {"VLLM_USE_V1": "0"}
V1 = {"VLLM_USE_V1": "1"}
SEGMENTS = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}

CASES = [
    # LoRAConfig.__post_init__ (config.py:2321-2342 in 0.8.0, config/lora.py:103-119 in 0.11.0); from 0.11.1
    # --max-lora-rank is a parser choice and the extra vocabulary is gone; the max_cpu_loras check stays
    Case("vllm.lora.value_ranges", "0.8.0", "--enable-lora --max-lora-rank 7",
         refused="max_lora_rank (7) must be one of (8, 16, 32, 64, 128, 256, 320, 512).",
         source="vllm/config.py:2329"),
    Case("vllm.lora.value_ranges", "0.8.0", "--enable-lora --lora-extra-vocab-size 100",
         refused="lora_extra_vocab_size (100) must be one of (256, 512).", source="vllm/config.py:2333"),
    Case("vllm.lora.value_ranges", "0.10.1", "--enable-lora --max-loras 0", refused="max_loras (0) must be >= 1.",
         source="vllm/config/__init__.py:2457"),
    Case("vllm.lora.value_ranges", "0.11.0", "--enable-lora --max-loras 4 --max-cpu-loras 2",
         refused="max_cpu_loras (2) must be >= max_loras (4)", source="vllm/config/lora.py:119"),
    Case("vllm.lora.value_ranges", "0.33.0", "--enable-lora --max-loras 4 --max-cpu-loras 2",
         refused="max_cpu_loras (2) must be >= max_loras (4).", source="vllm/config/lora.py:124"),
    Case("vllm.lora.value_ranges", "0.33.0", "--enable-lora --max-loras 4 --max-cpu-loras 0"),  # 0: as max_loras
    Case("vllm.lora.value_ranges", "0.33.0", "--enable-lora --max-loras 4 --max-cpu-loras 8"),
    Case("vllm.lora.value_ranges", "0.11.0", "--max-lora-rank 7 --max-loras 4 --max-cpu-loras 2"),  # LoRA off
    Case("vllm.lora.value_ranges", "0.11.0", "--enable-lora --max-lora-rank 320"),
    # LoRAConfig.verify_with_cache_config: always before 0.8.3 (config.py:2345-2348 in 0.8.0), then V0 only
    Case("vllm.lora.cpu_offload", "0.8.0", "--enable-lora --cpu-offload-gb 2",
         refused="CPU offload is not supported with LoRA yet.", source="vllm/config.py:2348"),
    Case("vllm.lora.cpu_offload", "0.10.2", "--enable-lora --cpu-offload-gb 2", env=V0,
         refused="V0 LoRA does not support CPU offload, please use V1.", source="vllm/config/lora.py:125"),
    Case("vllm.lora.cpu_offload", "0.10.2", "--enable-lora --cpu-offload-gb 2", env=V1),
    Case("vllm.lora.cpu_offload", "0.8.0", "--enable-lora"),
    Case("vllm.lora.cpu_offload", "0.11.1", "--enable-lora --cpu-offload-gb 2", env=V0),   # the check is gone
    # LoRAConfig.verify_lora_support (config.py:2707-2709 in 0.8.5)
    Case("vllm.lora.long_lora_v1", "0.8.5", "--enable-lora --long-lora-scaling-factors 4.0", env=V1,
         refused="V1 LoRA does not support long LoRA, please use V0.", source="vllm/config.py:2709"),
    Case("vllm.lora.long_lora_v1", "0.8.5", "--enable-lora --long-lora-scaling-factors 4.0", env=V0),
    Case("vllm.lora.long_lora_v1", "0.8.3", "--enable-lora --long-lora-scaling-factors 4.0", env=V1),
    # LoRAConfig.verify_with_model_config / verify_with_kernel_config (config/lora.py:139-170 in 0.33.0)
    Case("vllm.lora.model_support", "0.33.0", "--enable-lora", model="falcon",
         refused="LoRA is not supported for FalconForCausalLM (Qwen/Qwen3-8B). Supported models implement the "
                 "`SupportsLoRA` interface.", source="vllm/config/lora.py:150"),
    Case("vllm.lora.model_support", "0.33.0", "--enable-lora"),
    Case("vllm.lora.model_support", "0.33.0", "--enable-lora --model-impl transformers", model="falcon"),
    Case("vllm.lora.model_support", "0.32.0", "--enable-lora", model="falcon"),
    Case("vllm.lora.mega_moe_backend", "0.33.0", "--enable-lora --moe-backend deep_gemm_mega_moe",
         refused="LoRA is not supported with moe_backend='deep_gemm_mega_moe'. Disable LoRA or select a MoE "
                 "backend that supports LoRA.", source="vllm/config/lora.py:142"),
    Case("vllm.lora.mega_moe_backend", "0.33.0", "--enable-lora --moe-backend triton"),
    Case("vllm.lora.mega_moe_backend", "0.33.0", "--moe-backend deep_gemm_mega_moe"),
    Case("vllm.lora.inkling_multimem_ar", "0.26.0", "--enable-lora", model="inkling",
         refused="Inkling LoRA requires INKLING_MULTIMEM_AR=0", source="vllm/config/lora.py:144"),
    Case("vllm.lora.inkling_multimem_ar", "0.33.0", "--enable-lora", model="inkling",
         env={"INKLING_MULTIMEM_AR": "0"}),
    Case("vllm.lora.inkling_multimem_ar", "0.25.0", "--enable-lora", model="inkling"),
    # EngineArgs.create_engine_config (engine/arg_utils.py:2712-2724 in 0.33.0, 1691-1703 in 0.11.1)
    Case("vllm.speculative.lora_batch", "0.33.0", '--enable-lora --max-num-seqs 512 --max-num-batched-tokens 2048 '
         '--speculative-config {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}',
         refused="Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens",
         source="vllm/engine/arg_utils.py:2721"),
    Case("vllm.speculative.lora_batch", "0.11.1", '--enable-lora --max-num-seqs 512 --max-num-batched-tokens 2048 '
         '--speculative-config {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}',
         refused="Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens",
         source="vllm/engine/arg_utils.py:1700"),
    # H100's default batch (8192 tokens, 1024 sequences) holds 1024 x 6
    Case("vllm.speculative.lora_batch", "0.33.0", '--enable-lora '
         '--speculative-config {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}'),
    Case("vllm.speculative.lora_batch", "0.33.0", '--max-num-seqs 512 --max-num-batched-tokens 2048 '
         '--speculative-config {"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}'),
    # VllmConfig._validate_adaptive_verification (config/vllm.py:3153-3161 in 0.33.0): only with adaptive verification
    Case("vllm.lora.adaptive_verification", "0.33.0", '--enable-lora --speculative-config '
         '{"method":"dspark","model":"org/draft","num_speculative_tokens":4,"enable_adaptive_verification":true}',
         refused="Adaptive verification is not currently compatible with LoRA", source="vllm/config/vllm.py:3161"),
    Case("vllm.lora.adaptive_verification", "0.33.0", '--enable-lora --speculative-config '
         '{"method":"dspark","model":"org/draft","num_speculative_tokens":4}'),
    Case("vllm.lora.adaptive_verification", "0.33.0", '--speculative-config '
         '{"method":"dspark","model":"org/draft","num_speculative_tokens":4,"enable_adaptive_verification":true}'),
    # the same refusals on the other end of each rule's releases
    Case("vllm.ec_transfer.manager_needs_cls", "0.28.0", '--ec-manager-config {"manager_config":{"slots":4}}',
         refused="manager_config requires encoder_cache_manager_cls to be set."),
    Case("vllm.kernel.flashinfer_autotune_twice", "0.33.0",
         '--kernel-config {"enable_flashinfer_autotune":true} --enable-flashinfer-autotune',
         refused="enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune are mutually exclusive",
         source="vllm/engine/arg_utils.py:2792"),
    Case("vllm.kv_transfer.hidden_states_chunked_prefill", "0.23.0",
         '--kv-transfer-config {"kv_connector":"ExampleHiddenStatesConnector","kv_role":"kv_producer"}',
         refused="ExampleHiddenStatesConnector does not support chunked prefill."),
    Case("vllm.kv_transfer.offloading_size", "0.13.0", "--kv-offloading-backend native",
         refused="You must set kv_offloading_size when kv_offloading_backend is set."),
    Case("vllm.lora.adaptive_verification", "0.29.0", '--enable-lora --speculative-config '
         '{"method":"dspark","model":"org/draft","num_speculative_tokens":4,"enable_adaptive_verification":true}',
         refused="Adaptive verification is not currently compatible with LoRA"),
    Case("vllm.lora.inkling_multimem_ar", "0.33.0", "--enable-lora", model="inkling",
         refused="Inkling LoRA requires INKLING_MULTIMEM_AR=0", source="vllm/config/lora.py:165"),
    Case("vllm.lora.long_lora_v1", "0.9.2", "--enable-lora --long-lora-scaling-factors 4.0", env=V1,
         refused="V1 LoRA does not support long LoRA, please use V0."),
    Case("vllm.observability.detailed_trace_modules", "0.8.5", "--collect-detailed-traces all,workers",
         refused="Invalid module workers in collect_detailed_traces."),
    Case("vllm.observability.histogram_bool_bounds", "0.32.0",
         '--custom-histogram-buckets {"request_latency":[false,1]}',
         refused="custom_histogram_buckets['request_latency']: bound False must be a number, not a boolean"),
    Case("vllm.structured_outputs.reasoning_parser", "0.12.0",
         '--structured-outputs-config {"reasoning_parser":"qwen"}',
         refused="invalid reasoning parser: qwen (chose from", source="vllm/config/structured_outputs.py:79"),
    # PromptAdapterConfig.__post_init__ (config.py:2396-2401 in 0.8.0): --max-prompt-adapter-token defaults to 0
    Case("vllm.lora.prompt_adapter_limits", "0.8.0", "--enable-prompt-adapter",
         refused="max_prompt_adapter_token must be set.", source="vllm/config.py:2401"),
    Case("vllm.lora.prompt_adapter_limits", "0.9.2", "--enable-prompt-adapter --max-prompt-adapters 0 "
         "--max-prompt-adapter-token 64", refused="max_prompt_adapters (0) must be >= 1."),
    Case("vllm.lora.prompt_adapter_limits", "0.9.2", "--enable-prompt-adapter --max-prompt-adapter-token 64"),
    Case("vllm.lora.prompt_adapter_limits", "0.9.2", "--max-prompt-adapters 0"),
    # EngineArgs.create_load_config (engine/arg_utils.py:1160-1175 in 0.8.0, 1028-1032 in 0.8.5)
    Case("vllm.lora.qlora_bitsandbytes", "0.8.0", "--quantization bitsandbytes",
         refused="BitsAndBytes quantization and QLoRA adapter only support 'bitsandbytes' load format, but got auto",
         source="vllm/engine/arg_utils.py:1166"),
    Case("vllm.lora.qlora_bitsandbytes", "0.8.1", "--load-format bitsandbytes",
         refused="BitsAndBytes load format and QLoRA adapter only support 'bitsandbytes' quantization, but got None"),
    Case("vllm.lora.qlora_bitsandbytes", "0.8.0", "--quantization bitsandbytes --load-format bitsandbytes"),
    Case("vllm.lora.qlora_bitsandbytes", "0.8.2", "--quantization bitsandbytes"),     # the load format follows
    Case("vllm.lora.qlora_bitsandbytes", "0.8.5", "--qlora-adapter-name-or-path /adapters/qlora",
         refused="QLoRA adapter only support 'bitsandbytes' quantization, but got None",
         source="vllm/engine/arg_utils.py:1032"),
    Case("vllm.lora.qlora_bitsandbytes", "0.8.5", "--qlora-adapter-name-or-path /adapters/qlora "
         "--quantization bitsandbytes"),
    # TokenizerPoolConfig.__post_init__ (config.py:1232-1237 in 0.8.0), only for a pool
    Case("vllm.tokenizer_pool.options", "0.8.0", "--tokenizer-pool-size 2 --tokenizer-pool-type threads",
         refused="Unknown pool type: threads", source="vllm/config.py:1235"),
    Case("vllm.tokenizer_pool.options", "0.8.4", "--tokenizer-pool-size 2 --tokenizer-pool-extra-config [1]",
         refused="extra_config must be a dictionary."),
    Case("vllm.tokenizer_pool.options", "0.8.4", '--tokenizer-pool-size 2 --tokenizer-pool-extra-config {"a":1}'),
    Case("vllm.tokenizer_pool.options", "0.8.0", "--tokenizer-pool-type threads"),
    # EngineArgs.create_engine_config (engine/arg_utils.py:2685-2689 in 0.33.0), with or without --enable-lora
    Case("vllm.lora.default_mm_loras_text_model", "0.33.0", '--default-mm-loras {"image":"/adapters/img"}',
         refused="Default modality-specific LoRA(s) were provided for a non multimodal model",
         source="vllm/engine/arg_utils.py:2686"),
    Case("vllm.lora.default_mm_loras_text_model", "0.10.0", '--enable-lora --default-mm-loras {"image":"/a"}',
         refused="Default modality-specific LoRA(s) were provided for a non multimodal model"),
    Case("vllm.lora.default_mm_loras_text_model", "0.33.0", '--enable-lora --default-mm-loras {"image":"/a"}',
         model="vision"),
    Case("vllm.lora.default_mm_loras_text_model", "0.33.0", "--enable-lora"),
    # DecodingConfig.__post_init__ (config.py:2785-2793 in 0.8.0; 2803-2816 in 0.8.2: V0 or V1's list)
    Case("vllm.structured_outputs.guided_backend", "0.8.0", "--guided-decoding-backend foo",
         refused="Invalid guided_decoding_backend 'foo, must be one of ['outlines', 'lm-format-enforcer', "
                 "'xgrammar']", source="vllm/config.py:2793"),
    Case("vllm.structured_outputs.guided_backend", "0.8.0", "--guided-decoding-backend outlines"),
    Case("vllm.structured_outputs.guided_backend", "0.8.2", "--guided-decoding-backend guidance", env=V0,
         refused="Invalid guided_decoding_backend 'guidance', must be one of ['outlines', 'lm-format-enforcer', "
                 "'xgrammar']", source="vllm/config.py:2815"),
    Case("vllm.structured_outputs.guided_backend", "0.8.2", "--guided-decoding-backend guidance", env=V1),
    # unset, a backend the V1 oracle lacks falls back to V0, whose list holds outlines
    Case("vllm.structured_outputs.guided_backend", "0.8.2", "--guided-decoding-backend outlines"),
    # 0.8.5 (its parser's choices are V0's list): V1's oracle falls back to V0 for outlines, or refuses it itself
    Case("vllm.structured_outputs.guided_backend", "0.8.5", "--guided-decoding-backend outlines"),
    Case("vllm.structured_outputs.guided_backend", "0.8.4", "--guided-decoding-backend foo",
         refused="Invalid guided_decoding_backend 'foo', must be one of ['outlines', 'lm-format-enforcer', "
                 "'xgrammar', 'auto']", source="vllm/config.py:3042"),
    # DecodingConfig (0.9.0-0.10.2) from the --guided-decoding-* flags; StructuredOutputsConfig from 0.11.0
    Case("vllm.structured_outputs.backend_options", "0.9.0",
         "--guided-decoding-backend outlines --guided-decoding-disable-any-whitespace", env=V0,
         refused="disable_any_whitespace is only supported for xgrammar and guidance backends.",
         source="vllm/config.py:3385"),
    Case("vllm.structured_outputs.backend_options", "0.10.2",
         "--guided-decoding-backend xgrammar --guided-decoding-disable-additional-properties",
         refused="disable_additional_properties is only supported for the guidance backend.",
         source="vllm/config/__init__.py:3021"),
    Case("vllm.structured_outputs.backend_options", "0.10.2",
         "--guided-decoding-backend guidance --guided-decoding-disable-additional-properties"),
    Case("vllm.structured_outputs.backend_options", "0.11.0",
         '--structured-outputs-config {"backend":"outlines","disable_any_whitespace":true}',
         refused="disable_any_whitespace is only supported for xgrammar and guidance backends.",
         source="vllm/config/structured_outputs.py:60"),
    Case("vllm.structured_outputs.backend_options", "0.33.0",
         '--structured-outputs-config {"disable_additional_properties":true}',
         refused="disable_additional_properties is only supported for the guidance backend.",
         source="vllm/config/structured_outputs.py:73"),
    Case("vllm.structured_outputs.backend_options", "0.33.0",
         '--structured-outputs-config {"backend":"xgrammar","disable_any_whitespace":true}'),
    # 0.11.1 assigns the deprecated flags to the built config, unvalidated
    Case("vllm.structured_outputs.backend_options", "0.11.1",
         "--guided-decoding-backend outlines --guided-decoding-disable-any-whitespace True"),
    # StructuredOutputsConfig._validate_structured_output_config (config/structured_outputs.py:64-80 in 0.11.1)
    Case("vllm.structured_outputs.reasoning_parser", "0.11.1",
         '--structured-outputs-config {"reasoning_parser":"qwen"}',
         refused="invalid reasoning parser: qwen (chose from { deepseek_r1,deepseek_v3,ernie45,glm45,granite,"
                 "hunyuan_a13b,kimi_k2,minimax_m2,minimax_m2_append_think,mistral,olmo3,openai_gptoss,qwen3,seed_oss,"
                 "step3 })", source="vllm/config/structured_outputs.py:77"),
    Case("vllm.structured_outputs.reasoning_parser", "0.12.0",
         '--structured-outputs-config {"reasoning_parser":"qwen3"}'),
    Case("vllm.structured_outputs.reasoning_parser", "0.13.0",
         '--structured-outputs-config {"reasoning_parser":"qwen"}'),
    # KVTransferConfig (config.py:2902-2908 in 0.8.0, a BaseModel with a str role; config/kv_transfer.py:121 in 0.33.0)
    Case("vllm.kv_transfer.connector_role", "0.8.0", '--kv-transfer-config {"kv_connector":"PyNcclConnector",'
         '"kv_role":"kv_sender"}',
         refused="Unsupported kv_role: kv_sender. Supported roles are `kv_producer`, `kv_consumer`, and `kv_both`",
         source="vllm/config.py:2902"),
    Case("vllm.kv_transfer.connector_role", "0.9.0", '--kv-transfer-config {"kv_connector":"PyNcclConnector"}',
         refused="Please specify kv_disagg_role when kv_connector is set, supported roles are ('kv_producer', "
                 "'kv_both', 'kv_consumer')", source="vllm/config.py:3577"),
    Case("vllm.kv_transfer.connector_role", "0.33.0", '--kv-transfer-config {"kv_connector":"NixlConnector"}',
         refused="Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', "
                 "'kv_consumer')", source="vllm/config/kv_transfer.py:121"),
    Case("vllm.kv_transfer.connector_role", "0.33.0",
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
    Case("vllm.kv_transfer.connector_role", "0.8.0", '--kv-transfer-config {"kv_connector":"PyNcclConnector",'
         '"kv_role":"kv_producer"}'),
    # VllmConfig._post_init_kv_transfer_config (config/vllm.py:731-746 in 0.22.0): chunked prefill is on by default
    Case("vllm.kv_transfer.hidden_states_chunked_prefill", "0.22.0",
         '--kv-transfer-config {"kv_connector":"ExampleHiddenStatesConnector","kv_role":"kv_producer"}',
         refused="ExampleHiddenStatesConnector does not support chunked prefill. Please disable chunked prefill "
                 "(--no-enable-chunked-prefill).", source="vllm/config/vllm.py:743"),
    Case("vllm.kv_transfer.hidden_states_chunked_prefill", "0.22.0", "--no-enable-chunked-prefill "
         '--kv-transfer-config {"kv_connector":"ExampleHiddenStatesConnector","kv_role":"kv_producer"}'),
    Case("vllm.kv_transfer.hidden_states_chunked_prefill", "0.24.0",
         '--kv-transfer-config {"kv_connector":"ExampleHiddenStatesConnector","kv_role":"kv_producer"}'),
    # VllmConfig._verify_kv_transfer_compat (config/vllm.py:716-746 in 0.21.0, 1246-1296 in 0.33.0): past its early
    # returns only with a connector, expandable segments and no cuMem allocator (sleep mode in 0.21)
    Case("vllm.kv_transfer.expandable_segments", "0.33.0",
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}', env=SEGMENTS,
         refused="KV connector NixlConnector is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                 "unless enable_cumem_allocator is also enabled.", source="vllm/config/vllm.py:1291"),
    Case("vllm.kv_transfer.expandable_segments", "0.21.0",
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}', env=SEGMENTS,
         refused="unless enable_sleep_mode is also enabled.", source="vllm/config/vllm.py:746"),
    Case("vllm.kv_transfer.expandable_segments", "0.33.0", '--enable-sleep-mode '
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}', env=SEGMENTS),
    Case("vllm.kv_transfer.expandable_segments", "0.22.0", '--enable-cumem-allocator '
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}', env=SEGMENTS),
    Case("vllm.kv_transfer.expandable_segments", "0.33.0",
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
    Case("vllm.kv_transfer.expandable_segments", "0.20.0",
         '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}', env=SEGMENTS),
    # ECTransferConfig.__post_init__ (config/ec_transfer.py:91 in 0.33.0, :96 in 0.12.0)
    Case("vllm.ec_transfer.connector_role", "0.33.0", '--ec-transfer-config {"ec_connector":"ECExampleConnector"}',
         refused="Please specify ec_role when ec_connector is set, supported roles are ('ec_producer', 'ec_both', "
                 "'ec_consumer')", source="vllm/config/ec_transfer.py:91"),
    Case("vllm.ec_transfer.connector_role", "0.12.0", '--ec-transfer-config {"ec_connector":"ECExampleConnector"}',
         refused="Please specify ec_role when ec_connector is set", source="vllm/config/ec_transfer.py:92"),
    Case("vllm.ec_transfer.connector_role", "0.33.0",
         '--ec-transfer-config {"ec_connector":"ECExampleConnector","ec_role":"ec_consumer"}'),
    # EngineArgs.create_engine_config (engine/arg_utils.py:1368-1375 in 0.8.0); ObservabilityConfig from 0.11.1
    Case("vllm.observability.detailed_trace_modules", "0.8.0", "--collect-detailed-traces model,workers",
         refused="Invalid module workers in collect_detailed_traces. Valid modules are ['model', 'worker', 'all']",
         source="vllm/engine/arg_utils.py:1373"),
    Case("vllm.observability.detailed_trace_modules", "0.8.5", "--collect-detailed-traces model,worker"),
    Case("vllm.observability.detailed_traces_need_endpoint", "0.33.0", "--collect-detailed-traces all",
         refused="collect_detailed_traces requires `--otlp-traces-endpoint` to be set.",
         source="vllm/config/observability.py:219"),
    Case("vllm.observability.detailed_traces_need_endpoint", "0.11.1", "--collect-detailed-traces worker",
         refused="collect_detailed_traces requires `--otlp-traces-endpoint` to be set.",
         source="vllm/config/observability.py:120"),
    Case("vllm.observability.detailed_traces_need_endpoint", "0.33.0",
         "--collect-detailed-traces all --otlp-traces-endpoint http://collector:4317"),
    Case("vllm.observability.detailed_traces_need_endpoint", "0.11.0", "--collect-detailed-traces all"),
    # ProfilerConfig._validate_profiler_config (config/profiler.py:180-186 in 0.13.0, 236-302 in 0.33.0)
    Case("vllm.profiler.options", "0.13.0", '--profiler-config {"profiler":"torch"}',
         refused="torch_profiler_dir must be set when profiler is 'torch'", source="vllm/config/profiler.py:186"),
    # 0.13-0.15: VLLM_TORCH_PROFILER_DIR still sets the directory (and the torch profiler)
    Case("vllm.profiler.options", "0.13.0", '--profiler-config {"profiler":"torch"}',
         env={"VLLM_TORCH_PROFILER_DIR": "/traces"}),
    Case("vllm.profiler.options", "0.16.0", '--profiler-config {"profiler":"torch"}',
         env={"VLLM_TORCH_PROFILER_DIR": "/traces"}, refused="torch_profiler_dir must be set when profiler is 'torch'"),
    Case("vllm.profiler.options", "0.26.0", '--profiler-config {"profiler":"cuda","capture_torch_profiler":true}',
         refused="capture_torch_profiler is only applicable when profiler is set to 'torch'",
         source="vllm/config/profiler.py:159"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"cuda","torch_profiler_dir":"/traces"}',
         refused="torch_profiler_dir is only applicable when profiler is set to 'torch'",
         source="vllm/config/profiler.py:236"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"torch","torch_profiler_dir":"/traces"}'),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"cuda","proton_data":"trace"}',
         refused="proton_data only applicable when profiler is set to 'proton'", source="vllm/config/profiler.py:266"),
    Case("vllm.profiler.options", "0.28.0", '--profiler-config {"profiler":"proton"}',
         refused="proton_profiler_dir must be set when profiler is 'proton'", source="vllm/config/profiler.py:211"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"proton","proton_profiler_dir":"s3://b/p"}',
         refused="proton_profiler_dir must be a local directory", source="vllm/config/profiler.py:275"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"proton","proton_profiler_dir":"/p",'
         '"proton_output_format":"chrome_trace"}', refused="chrome_trace output requires proton_data='trace'",
         source="vllm/config/profiler.py:294"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"proton","proton_profiler_dir":"/p",'
         '"proton_data":"trace","proton_output_format":"hatchet"}',
         refused="hatchet output requires proton_data='tree'", source="vllm/config/profiler.py:299"),
    Case("vllm.profiler.options", "0.30.0", '--profiler-config {"profiler":"proton","proton_profiler_dir":"/p",'
         '"proton_graph_attribution":true,"proton_mode":"periodic_flushing:format=hatchet"}',
         refused="proton_graph_attribution is incompatible with periodic_flushing",
         source="vllm/config/profiler.py:235"),
    Case("vllm.profiler.options", "0.33.0", '--profiler-config {"profiler":"proton","proton_profiler_dir":"/p",'
         '"proton_data":"trace","proton_output_format":"chrome_trace"}'),
    Case("vllm.profiler.options", "0.31.0", '--profiler-config {"profiler":"torch","torch_profiler_dir":"/t",'
         '"torch_profiler_activities":["CPU","CUDA","CPU"]}',
         refused="torch_profiler_activities must not contain duplicates", source="vllm/config/profiler.py:188"),
    Case("vllm.profiler.options", "0.31.0", '--profiler-config {"profiler":"torch","torch_profiler_dir":"/t",'
         '"torch_profiler_activities":["CPU","CUDA"]}'),
    # AttentionConfig (config/attention.py:109-122 in 0.21.0, 240-264 in 0.26.0+, 124-133 in 0.28.0, 186-196 in 0.33.0)
    Case("vllm.attention.options", "0.21.0", '-ac {"use_cudnn_prefill":true}',
         refused="The cuDNN MLA prefill backend has been removed.", source="vllm/config/attention.py:118"),
    # a new mla_prefill_backend wins: the migration returns before the deprecated flags
    Case("vllm.attention.options", "0.21.0", '-ac {"use_cudnn_prefill":true,"mla_prefill_backend":"FLASHINFER"}'),
    Case("vllm.attention.options", "0.33.0", '-ac {"backend_per_kind":{"full":"FLASH_ATTN"}}',
         refused="Unknown KV cache group kind 'full' in backend_per_kind. Valid kinds are: chunked_local_attention, "
                 "cross_attention, encoder_only_attention, full_attention, mamba,",
         source="vllm/config/attention.py:256"),
    Case("vllm.attention.options", "0.33.0", '-ac {"backend_per_kind":{"full_attention":"FLASH_ATTN"}}'),
    Case("vllm.attention.options", "0.28.0", '-ac {"use_fp4_indexer_cache":true,"indexer_kv_dtype":"fp8"}',
         refused="use_fp4_indexer_cache=True conflicts with indexer_kv_dtype='fp8'. Set only indexer_kv_dtype.",
         source="vllm/config/attention.py:130"),
    Case("vllm.attention.options", "0.28.0", '-ac {"use_fp4_indexer_cache":true,"indexer_kv_dtype":"mxfp4"}'),
    Case("vllm.attention.options", "0.33.0", '-ac {"minimax_m3_indexer_cp":true,"indexer_kv_dtype":"mxfp4"}',
         refused="minimax_m3_indexer_cp requires a bf16 or fp8 e4m3 index cache",
         source="vllm/config/attention.py:192"),
    Case("vllm.attention.options", "0.33.0", '-ac {"minimax_m3_indexer_cp":true,"indexer_kv_dtype":"fp8"}'),
    # EngramConfig (config/engram.py:60-107 in 0.33.0; 0.30.0 also checks the load format, :105-112)
    Case("vllm.engram.options", "0.33.0", '--engram-config {"dp_shared_memory":true,"cpu_offload":false}', dp=2,
         refused="dp_shared_memory requires cpu_offload=True", source="vllm/config/engram.py:61"),
    Case("vllm.engram.options", "0.31.0", '--engram-config {"use_thp":true,"cpu_offload":false}',
         refused="use_thp requires cpu_offload=True and dp_shared_memory=False", source="vllm/config/engram.py:63"),
    Case("vllm.engram.options", "0.33.0", '--engram-config {"dp_shared_memory":true}',
         refused="dp_shared_memory requires data_parallel_size > 1.", source="vllm/config/engram.py:99"),
    Case("vllm.engram.options", "0.30.0", '--engram-config {"dp_shared_memory":true} --load-format dummy', dp=2,
         refused="dp_shared_memory requires load_format 'auto', 'safetensors' or 'pt'; got 'dummy'.",
         source="vllm/config/engram.py:108"),
    Case("vllm.engram.options", "0.33.0", '--engram-config {"embedding_across_dp":true} --enable-elastic-ep '
         "--enable-eplb --enable-expert-parallel", dp=2,
         refused="Engram embedding_across_dp is not supported with elastic EP yet.",
         source="vllm/config/engram.py:107"),
    # from 0.31 an unset dp_shared_memory is on only where DP > 1 without elastic EP: never refused
    Case("vllm.engram.options", "0.33.0", '--engram-config {"cpu_offload":true}'),
    Case("vllm.engram.options", "0.33.0", '--engram-config {"dp_shared_memory":true}', dp=2),
    Case("vllm.engram.model_support", "0.33.0", '--engram-config {"cpu_offload":true}',
         refused="EngramConfig requires a model with supported Engram embeddings and non-empty n-gram layer ids.",
         source="vllm/config/engram.py:80"),
    Case("vllm.engram.model_support", "0.30.0", '--engram-config {"cpu_offload":true}',
         refused="EngramConfig requires a model with supported Engram embeddings, non-empty n-gram layer ids, "
                 "and CUDA.", source="vllm/config/engram.py:80"),
    Case("vllm.engram.model_support", "0.33.0", ""),
    # EngineArgs.create_engine_config: a top-level flag over the same key of its config (engine/arg_utils.py:
    # 2726-2737, 2787-2820 in 0.33.0)
    Case("vllm.attention.backend_twice", "0.33.0", '--attention-backend FLASH_ATTN -ac {"backend":"FLASHINFER"}',
         refused="attention_backend and attention_config.backend are mutually exclusive",
         source="vllm/engine/arg_utils.py:2730"),
    Case("vllm.attention.backend_twice", "0.17.0", '--attention-backend FLASH_ATTN -ac {"backend":"FLASHINFER"}',
         refused="attention_backend and attention_config.backend are mutually exclusive",
         source="vllm/engine/arg_utils.py:1808"),
    Case("vllm.attention.backend_twice", "0.33.0", '--attention-backend FLASH_ATTN -ac {"backend":"auto"}'),
    Case("vllm.attention.backend_twice", "0.33.0", '-ac {"backend":"FLASHINFER"}'),
    Case("vllm.kernel.flashinfer_autotune_twice", "0.16.0",
         '--kernel-config {"enable_flashinfer_autotune":false} --no-enable-flashinfer-autotune',
         refused="enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune are mutually exclusive",
         source="vllm/engine/arg_utils.py:1743"),
    Case("vllm.kernel.flashinfer_autotune_twice", "0.33.0", "--enable-flashinfer-autotune"),
    Case("vllm.kernel.ir_op_priority_twice", "0.20.0",
         '--ir-op-priority {"rms_norm":"vllm_c"} --kernel-config {"ir_op_priority":{"rms_norm":"native"}}',
         refused="Op priority for rms_norm specified via both ir_op_priority and KernelConfig.ir_op_priority, only "
                 "one allowed at a time.", source="vllm/engine/arg_utils.py:2053"),
    Case("vllm.kernel.ir_op_priority_twice", "0.33.0",
         '--ir-op-priority {"rms_norm":"vllm_c"} --kernel-config {"ir_op_priority":{"rms_norm":"native"}}',
         refused="Op priority for rms_norm specified via both ir_op_priority", source="vllm/engine/arg_utils.py:2815"),
    Case("vllm.kernel.ir_op_priority_twice", "0.33.0", '--ir-op-priority {"rms_norm":"vllm_c"}'),
    # IrOpPriorityConfig._to_list_str asserts every listed provider is a string (config/kernel.py:66-72 in 0.33.0)
    Case("vllm.kernel.ir_op_priority_strings", "0.33.0", '--ir-op-priority {"rms_norm":["vllm_c",3]}',
         exception="AssertionError", refused="", source="vllm/config/kernel.py:72"),
    Case("vllm.kernel.ir_op_priority_strings", "0.20.0", '--kernel-config {"ir_op_priority":{"rms_norm":[1]}}',
         exception="AssertionError", refused="", source="vllm/config/kernel.py:64"),
    Case("vllm.kernel.ir_op_priority_strings", "0.20.0", '--kernel-config {"ir_op_priority":{"rms_norm":"a,b"}}'),
    # VllmConfig._post_init_kv_transfer_config (config/vllm.py:466-476 in 0.12.0); 0.14 drops the check
    Case("vllm.kv_transfer.offloading_size", "0.12.0", "--kv-offloading-backend native",
         refused="You must set kv_offloading_size when kv_offloading_backend is set.",
         source="vllm/config/vllm.py:473"),
    Case("vllm.kv_transfer.offloading_size", "0.12.0", "--kv-offloading-backend native --kv-offloading-size 8"),
    Case("vllm.kv_transfer.offloading_size", "0.14.0", "--kv-offloading-backend native"),
    # EncoderCacheManagerConfig.__post_init__ (config/ec_manager_config.py:20-23 in 0.33.0)
    Case("vllm.ec_transfer.manager_needs_cls", "0.33.0", '--ec-manager-config {"manager_config":{"slots":4}}',
         refused="manager_config requires encoder_cache_manager_cls to be set.",
         source="vllm/config/ec_manager_config.py:22"),
    Case("vllm.ec_transfer.manager_needs_cls", "0.33.0", '--ec-manager-config {"manager_config":{"slots":4},'
         '"encoder_cache_manager_cls":"my.pkg.Manager"}'),
    # OffloadConfig.validate_offload_config (config/offload.py:97-112 in 0.33.0)
    Case("vllm.offload.prefetch_options", "0.17.0", "--offload-group-size 2 --offload-num-in-group 3",
         refused="offload_num_in_group (3) must be <= offload_group_size (2)", source="vllm/config/offload.py:102"),
    Case("vllm.offload.prefetch_options", "0.33.0", "--offload-group-size 4 --offload-prefetch-step 0",
         refused="offload_prefetch_step (0) must be >= 1 when prefetch offloading is enabled (offload_group_size > 0)",
         source="vllm/config/offload.py:108"),
    # the prefetch backend needs a group: the default size 0 is below the default 1 layer per group
    Case("vllm.offload.prefetch_options", "0.33.0", "--offload-backend prefetch",
         refused="offload_num_in_group (1) must be <= offload_group_size (0)"),
    Case("vllm.offload.prefetch_options", "0.33.0", "--offload-backend prefetch --offload-group-size 4"),
    Case("vllm.offload.prefetch_options", "0.33.0", "--offload-num-in-group 3"),    # prefetch off: not checked
    # WatermarkConfig.validate_watermark_settings (config/watermarking.py:59-61 in 0.33.0)
    Case("vllm.watermark.key_bits", "0.33.0", '--watermark-config {"key":18446744073709551616}',
         refused="philox keys must fit in 64 bits", source="vllm/config/watermarking.py:61"),
    Case("vllm.watermark.key_bits", "0.30.0", '--watermark-config {"key":18446744073709551616}',
         refused="philox keys must fit in 64 bits", source="vllm/config/watermarking.py:62"),
    Case("vllm.watermark.key_bits", "0.33.0", '--watermark-config {"key":18446744073709551615}'),
    # ObservabilityConfig's --custom-histogram-buckets validators (config/observability.py:167-212 in 0.33.0)
    Case("vllm.observability.histogram_bool_bounds", "0.33.0",
         '--custom-histogram-buckets {"request_latency":[1,true]}',
         refused="custom_histogram_buckets['request_latency']: bound True must be a number, not a boolean",
         source="vllm/config/observability.py:177"),
    Case("vllm.observability.histogram_bool_bounds", "0.33.0", '--custom-histogram-buckets {"request_latency":[1,2]}'),
    Case("vllm.observability.histogram_buckets", "0.32.0", '--custom-histogram-buckets {"ttft":[1,2]}',
         refused="custom_histogram_buckets: unknown bucket family 'ttft'; known families: ['inter_token_latency', "
                 "'iteration_tokens', 'kv_cache_residency', 'request_latency', 'request_num_preemptions', "
                 "'request_params_n', 'request_tokens', 'time_to_first_token']",
         source="vllm/config/observability.py:194"),
    Case("vllm.observability.histogram_buckets", "0.33.0", '--custom-histogram-buckets {"request_latency":[]}',
         refused="custom_histogram_buckets['request_latency']: bucket list must not be empty",
         source="vllm/config/observability.py:199"),
    Case("vllm.observability.histogram_buckets", "0.33.0", '--custom-histogram-buckets {"request_latency":[0.5,-1]}',
         refused="custom_histogram_buckets['request_latency']: bound -1.0 must be finite and greater than 0",
         source="vllm/config/observability.py:205"),
    Case("vllm.observability.histogram_buckets", "0.33.0",
         '--custom-histogram-buckets {"iteration_tokens":[1,8],"request_latency":[2,1]}',
         refused="custom_histogram_buckets['request_latency']: bounds [2.0, 1.0] must be strictly increasing",
         source="vllm/config/observability.py:210"),
    Case("vllm.observability.histogram_buckets", "0.33.0",
         '--custom-histogram-buckets {"iteration_tokens":[1,8,64],"request_latency":[0.5,2]}'),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_the_line_in_its_own_words(case: Case) -> None:
    judged = _judge(case)
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("vLLM") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert case.refused in r.message
    assert r.exception == case.exception
    if case.source:
        assert r.source == case.source
    assert r.text("vLLM").startswith(f"vLLM {case.version} raises {case.exception}")


#: the rules of ``rules_small`` (judged in its frames, and the one it reads from the shared namespace)
SMALL = sorted(rules_small.FRAMED | {rules_small.LORA_DEFAULT_MM})


def test_every_rule_of_the_module_has_a_refusing_and_an_accepted_case() -> None:
    assert set(SMALL) <= set(RULES)
    for rule in SMALL:
        assert book().ledger.rule_entries(rule), rule
        assert any(c.rule == rule and c.refused is not None for c in CASES), rule
        assert any(c.rule == rule and c.refused is None for c in CASES), rule


@pytest.mark.parametrize(("version", "line", "reads"), [
    # VLLM_USE_V1=1: the 0.8 oracle refuses tracing itself (NotImplementedError) before the module loop
    ("0.8.0", "--collect-detailed-traces model,workers", "for m in detailed_trace_modules"),
    # the engine the oracle picks is not said: V0 refuses, V1 accepts
    ("0.8.3", "--enable-lora --cpu-offload-gb 2", "envs.VLLM_USE_V1"),
    ("0.8.5", "--enable-lora --long-lora-scaling-factors 4.0", "envs.VLLM_USE_V1"),
    # V1 unless another feature of the line falls back to V0: V1's list lacks guidance in 0.8.2's V0 list
    ("0.8.2", "--guided-decoding-backend guidance", "valid_guided_backends"),
])
def test_a_line_whose_engine_the_oracle_picks_is_said_not_judged(version: str, line: str, reads: str) -> None:
    judged = _judge(Case("", version, line, env=V1 if "traces" in line else {}))
    assert not [r for r in judged.refusals if r.rule in SMALL]
    assert any(reads in n for n in judged.not_judged), judged.not_judged


def test_a_reasoning_parser_plugin_may_register_the_name_so_it_is_not_judged() -> None:
    judged = _judge(Case("", "0.12.0", '--structured-outputs-config {"reasoning_parser":"mine",'
                                       '"reasoning_parser_plugin":"/plugins/mine.py"}'))
    assert not [r for r in judged.refusals if r.rule == "vllm.structured_outputs.reasoning_parser"]
    assert any("vllm.structured_outputs.reasoning_parser" in n for n in judged.not_judged), judged.not_judged


def test_below_sm80_the_v0_fallback_is_known() -> None:
    """0.8-0.10.0 fall back to V0 below SM 8.0 (``defaults.runs_v0``): V0's LoRA refuses CPU offload."""
    judged = _judge(Case("", "0.8.3", "--enable-lora --cpu-offload-gb 2"), layout(cc=(7, 5)))
    assert [r.rule for r in judged.refusals if r.rule in SMALL] == ["vllm.lora.cpu_offload"]


def test_a_model_class_no_release_knows_leaves_lora_support_not_judged() -> None:
    judged = _judge(Case("", "0.33.0", "--enable-lora", model="unknown"))
    assert not [r for r in judged.refusals if r.rule == "vllm.lora.model_support"]
    assert any("vllm.lora.model_support" in n for n in judged.not_judged), judged.not_judged


def test_an_assertion_without_a_message_shows_its_condition() -> None:
    judged = _judge(Case("", "0.33.0", '--ir-op-priority {"rms_norm":[3]}'))
    (r,) = [r for r in judged.refusals if r.rule == "vllm.kernel.ir_op_priority_strings"]
    assert r.text("vLLM") == ("vLLM 0.33.0 raises AssertionError with no message (vllm/config/kernel.py:72: "
                              "all((isinstance(v, str) for v in value)))")


def test_a_v1_prompt_adapter_line_is_left_to_the_oracle_and_said_not_judged() -> None:
    judged = _judge(Case("", "0.9.2", "--enable-prompt-adapter", env=V1))
    assert not [r for r in judged.refusals if r.rule == "vllm.lora.prompt_adapter_limits"]
    assert any("vllm.lora.prompt_adapter_limits" in n for n in judged.not_judged), judged.not_judged


def test_a_line_without_the_small_flags_is_neither_refused_nor_left_unjudged_by_them() -> None:
    for version in ("0.8.0", "0.8.2", "0.8.5", "0.9.0", "0.10.0", "0.11.0", "0.20.0", "0.33.0"):
        judged = _judge(Case("", version, ""))
        assert not [r for r in judged.refusals if r.rule in SMALL], version
        assert not [n for n in judged.not_judged if any(f"({r})" in n for r in SMALL)], (version, judged.not_judged)


@pytest.mark.parametrize(("line", "refused"), [
    ("vllm serve Qwen/Qwen3-8B --enable-lora --max-loras 4 --max-cpu-loras 2",
     "max_cpu_loras (2) must be >= max_loras (4)."),
    ("vllm serve Qwen/Qwen3-8B --enable-lora --max-loras 4 --max-cpu-loras 8", None),
    ("vllm serve Qwen/Qwen3-8B --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}'",
     "Please specify kv_role when kv_connector is set"),
    ("vllm serve Qwen/Qwen3-8B --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'",
     None),
])
def test_gpulayout_check_fails_the_config_check_in_the_releases_words(
        capsys: pytest.CaptureFixture[str], line: str, refused: str | None) -> None:
    """``gpulayout check --cmd``: the refusal is the config check's failure (exit 1), the neighbour passes it."""
    code = main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    if refused is None:
        assert config["status"] == "pass", config["message"]
        return
    assert code == 1 and config["status"] == "fail"
    assert f'vLLM 0.33.0 raises ValueError: "{refused}' in config["message"]


def test_a_prequantized_bitsandbytes_checkpoint_sets_the_quantization_from_084() -> None:
    """engine/arg_utils.py:1234-1236 in 0.8.5: ``model_config.quantization == "bitsandbytes"`` sets both before
    ``create_load_config``; 0.8.3 keeps the flags (None), so the QLoRA adapter is refused there."""
    bnb = replace(load_model(M), quantization=Quantization("bitsandbytes", 4))
    line = f"{M} --qlora-adapter-name-or-path /adapters/qlora".split()
    for version, refused in (("0.8.5", False), ("0.8.3", True)):
        judged = config_check(resolve(line, Version(version)), bnb, layout(), Version(version))
        mine = [r for r in judged.refusals if r.rule == "vllm.lora.qlora_bitsandbytes"]
        assert bool(mine) is refused, (version, mine)
