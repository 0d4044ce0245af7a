"""vLLM's config-time refusals by release (``engines/vllm/config_checks.py``), each case as the release's source
decides it, in its words and at its line: the entries ``tools/config_ledger.py`` listed from the wheels
(``config_ledger.json``) that ``config_classes.yaml`` gives to a rule. A rule true in one release and not in
another has both cases; ``CASES`` holds at least one refusal per rule (``test_every_rule_has_a_refusing_case``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import pytest
from builders import llama
from packaging.version import Version

from pytest_gpulayout.engines.vllm.config_checks import RULES, config_check, scheduler
from pytest_gpulayout.engines.vllm.rules_fields import FIELD_RULES
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

MODELS = Path(__file__).parents[1] / "data" / "models"

L4 = Layout(compute_capability=(8, 9), gpu_name="NVIDIA L4", gpu_total_mib=23034)
H100 = Layout(compute_capability=(9, 0), gpu_name="NVIDIA H100 80GB HBM3", gpu_total_mib=81559)
A100 = Layout(compute_capability=(8, 0), gpu_name="NVIDIA A100-SXM4-80GB", gpu_total_mib=81920)
T4 = Layout(compute_capability=(7, 5), gpu_name="Tesla T4", gpu_total_mib=15360)


def args(**values: object) -> ResolvedArgs:
    """A command line as the front-door parser resolves it: these destinations set on it."""
    return ResolvedArgs("vllm", "", MappingProxyType(dict(values)), frozenset(values))


def on(layout: Layout, tp: int = 1, pp: int = 1, dp: int = 1) -> Layout:
    return Layout(tp, pp, dp, layout.compute_capability, layout.gpu_name, layout.gpu_total_mib)


def qwen3_8b() -> ModelSpec:
    return load_model("Qwen/Qwen3-8B")


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    line: ResolvedArgs
    layout: Layout
    model: str = "qwen3-8b"
    refused: str | None = None       # the release's words (a part), or None: the rule refuses nothing
    source: str | None = None        # file:line in that release
    exception: str = "ValueError"
    tags: tuple[str, ...] = field(default=())


def model_of(name: str) -> ModelSpec:
    return {
        "qwen3-8b": qwen3_8b,
        "qwen3-30b-a3b": lambda: load_model("Qwen/Qwen3-30B-A3B"),
        "deepseek-v3": lambda: load_model("deepseek-ai/DeepSeek-V3"),
        "gemma3-12b": lambda: load_model("google/gemma-3-12b-it"),
        "phi4mm": lambda: load_model(str(MODELS / "phi-4-multimodal-instruct")),
        "llama-70b": lambda: llama(heads=64, kv=8, layers=80, max_position_embeddings=8192),
    }[name]()


CASES = [
    # config/scheduler.py:331-336 (0.33.0): the line's max_num_seqs against the release's default batch
    Case("vllm.scheduler.batched_below_seqs", "0.33.0", args(max_num_seqs=4096), on(L4),
         refused="max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096).",
         source="vllm/config/scheduler.py:332"),
    Case("vllm.scheduler.batched_below_seqs", "0.33.0", args(max_num_seqs=4096), on(H100)),  # 8192 by default
    Case("vllm.scheduler.batched_below_seqs", "0.33.0", args(max_num_seqs=4096), on(A100),   # A100s: 2048
         refused="max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)."),
    # 0.8.0 defaults max_num_seqs to 1024 on every GPU and does not clamp it; 0.11.1 clamps it to the batch
    Case("vllm.scheduler.batched_below_seqs", "0.8.0", args(max_num_batched_tokens=512), on(L4),
         refused="max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024).",
         source="vllm/config.py:1724"),
    Case("vllm.scheduler.batched_below_seqs", "0.11.1", args(max_num_batched_tokens=512), on(L4)),
    Case("vllm.scheduler.batched_below_seqs", "0.31.0", args(max_num_batched_tokens=128, max_num_seqs=256), on(L4),
         refused="max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)."),
    # config/scheduler.py:317-329: --no-enable-chunked-prefill is kept from 0.11.1; 0.11.0's V1 forces it on
    Case("vllm.scheduler.batched_below_max_len", "0.33.0",
         args(enable_chunked_prefill=False, max_num_batched_tokens=4096, max_model_len=8192), on(L4),
         refused="max_num_batched_tokens (4096) is smaller than max_model_len (8192). This effectively limits "
                 "the maximum sequence length to max_num_batched_tokens",
         source="vllm/config/scheduler.py:322"),
    Case("vllm.scheduler.batched_below_max_len", "0.11.0",
         args(enable_chunked_prefill=False, max_num_batched_tokens=4096, max_model_len=8192), on(L4)),
    # the default batch is raised to max_model_len when chunked prefill is off: no refusal
    Case("vllm.scheduler.batched_below_max_len", "0.33.0", args(enable_chunked_prefill=False, max_model_len=8192),
         on(L4)),
    # V0 (0.8.x below SM 8.0) keeps chunked prefill off up to 32K: an explicit batch below max_model_len
    Case("vllm.scheduler.batched_below_max_len", "0.8.5", args(max_num_batched_tokens=4096, max_model_len=8192),
         on(T4), refused="max_num_batched_tokens (4096) is smaller than max_model_len (8192)."),
    Case("vllm.scheduler.partial_prefills", "0.26.0",
         args(max_num_partial_prefills=2, enable_chunked_prefill=False, max_num_batched_tokens=65536), on(H100),
         refused="Chunked prefill must be enabled to set max_num_partial_prefills > 1."),
    Case("vllm.scheduler.partial_prefills", "0.33.0",   # 0.27 dropped that check
         args(max_num_partial_prefills=2, enable_chunked_prefill=False, max_num_batched_tokens=65536), on(H100)),
    Case("vllm.scheduler.partial_prefills", "0.20.0", args(max_num_partial_prefills=2, max_long_partial_prefills=3),
         on(H100), refused="self.max_long_partial_prefills=3 must be less than or equal to "
                           "self.max_num_partial_prefills=2."),
    Case("vllm.scheduler.value_ranges", "0.9.0", args(num_scheduler_steps=0), on(H100),
         refused="num_scheduler_steps (0) must be greater than or equal to 1."),
    Case("vllm.scheduler.value_ranges", "0.33.0", args(max_num_seqs=256, max_num_active_seqs=300), on(H100),
         refused="max_num_active_seqs (300) cannot be greater than max_num_seqs (256)."),
    # config/parallel.py:569-570 (0.33.0); EPLB came in 0.9.2 without the check (it is there from 0.10.0)
    Case("vllm.parallel.eplb_needs_ep", "0.33.0", args(enable_eplb=True), on(H100, tp=2),
         model="qwen3-30b-a3b", refused="enable_expert_parallel must be True to use EPLB.",
         source="vllm/config/parallel.py:570"),
    Case("vllm.parallel.eplb_needs_ep", "0.9.2", args(enable_eplb=True), on(H100, tp=2), model="qwen3-30b-a3b"),
    Case("vllm.parallel.eplb_needs_parallelism", "0.20.0", args(enable_eplb=True, enable_expert_parallel=True),
         on(H100), model="qwen3-30b-a3b",
         refused="EPLB requires tensor_parallel_size or data_parallel_size to be greater than 1, but got TP=1,DP=1."),
    Case("vllm.parallel.eplb_needs_parallelism", "0.33.0", args(enable_eplb=True, enable_expert_parallel=True),
         on(H100), model="qwen3-30b-a3b",
         refused="EPLB requires tensor, prefill-context, or data parallelism, but got TP=1, PCP=1, DP=1."),
    # config/parallel.py:599-600 (0.33.0); 0.16-0.25 lack the space ("bydcp_size"); 0.10.2-0.15 assert it
    Case("vllm.parallel.tp_divisible_by_dcp", "0.33.0", args(decode_context_parallel_size=3), on(H100, tp=2),
         refused="tp_size=2 must be divisible by dcp_size=3.", source="vllm/config/parallel.py:600"),
    Case("vllm.parallel.tp_divisible_by_dcp", "0.20.0", args(decode_context_parallel_size=3), on(H100, tp=2),
         refused="tp_size=2 must be divisible bydcp_size=3."),
    Case("vllm.parallel.tp_divisible_by_dcp", "0.12.0", args(decode_context_parallel_size=3), on(H100, tp=2),
         exception="AssertionError", refused="tp_size=2 must be divisible bydcp_size=3.",
         source="vllm/engine/arg_utils.py:1387"),
    Case("vllm.parallel.tp_divisible_by_dcp", "0.10.1", args(decode_context_parallel_size=3), on(H100, tp=2)),
    Case("vllm.parallel.dcp_with_pcp", "0.33.0", args(prefill_context_parallel_size=2, decode_context_parallel_size=3),
         on(H100, tp=4), refused="When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full "
                                 "TP x PCP axis. Got TP=4, PCP=2, DCP=3; valid DCP sizes are [1, 2, 8]."),
    Case("vllm.parallel.dp_local_above_dp", "0.33.0", args(data_parallel_size_local=4), on(H100, dp=2),
         refused="data_parallel_size_local (4) must be <= data_parallel_size (2)"),
    Case("vllm.parallel.elastic_ep", "0.33.0", args(enable_elastic_ep=True), on(H100, tp=2), model="qwen3-30b-a3b",
         refused="Elastic EP is only supported with enable_eplb=True."),
    Case("vllm.parallel.elastic_ep", "0.16.0", args(enable_elastic_ep=True), on(H100, tp=2), model="qwen3-30b-a3b"),
    Case("vllm.model.heads_divisible_by_tp", "0.33.0", args(), on(H100, tp=3),
         refused="Total number of attention heads (32) must be divisible by tensor parallel size (3).",
         source="vllm/config/model.py:1560"),
    Case("vllm.model.heads_divisible_by_tp", "0.8.0", args(), on(H100, tp=3),
         refused="Total number of attention heads (32) must be divisible by tensor parallel size (3)."),
    # config/model.py:1569-1576 (0.33.0): Phi-4-multimodal's class lacks SupportsPP
    Case("vllm.model.pp_needs_supports_pp", "0.33.0", args(), on(H100, pp=2), model="phi4mm",
         exception="NotImplementedError",
         refused="Pipeline parallelism is not supported for this model. Supported models implement the "
                 "`SupportsPP` interface.", source="vllm/config/model.py:1573"),
    Case("vllm.model.pp_needs_supports_pp", "0.10.2", args(), on(H100, pp=2), model="phi4mm",
         exception="NotImplementedError", refused="Pipeline parallelism is not supported for this model."),
    Case("vllm.model.pp_needs_supports_pp", "0.33.0", args(), on(H100, pp=2)),
    Case("vllm.model.ep_needs_experts", "0.33.0", args(enable_expert_parallel=True), on(H100, tp=2),
         refused="Number of experts in the model must be greater than 0 when expert parallelism is enabled."),
    Case("vllm.model.ep_needs_experts", "0.33.0", args(enable_expert_parallel=True), on(H100, tp=2),
         model="qwen3-30b-a3b"),
    Case("vllm.model.dcp_gqa", "0.33.0", args(decode_context_parallel_size=2), on(H100, tp=2),
         refused="Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` (2) to be greater than "
                 "the model's total number of KV heads (8)."),
    Case("vllm.model.dcp_gqa", "0.20.0", args(decode_context_parallel_size=2), on(H100, tp=2),
         exception="AssertionError", refused="tensor parallel size 2 must be greater than total num kv heads 8 when "
                                             "enable decode context parallel for GQA/MQA"),
    Case("vllm.model.dcp_gqa", "0.33.0", args(decode_context_parallel_size=2), on(H100, tp=16)),   # 16 > 8, 2 <= 2
    Case("vllm.model.dcp_gqa", "0.33.0", args(decode_context_parallel_size=2), on(H100, tp=8), model="deepseek-v3"),
    Case("vllm.dtype.float16_refused", "0.33.0", args(dtype="half"), on(H100), model="gemma3-12b",
         refused="The model type 'gemma3' does not support float16. Reason: Numerical instability. Please use "
                 "bfloat16 or float32 instead."),
    Case("vllm.dtype.float16_refused", "0.9.0", args(dtype="half"), on(H100), model="gemma3-12b"),
    Case("vllm.dtype.float16_refused", "0.33.0", args(dtype="half"), on(H100)),
    Case("vllm.cache.gpu_memory_utilization", "0.10.0", args(gpu_memory_utilization=1.5), on(H100),
         refused="GPU memory utilization must be less than 1.0. Got 1.5."),
    Case("vllm.cache.cpu_offload_negative", "0.10.0", args(cpu_offload_gb=-1), on(H100),
         refused="CPU offload space must be non-negative, but got -1"),
    Case("vllm.cache.nvfp4_kv_with_mla", "0.25.0", args(kv_cache_dtype="nvfp4"), on(H100, tp=8),
         model="deepseek-v3", refused="nvfp4 KV cache is not supported with MLA"),
    Case("vllm.cache.nvfp4_kv_with_mla", "0.25.0", args(kv_cache_dtype="nvfp4"), on(H100, tp=2)),
    # config/parallel.py:1066-1077 (0.33.0): an artifact's CUDA_VISIBLE_DEVICES shows fewer devices than TP x PP
    Case("vllm.parallel.world_above_devices", "0.33.0", args(), replace(on(H100, tp=4, pp=2), devices=4),
         refused="World size (8) is larger than the number of available GPUs (4) in this node. If this is "
                 "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.",
         source="vllm/config/parallel.py:1071"),
    Case("vllm.parallel.world_above_devices", "0.12.0", args(), replace(on(H100, tp=4), devices=2),
         refused="Tensor parallel size (4) cannot be larger than the number of available GPUs (2).",
         source="vllm/config/parallel.py:564"),
    # DP replicas are not in the world size; the Ray executor and --nnodes place ranks beyond this node
    Case("vllm.parallel.world_above_devices", "0.33.0", args(), replace(on(H100, tp=4, dp=2), devices=4)),
    Case("vllm.parallel.world_above_devices", "0.33.0", args(distributed_executor_backend="ray"),
         replace(on(H100, tp=8), devices=4)),
    Case("vllm.parallel.world_above_devices", "0.33.0", args(nnodes=2), replace(on(H100, tp=8), devices=4)),
    # no CUDA_VISIBLE_DEVICES said: the placement check judges the machine's GPUs, this rule nothing
    Case("vllm.parallel.world_above_devices", "0.33.0", args(), on(H100, tp=8)),
]


def _id(c: Case) -> str:
    return f"{c.rule.removeprefix('vllm.')}-{c.version}-{'refused' if c.refused is not None else 'passes'}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = config_check(case.line, model_of(case.model), case.layout, Version(case.version))
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("vLLM") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert case.refused in r.message
    assert r.exception == case.exception
    assert r.release == case.version
    if case.source:
        assert r.source == case.source
    assert r.text("vLLM").startswith(f"vLLM {case.version} raises {case.exception}")


def test_every_rule_has_a_refusing_case() -> None:
    """Among the ``CASES`` of this module and of every ``test_vllm_config_checks_*.py`` beside it (each rule area's
    cases in its own module, the launch-mode rules judged from a parsed command line in ``_modes.py`` and
    ``_launch.py``): the modules the real-engine harness collects too."""
    modules = [importlib.import_module(path.stem)
               for path in sorted(Path(__file__).parent.glob("test_vllm_config_checks*.py"))]
    # every module-level list named ``*CASES``: ``CASES`` (the harness runs them), and the ones it cannot run, such
    # as ``ENV_CASES`` (the launch's environment variables; each item's ``.case``) or ``STORE_CASES`` (a model path
    # of its own)
    cases = [getattr(c, "case", c) for m in modules for name, value in vars(m).items()
             if name.endswith("CASES") and isinstance(value, list) for c in value]
    refusing = {c.rule for c in cases if getattr(c, "refused", None) is not None}
    assert refusing - set(FIELD_RULES) == set(RULES)  # pydantic's field rules are judged beside the ledger's


def test_a_release_between_listed_ones_is_read_in_the_nearest_below() -> None:
    judged = config_check(args(max_num_seqs=4096), qwen3_8b(), on(L4), Version("0.33.1"))
    (r,) = judged.refusals
    assert (r.release, r.asked) == ("0.33.0", "0.33.1")
    assert "(read in 0.33.0, the nearest listed release below it)" in r.text("vLLM")


def test_an_unknown_gpu_memory_leaves_the_default_batch_unjudged() -> None:
    """The default batch depends on the GPU's memory: with it unknown, the refusal is neither made nor guessed."""
    judged = config_check(args(max_num_seqs=4096), qwen3_8b(), Layout(compute_capability=(9, 0)), Version("0.33.0"))
    assert not judged.refusals
    assert any("the GPU's memory is unknown" in n for n in judged.not_judged)


@pytest.mark.parametrize(("version", "layout", "expect"), [
    ("0.8.0", on(L4), (True, 2048, 1024)),
    ("0.8.4", on(L4), (True, 2048, 256)),
    ("0.8.4", on(H100), (True, 8192, 1024)),
    ("0.8.5", on(A100), (True, 8192, 1024)),     # by memory, A100s included
    ("0.9.0", on(A100), (True, 2048, 256)),      # PR #17885 leaves A100s out
    ("0.28.0", Layout(compute_capability=(10, 0), gpu_name="NVIDIA B200", gpu_total_mib=183359), (True, 16384, 1024)),
])
def test_the_scheduler_defaults_by_release(version: str, layout: Layout, expect: tuple[bool, int, int]) -> None:
    """``EngineArgs._set_default_args_v1`` / ``get_batch_defaults`` read by hand in each release's
    ``engine/arg_utils.py`` (``vllm serve``: the OpenAI API server's usage context)."""
    s = scheduler(args(), qwen3_8b(), layout, Version(version), max_model_len=40960, v0=False, multimodal=False)
    assert (s.enable_chunked_prefill, s.max_num_batched_tokens, s.max_num_seqs) == expect


@pytest.mark.parametrize("version", ["0.8.5", "0.10.1", "0.11.0", "0.20.0", "0.33.0"])
@pytest.mark.parametrize("model", ["qwen3-8b", "gemma3-12b", "deepseek-v3"])
def test_the_release_defaults_refuse_nothing_and_leave_nothing_unsaid(version: str, model: str) -> None:
    """A line that sets nothing the rules read: no refusal, and no 'not judged' noise (the defaults of one
    release never refuse each other)."""
    judged = config_check(args(), model_of(model), on(H100, tp=8), Version(version))
    assert (judged.refusals, judged.not_judged) == ((), ())
