"""The calibration table: every engine startup log in ``tests/data/logs/{vllm,sglang,vllm-cpu}``,
two columns per log.

    python benchmarks/bench_calibration.py                  # the table
    python benchmarks/bench_calibration.py --write-ledger   # tests/data/calibration/ledger.json
    python benchmarks/bench_calibration.py --write-readme   # README's accuracy block, from the ledger

* **A, the engine's own figure -> tokens** (``FIGURE_CASES``): the memory the engine printed for the
  KV cache (vLLM "Available KV cache memory" / V0 ``kv_cache_size=`` / the CPU backend's "Explicitly
  set (X/..) GiB for KV cache"; SGLang's K + V size, or "Load weight end" avail mem and mem usage
  with ``mem_fraction_static``) through the engine's arithmetic: vLLM's blocks and KV cache groups
  (``engines/vllm/kv_groups.py``), SGLang's cell size and its one padded slot (``memory_pool.py``). Pure
  arithmetic: it must give the logged count for some figure that prints as the log's (each printed
  number is within 0.005 GiB of the truth), which pins the bytes per token per rank.
* **B, the pool from free memory and flags** (``CASES``): ``memory.pool.predict_pool`` with the
  reserves, on the GPUs, layout, fraction and length the log's header states; ``|error|`` of the
  predicted against the logged token count, median and worst.

A row's header (source, engine version, GPU, model, TP/PP, memory fraction, max_model_len, above
``---``) says which inputs are known; ``complete`` rows have all of them and are the ones held to the
band (``tests/memory/test_calibration.py``); the others are shown with what was assumed. The CPU logs have
no header: their inputs are their own "non-default args" line. Logs without a column say why
(``FIGURE_SKIPPED``, ``SKIPPED``).

Assumptions common to column B: the GPU was idle before launch, so NVML's free memory is its total
less ~500 MiB (driver reservation and CUDA context); NVML totals per GPU model are those of the
table ``GPU_TOTAL_MIB``, and the total CUDA reports is NVML's less ~450 MiB unless ``GPU_CUDA_TOTAL_MIB``
has the model's printed figure; the KV cache dtype is the model's (``auto``) unless the header says otherwise.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packaging.version import Version  # noqa: E402

from pytest_gpulayout.engines.llamacpp.log import parse_llamacpp_log  # noqa: E402
from pytest_gpulayout.engines.registry import ENGINES, log_grammars  # noqa: E402
from pytest_gpulayout.engines.sglang.engine import SGLANG  # noqa: E402
from pytest_gpulayout.engines.vllm.engine import VLLM  # noqa: E402
from pytest_gpulayout.engines.vllm.kv_groups import vllm_kv_cache, vllm_state_bytes  # noqa: E402
from pytest_gpulayout.launch.logparse import StartupLog, parse_log  # noqa: E402
from pytest_gpulayout.machine.facts import DRIVER_RESERVE_ESTIMATE_MIB, GIB, Gpu  # noqa: E402
from pytest_gpulayout.memory.communicators import TpLink  # noqa: E402
from pytest_gpulayout.memory.kv import kv_bytes_per_token_by_stage, kv_layer_bytes_per_token  # noqa: E402
from pytest_gpulayout.memory.pool import PoolPrediction, predict_pool  # noqa: E402
from pytest_gpulayout.memory.stages import stage_ranges  # noqa: E402
from pytest_gpulayout.model import catalog  # noqa: E402
from pytest_gpulayout.model.config import spec_from_config  # noqa: E402
from pytest_gpulayout.model.load import load_model  # noqa: E402
from pytest_gpulayout.model.spec import ModelSpec  # noqa: E402

LOGS = REPO / "tests" / "data" / "logs"
MODELS = REPO / "tests" / "data" / "models"

#: NVML ``memory.total`` (MiB) by GPU model, as ``nvidia-smi`` reports it.
GPU_TOTAL_MIB = {
    "NVIDIA H100 80GB HBM3": 81559,
    "NVIDIA A100-SXM4-80GB": 81920,
    "NVIDIA H200": 143771,
    "NVIDIA GeForce RTX 3090": 24576,
    "NVIDIA GeForce RTX 4090": 24564,
    "NVIDIA L4": 23034,
    "NVIDIA RTX A6000": 49140,
    # nvidia-smi "0MiB / 40960MiB" for NVIDIA A100-SXM4-40GB on current drivers (public nvidia-smi pastes;
    # older drivers printed 40536MiB for the same card)
    "NVIDIA A100-SXM4-40GB": 40960,
    # nvidia-smi "45397MiB /  46068MiB" for NVIDIA L40S (tim-roethig/ai-platform
    # platform/docs/qwen3_235b_on_8xl40s.md and ollama_vs_vllm.md, driver 565.57.01)
    "NVIDIA L40S": 46068,
    # "RTX PRO 6000 Blackwell Server Edition (595.84), UUID GPU-f07ea2df-..., 97,887 MiB total" (a host query
    # quoted in a public repository report, search-index file id 67160152436)
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": 97887,
}
#: The total CUDA reports (``cudaMemGetInfo`` / ``torch.cuda.mem_get_info()[1]``, what vLLM multiplies by
#: ``gpu_memory_utilization``), MiB, where a public source prints it; the others are NVML's total less
#: ``DRIVER_RESERVE_ESTIMATE_MIB``. A100 40GB: deviceQuery "Total amount of global memory: 40339 MBytes
#: (42298834944 bytes)" (NVIDIA A100-PCIE-40GB and A100-SXM4-40GB, CUDA 12.x drivers; e.g.
#: bottlerocket-os/bottlerocket#3873), a 621 MiB reservation, not 450. vllm/109's own hint agrees:
#: "increase --gpu-memory-utilization from 0.9000 to 0.9596" is ``round(0.9 + estimate / total_mem, 4)``
#: (0.19.1 ``v1/worker/gpu_worker.py determine_available_memory``) with the estimate printed as 2.35 GiB,
#: so total_mem is 39.31-39.55 GiB (40,256-40,496 MiB): 40,339 is inside, 40,960 - 450 = 40,510 is not.
GPU_CUDA_TOTAL_MIB = {
    "NVIDIA A100-SXM4-40GB": 40339,
}
#: How the logs' TP groups talk, by the GPU's name: "80GB HBM3" H100s, SXM A100s and H200s are the
#: NVLink (HGX) parts (the PCIe ones are named "H100 PCIe", "A100-PCIE", "H200 NVL"); a 4090 or an L4
#: has no NVLink, and the 3090 and A6000 logs are TP 1.
GPU_LINK = {
    "NVIDIA H100 80GB HBM3": TpLink.NVLINK,
    "NVIDIA A100-SXM4-80GB": TpLink.NVLINK,
    "NVIDIA H200": TpLink.NVLINK,
    "NVIDIA GeForce RTX 3090": TpLink.PCIE,
    "NVIDIA GeForce RTX 4090": TpLink.PCIE,
    "NVIDIA L4": TpLink.PCIE,
    "NVIDIA RTX A6000": TpLink.PCIE,
    "NVIDIA A100-SXM4-40GB": TpLink.NVLINK,
    # a PCIe card without NVLink (log 111: "Custom allreduce is disabled because it's not supported on
    # more than two PCIe-only GPUs")
    "NVIDIA L40S": TpLink.PCIE,
    # a PCIe card without NVLink (log 301's nvidia-smi topo -m: SYS between every pair)
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": TpLink.PCIE,
}
#: Free memory on an idle GPU, below NVML's total: the driver's reservation (which vLLM's total
#: leaves out: ``Gpu.cuda_total_mib``, 450 MiB where NVML did not say) and a little more.
IDLE_USED_MIB = 500


# ---------------------------------------------------------------------------------------------
# Models the logs name that the catalog does not bundle, derived from their public config.json
# ---------------------------------------------------------------------------------------------

def _qwen3_235b_fp8() -> ModelSpec:
    """Qwen/Qwen3-235B-A22B-FP8: the bundled bf16 config plus the FP8 checkpoint's 128x128 block
    quantization (its ``quantization_config`` on the Hub)."""
    cfg = dict(catalog.load_config(catalog.find("Qwen/Qwen3-235B-A22B") or "Qwen--Qwen3-235B-A22B"))
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                  "weight_block_size": [128, 128]}
    return spec_from_config(cfg, name="Qwen3-235B-A22B-FP8", source="derived:Qwen3-235B-A22B-FP8")


def _r1_distill_qwen_14b() -> ModelSpec:
    """deepseek-ai/DeepSeek-R1-Distill-Qwen-14B: a Qwen2.5-14B (48 layers, 40 heads, 8 KV heads)."""
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
           "intermediate_size": 13824, "num_attention_heads": 40, "num_key_value_heads": 8,
           "num_hidden_layers": 48, "vocab_size": 152064, "max_position_embeddings": 131072,
           "max_window_layers": 48, "sliding_window": 131072, "use_sliding_window": False,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    return spec_from_config(cfg, name="DeepSeek-R1-Distill-Qwen-14B", source="derived:R1-Distill-Qwen-14B")


MODEL_LOADERS: dict[str, Callable[[], ModelSpec]] = {
    "meta-llama/Llama-3.1-8B-Instruct": lambda: load_model("meta-llama/Llama-3.1-8B-Instruct"),
    "openai/gpt-oss-120b": lambda: load_model("openai/gpt-oss-120b"),
    "Qwen/Qwen3-235B-A22B-FP8": _qwen3_235b_fp8,
    "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8":
        lambda: load_model(str(MODELS / "llama-3.1-70b-w8a8")),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": _r1_distill_qwen_14b,
    "Qwen/QwQ-32B": lambda: load_model(str(MODELS / "qwq-32b")),
    "Qwen/Qwen3-14B": lambda: load_model(str(MODELS / "qwen3-14b")),
    "deepseek-ai/DeepSeek-V3": lambda: load_model("deepseek-ai/DeepSeek-V3"),
    "tiny-llama": lambda: load_model(str(MODELS / "tiny-llama")),
    "meta-llama/Llama-3.3-70B-Instruct": lambda: load_model("meta-llama/Llama-3.3-70B-Instruct"),
    "Qwen/Qwen3-8B": lambda: load_model("Qwen/Qwen3-8B"),
    # The 2507 Instruct FP8 re-releases: loaded from the bundled configs of Qwen/Qwen3-235B-A22B-FP8 and
    # Qwen/Qwen3-30B-A3B-FP8 (same layers, heads, experts and 128x128 FP8 blocks; the 2507 configs differ in
    # max_position_embeddings and rope_theta, which the logs' explicit max_model_len makes moot). No 2507
    # config.json was found in a source; log 111's "Model loading took 27.7183 GiB" per TP-8 rank checks the
    # weight geometry (see the ledger's predicted weights).
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": lambda: load_model(str(MODELS / "qwen3-235b-a22b-fp8")),
    "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8": lambda: load_model(str(MODELS / "qwen3-30b-a3b-fp8")),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": lambda: load_model(str(MODELS / "qwen3-next-80b-a3b-instruct")),
    # log sglang/301 names the FP8 checkpoint itself, whose bundled config the folder holds
    "Qwen/Qwen3-30B-A3B-FP8": lambda: load_model(str(MODELS / "qwen3-30b-a3b-fp8")),
    # The Qwen2.5-7B base checkpoint (logs 202-203): loaded from the bundled Qwen2.5-7B-Instruct config (same
    # 28 layers, 28/4 heads, 3584 hidden, 152064 vocab, untied embeddings; the base's config.json differs in
    # max_position_embeddings, which the logs' explicit max_model_len makes moot). No base config.json was
    # found in a source; the logs' "Model loading took 14.2717 GiB" (TP 1) / 7.1441 GiB (TP 2) check the weights.
    "Qwen/Qwen2.5-7B": lambda: load_model("Qwen/Qwen2.5-7B-Instruct"),
}


@dataclass(frozen=True)
class Case:
    """One log and the deployment its header describes.

    ``complete``: every input ``predict_pool`` needs is in the header (an engine *era* such as
    "V0 engine" counts where every version of that era gives the same prediction). Otherwise
    ``assumed`` says what was guessed, and the row is shown but not held to the band.
    """

    log: str                         # relative to tests/data/logs
    engine: str
    version: str                     # the version predicted for (the header's, or the era's)
    model: str                       # key of MODEL_LOADERS
    gpu: str                         # key of GPU_TOTAL_MIB
    tp: int
    pp: int
    memory_fraction: float | None    # None: the engine's default
    max_model_len: int | None
    complete: bool
    assumed: str = ""
    kv_cache_dtype: str = "auto"
    #: the memory model's rules were read or tuned while this log was in view (the calibration set);
    #: False: a log added after them, held out, that nobody tuned to
    fitted: bool = True
    #: a held-out log's error as first scored, pinned once a later rule moved it (one read after this log
    #: makes it ``fitted``; one read on other logs leaves it held out), so the record keeps what the rules
    #: gave on it unseen
    first_scored_pct: float | None = None
    #: launch flags the log states that are inputs of predict_pool (None / False: the engine's default)
    enforce_eager: bool = False
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_expert_parallel: bool = False


@dataclass(frozen=True)
class Skipped:
    """A log whose header does not say enough to predict from, and what is missing."""

    log: str
    engine: str
    why: str


CASES: tuple[Case, ...] = (
    Case("vllm/001.txt", "vllm", "0.6.4", "meta-llama/Llama-3.1-8B-Instruct", "NVIDIA GeForce RTX 3090",
         tp=1, pp=1, memory_fraction=0.90, max_model_len=20000, complete=True,
         assumed="V0 engine (0.6.x era, Dec 2024); every V0 release gives the same prediction"),
    Case("vllm/005.txt", "vllm", "0.9.2", "Qwen/Qwen3-235B-A22B-FP8", "NVIDIA H100 80GB HBM3",
         tp=4, pp=1, memory_fraction=None, max_model_len=None, complete=False,
         assumed="version unknown (July 2025: 0.9.2 assumed; 0.10.0 predicts 3 % more); "
                 "LMCacheConnectorV1 kv-transfer config is not an input of predict_pool"),
    Case("vllm/007.txt", "vllm", "0.7.0", "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8",
         "NVIDIA H100 80GB HBM3", tp=1, pp=1, memory_fraction=0.98, max_model_len=2048, complete=False,
         assumed="GPU unknown (80GB-class: H100 assumed; A100 80GB predicts 4 % more)"),
    Case("vllm/011.txt", "vllm", "0.10.1", "openai/gpt-oss-120b", "NVIDIA H100 80GB HBM3",
         tp=1, pp=1, memory_fraction=None, max_model_len=131072, complete=True),
    Case("vllm/023.txt", "vllm", "0.7.2", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
         "NVIDIA GeForce RTX 4090", tp=2, pp=1, memory_fraction=0.98, max_model_len=131072, complete=True,
         assumed="V0 engine (0.7.x era, Feb 2025); every 0.7.x release gives the same prediction "
                 "(0.5.3-0.6.4 chunk 512 tokens and count other tenants: -2.3 %; before 0.5.3 the "
                 "profile run batches all 131,072 tokens and no pool is predicted)"),
    # held-out logs (added after the rules; nobody tuned to them)
    Case("vllm/101.txt", "vllm", "0.10.2", "Qwen/Qwen3-14B", "NVIDIA A100-SXM4-40GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=32768, complete=False, fitted=False,
         assumed="gpu_memory_utilization not stated (default 0.9 assumed; the reporter says the memory was "
                 "'set'); A100 40GB form factor not stated (SXM4 assumed, PCIe has the same 40960 MiB and 40,339 MiB "
                 "CUDA total); "
                 "the LMCache kv-transfer connector is not an input of predict_pool"),
    Case("vllm/102.txt", "vllm", "0.11.0", "openai/gpt-oss-120b", "NVIDIA H100 80GB HBM3",
         tp=1, pp=1, memory_fraction=0.95, max_model_len=131072, complete=False, fitted=False,
         max_num_batched_tokens=1024,
         assumed="version unknown (Oct 31 2025: 0.11.0 assumed); H100 variant not stated (80GB HBM3 assumed)"),
    # round 2: repository files that keep the command (or its non-default args) next to the log.
    # 107-110 were held out, then used: the V1 sampler warm-up rule (the dummy forward's hidden states held
    # through it; 0.17+'s Triton path at 14 B per logit and its num_sm-row buffer: engines/vllm/budget.py)
    # and the A100 40GB's CUDA total (GPU_CUDA_TOTAL_MIB) were read in the 0.9.2 / 0.17.0 / 0.19.1 wheels
    # and a deviceQuery after these logs showed the gap (109 +2.8 %, 110 +1.3 %, 107 = 108 predicted
    # where the engine gave 336 tokens less at 8192), so they count as fitted now.
    Case("vllm/107.txt", "vllm", "0.9.2", "Qwen/Qwen3-8B", "NVIDIA A100-SXM4-40GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=40960, complete=True, fitted=True, first_scored_pct=0.71),
    Case("vllm/108.txt", "vllm", "0.9.2", "Qwen/Qwen3-8B", "NVIDIA A100-SXM4-40GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=40960, complete=True, fitted=True, first_scored_pct=0.95,
         max_num_batched_tokens=8192),
    Case("vllm/109.txt", "vllm", "0.19.1", "Qwen/Qwen3-8B", "NVIDIA A100-SXM4-40GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=40960, complete=True, fitted=True, first_scored_pct=2.84),
    Case("vllm/110.txt", "vllm", "0.19.1", "Qwen/Qwen3-8B", "NVIDIA A100-SXM4-40GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=40960, complete=True, fitted=True, first_scored_pct=1.3,
         max_num_batched_tokens=8192),
    Case("vllm/111.txt", "vllm", "0.10.2", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "NVIDIA L40S",
         tp=8, pp=1, memory_fraction=0.90, max_model_len=32768, complete=True, fitted=False, first_scored_pct=0.24,
         enable_expert_parallel=True),
    Case("vllm/112.txt", "vllm", "0.10.2", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "NVIDIA L40S",
         tp=2, pp=1, memory_fraction=0.95, max_model_len=32768, complete=True, fitted=False, first_scored_pct=0.41,
         enable_expert_parallel=True),
    # round 3 (logs 201-): repository files found by exact engine-config strings
    # fitted: vLLM's hybrid layout (engines/vllm/kv_groups.py hybrid_layout: 544-token block, state pages,
    # 1 + 3 groups) was read in the wheel after this held-out log was scored (+305 % before)
    Case("vllm/201.txt", "vllm", "0.10.2", "Qwen/Qwen3-Next-80B-A3B-Instruct", "NVIDIA H200",
         tp=2, pp=1, memory_fraction=None, max_model_len=262144, complete=True, fitted=True,
         first_scored_pct=304.9),
    Case("vllm/202.txt", "vllm", "0.8.4", "Qwen/Qwen2.5-7B", "NVIDIA GeForce RTX 3090",
         tp=1, pp=1, memory_fraction=None, max_model_len=4096, complete=True, fitted=False, first_scored_pct=0.49,
         max_num_batched_tokens=8192),
    Case("vllm/203.txt", "vllm", "0.8.4", "Qwen/Qwen2.5-7B", "NVIDIA GeForce RTX 3090",
         tp=2, pp=1, memory_fraction=0.80, max_model_len=4096, complete=True, fitted=False, first_scored_pct=1.39,
         max_num_batched_tokens=8192),
    Case("vllm/204.txt", "vllm", "0.8.4", "Qwen/Qwen2.5-7B", "NVIDIA GeForce RTX 3090",
         tp=2, pp=1, memory_fraction=0.80, max_model_len=4096, complete=False, fitted=False,
         max_num_batched_tokens=8192,
         assumed="model deepseek-ai/DeepSeek-R1-Distill-Qwen-7B: its config.json was not found in a source, "
                 "predicted with the Qwen2.5-7B geometry (the log's 7.1441 GiB per rank matches log 203's)"),
    # round 4 (logs 301-): held out, vLLM 0.20+ / SGLang / hybrids, found by exact engine strings
    Case("vllm/301.txt", "vllm", "0.27.1", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
         "NVIDIA RTX PRO 6000 Blackwell Server Edition", tp=4, pp=1, memory_fraction=0.90, max_model_len=32768,
         complete=False, fitted=False, max_num_seqs=32,
         assumed="VLLM_USE_DEEP_GEMM=0 (vLLM's own block-FP8 kernels instead of DeepGEMM, which crashed on sm_120) "
                 "is not an input of predict_pool"),
    Case("vllm/302.txt", "vllm", "0.31.0", "meta-llama/Llama-3.1-8B-Instruct", "NVIDIA A100-SXM4-80GB",
         tp=1, pp=1, memory_fraction=None, max_model_len=131072, complete=True, fitted=False,
         assumed="A100 80GB form factor not stated (SXM4 taken; the PCIe card has the same 81,920 MiB and 108 SMs, "
                 "and at TP 1 the link does not enter)"),
    Case("sglang/001.txt", "sglang", "0.4.9", "Qwen/Qwen3-235B-A22B-FP8", "NVIDIA H100 80GB HBM3",
         tp=4, pp=1, memory_fraction=0.93, max_model_len=None, complete=True,
         assumed="version unknown, but with mem_fraction_static given SGLang's pool does not depend on it; "
                 "PP 1 (one 4-GPU box at TP 4)"),
    Case("sglang/013.txt", "sglang", "0.4.3.post4", "Qwen/QwQ-32B", "NVIDIA L4",
         tp=4, pp=1, memory_fraction=0.85, max_model_len=131072, complete=True),
    Case("sglang/015.txt", "sglang", "0.4.6", "Qwen/Qwen3-14B", "NVIDIA RTX A6000",
         tp=1, pp=1, memory_fraction=None, max_model_len=None, complete=False,
         assumed="GPU unknown (48GB-class from the log's 19.67 + 27.57 GB: RTX A6000 assumed); "
                 "version unknown (~0.4.6) so the default mem_fraction_static (0.88) is a guess"),
    # held out: added after the rules, nobody tuned to them
    Case("sglang/101.txt", "sglang", "0.5.23", "Qwen/Qwen3-14B", "NVIDIA GeForce RTX 4090",
         tp=4, pp=1, memory_fraction=0.80, max_model_len=40960, complete=True, fitted=False,
         assumed="release unknown (SGLang main at commit ebaf86d4, June 2026); with mem_fraction_static "
                 "given, 0.4.9, 0.5.3, 0.5.10 and 0.5.23 all predict the same pool"),
    Case("sglang/301.txt", "sglang", "0.5.23", "Qwen/Qwen3-30B-A3B-FP8", "NVIDIA H100 80GB HBM3",
         tp=1, pp=1, memory_fraction=0.83, max_model_len=40960, complete=True, fitted=False,
         assumed="release unknown (an SGLang image of August 2026): with mem_fraction_static given the pool is the "
                 "static share less weights and communicators, 0.5.23 rules taken; attention_backend='triton' and the "
                 "build's prefill/decode CUDA-graph config sit outside that share"),
    Case("sglang/102.txt", "sglang", "0.4.2", "meta-llama/Llama-3.1-8B-Instruct", "NVIDIA H100 80GB HBM3",
         tp=1, pp=1, memory_fraction=0.88, max_model_len=131072, complete=False, fitted=False,
         assumed="GPU unknown (80GB class, docs build machine): H100 80GB assumed (A100-SXM4-80GB predicts "
                 "+0.8 %); SGLang main of 2025-01-23, 0.4.2 assumed (0.4.1.post7-0.4.3 predict the same)"),
    Case("sglang/103.txt", "sglang", "0.5.4", "meta-llama/Llama-3.3-70B-Instruct", "NVIDIA H200",
         tp=8, pp=1, memory_fraction=None, max_model_len=None, complete=False, fitted=False,
         assumed="GPU unknown (141GB class: H200 assumed); mem_fraction_static not retrieved, the default of "
                 "SGLang main mid-Oct 2025 assumed (0.5.4 rules: 0.897); --enable-piecewise-cuda-graph is not "
                 "an input of predict_pool"),
)

SKIPPED: tuple[Skipped, ...] = (
    Skipped("vllm/003.txt", "vllm", "model, GPU and memory fraction unknown"),
    Skipped("vllm/009.txt", "vllm", "GPU, TP and memory fraction unknown"),
    Skipped("vllm/013.txt", "vllm", "no KV pool line (the paste ends before it)"),
    Skipped("vllm/015.txt", "vllm", "model and GPU unknown"),
    Skipped("vllm/017.txt", "vllm", "model and GPU unknown (multi-node)"),
    Skipped("vllm/019.txt", "vllm", "Qwen3.6-27B-AutoRound (hybrid GDN, int4) not in the catalog"),
    Skipped("vllm/021.txt", "vllm", "Qwen3.8-27B-FP8 (hybrid) not in the catalog; version unknown"),
    Skipped("vllm/025.txt", "vllm", "DeepSeek-V4-Flash not in the catalog; no token count"),
    Skipped("vllm/027.txt", "vllm", "GPU count, TP and memory fraction unknown; no token count"),
    Skipped("vllm/103.txt", "vllm", "Meta-Llama-3.1-405B-Instruct-FP8 config (fbgemm_fp8) not found in a source; "
                                    "version (0.5.3 or 0.5.3.post1) and memory fraction not stated"),
    Skipped("vllm/104.txt", "vllm", "A40-48Q is a vGPU profile (its NVML total is not known here); "
                                    "Qwen2.5-72B-Instruct-GPTQ-Int4 config not bundled"),
    Skipped("vllm/105.txt", "vllm", "model checkpoint unknown (5.20 GB of weights: a quantized Qwen2.5-7B); "
                                    "version unknown (0.7.x); RTX 4060 Laptop under WSL2"),
    Skipped("vllm/106.txt", "vllm", "no token count (no '# GPU blocks' line); Qwen2.5-32B-Instruct-AWQ config "
                                    "not bundled"),
    Skipped("sglang/003.txt", "sglang", "Qwen3-Omni not in the catalog; GPU unknown"),
    Skipped("sglang/005.txt", "sglang", "model and GPU unknown"),
    Skipped("sglang/007.txt", "sglang", "start-up error, no KV pool"),
    Skipped("sglang/009.txt", "sglang", "GPU unknown; this SGLang did not log the MLA pool size"),
    Skipped("sglang/011.txt", "sglang", "pool capped by --max-total-tokens 10000, not by memory"),
    # round 5 (logs 401-): attention-DP runs (--dp-size N --enable-dp-attention)
    Skipped("sglang/401.txt", "sglang", "AMD MI300-class GPU (ROCm) of unstated memory; mem_fraction_static and the "
                                        "'Load weight end' line not in the retrieved excerpt; --enable-ep-moe"),
    Skipped("sglang/402.txt", "sglang", "GPU and mem_fraction_static of this run not stated; a two-node PD decode server "
                                        "with DeepEP whose 105.59 GB of weights per rank are not what TP 16 / EP 16 gives"),
)


# ---------------------------------------------------------------------------------------------
# Column A: the engine's own available-KV figure -> tokens (pure arithmetic)
# ---------------------------------------------------------------------------------------------

#: Every figure these logs print is rounded to two decimals (vLLM ``%.2f GiB`` / ``round(b, 2)``,
#: SGLang ``{bytes / GB:.2f} GB`` with ``GB = 1024**3``), so the true figure lies within half a unit
#: of the last digit: 0.005 GiB per printed number (K + V: two numbers, 0.01 GiB).
PRINT_HALF_UNIT_GIB = 0.005

AVAILABLE_RE = re.compile(r"Explicitly set \(([0-9.]+)/[0-9.]+\) GiB for KV cache")


@dataclass(frozen=True)
class FigureCase:
    """A log whose engine printed the memory it gave the KV cache, and what turns it into tokens.

    ``figure``: ``available`` (vLLM's "Available KV cache memory" / V0 ``kv_cache_size=`` / CPU
    "Explicitly set (X/..) GiB for KV cache"), ``kv_size`` (SGLang's "K size" + "V size", or the MLA
    "KV size"), ``avail_mem`` (SGLang's "Load weight end. avail mem=A, mem usage=U" with the log's
    ``mem_fraction_static``). ``all_workers``: the log shows the figure of every worker that sets the
    pool (one GPU, or every rank printed the same); otherwise it is one rank's figure of several and
    the pool (the MIN over ranks) can only be at most what it gives.
    """

    log: str
    engine: str
    version: str
    model: str                     # key of MODEL_LOADERS
    tp: int
    pp: int
    block_size: int                # vLLM's block (CPU backend 128, ``platforms/cpu.py``); SGLang 1
    max_model_len: int
    figure: str
    all_workers: bool = True
    kv_cache_dtype: str = "auto"
    memory_fraction: float | None = None
    why: str = ""


@dataclass(frozen=True)
class FigureRow:
    """Column A for one log: the tokens the printed figure gives, within the printing's rounding."""

    case: FigureCase
    figure_gib: float
    bytes_per_token: int           # per rank (the most loaded stage)
    tokens: int                    # from the printed figure
    tokens_lo: int                 # from figure - half a unit
    tokens_hi: int                 # from figure + half a unit
    logged: int | None             # the engine's token count (None: it refused to start)

    @property
    def exact(self) -> bool:
        """The logged count is what the arithmetic gives from some figure that prints as the log's."""
        if self.logged is None:
            return self.tokens_hi == 0
        if self.case.all_workers:
            return self.tokens_lo <= self.logged <= self.tokens_hi
        return self.logged <= self.tokens_hi

    @property
    def bound_pct(self) -> float:
        """Half the width of the rounding interval, in % of the logged count."""
        base = self.logged or self.tokens or 1
        return 100 * (self.tokens_hi - self.tokens_lo) / 2 / base


FIGURE_CASES: tuple[FigureCase, ...] = (
    FigureCase("vllm/001.txt", "vllm", "0.6.4", "meta-llama/Llama-3.1-8B-Instruct", tp=1, pp=1, block_size=16,
               max_model_len=20000, figure="available"),
    FigureCase("vllm/005.txt", "vllm", "0.9.2", "Qwen/Qwen3-235B-A22B-FP8", tp=4, pp=1, block_size=16,
               max_model_len=40960, figure="available", all_workers=False,
               why="TP 4: each worker logs both lines (0.9.2 core.py builds one KV config per worker, "
                   "then takes the MIN); the paste keeps one of each, so the pool is at most this"),
    FigureCase("vllm/011.txt", "vllm", "0.10.1", "openai/gpt-oss-120b", tp=1, pp=1, block_size=16,
               max_model_len=131072, figure="available", why="negative: the engine refused to start"),
    FigureCase("vllm/101.txt", "vllm", "0.10.2", "Qwen/Qwen3-14B", tp=1, pp=1, block_size=16,
               max_model_len=32768, figure="available"),
    FigureCase("vllm/107.txt", "vllm", "0.9.2", "Qwen/Qwen3-8B", tp=1, pp=1, block_size=16,
               max_model_len=40960, figure="available"),
    FigureCase("vllm/108.txt", "vllm", "0.9.2", "Qwen/Qwen3-8B", tp=1, pp=1, block_size=16,
               max_model_len=40960, figure="available"),
    FigureCase("vllm/109.txt", "vllm", "0.19.1", "Qwen/Qwen3-8B", tp=1, pp=1, block_size=16,
               max_model_len=40960, figure="available"),
    FigureCase("vllm/110.txt", "vllm", "0.19.1", "Qwen/Qwen3-8B", tp=1, pp=1, block_size=16,
               max_model_len=40960, figure="available"),
    FigureCase("vllm/111.txt", "vllm", "0.10.2", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", tp=8, pp=1,
               block_size=16, max_model_len=32768, figure="available"),
    FigureCase("vllm/112.txt", "vllm", "0.10.2", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", tp=2, pp=1,
               block_size=16, max_model_len=32768, figure="available", all_workers=False,
               why="TP 2: the paste keeps worker TP1's figure and one of the two workers' token lines"),
    FigureCase("vllm/201.txt", "vllm", "0.10.2", "Qwen/Qwen3-Next-80B-A3B-Instruct", tp=2, pp=1, block_size=16,
               max_model_len=262144, figure="available",
               why="hybrid Gated DeltaNet: 544-token attention block sharing its page with the DeltaNet state "
                   "(kv_groups.hybrid_layout)"),
    FigureCase("vllm/301.txt", "vllm", "0.27.1", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", tp=4, pp=1,
               block_size=16, max_model_len=32768, figure="available",
               why="the figure is each worker's 'Current kv cache memory in use is 27.85 GiB' (all four print it)"),
    FigureCase("vllm/302.txt", "vllm", "0.31.0", "meta-llama/Llama-3.1-8B-Instruct", tp=1, pp=1, block_size=16,
               max_model_len=131072, figure="available"),
    FigureCase("vllm-cpu/vllm-tiny.log", "vllm", "0.32.0", "tiny-llama", tp=1, pp=1, block_size=128,
               max_model_len=512, figure="available"),
    FigureCase("vllm-cpu/vllm-tp2.log", "vllm", "0.32.0", "tiny-llama", tp=2, pp=1, block_size=128,
               max_model_len=512, figure="available"),
    FigureCase("vllm-cpu/vllm-pp2.log", "vllm", "0.32.0", "tiny-llama", tp=1, pp=2, block_size=128,
               max_model_len=512, figure="available"),
    FigureCase("vllm-cpu/vllm-dp2.log", "vllm", "0.32.0", "tiny-llama", tp=1, pp=1, block_size=128,
               max_model_len=512, figure="available", why="DP 2: two engines, each its own pool"),
    FigureCase("vllm-cpu/vllm-long-max-model-len-allowed.log", "vllm", "0.32.0", "tiny-llama", tp=1, pp=1,
               block_size=128, max_model_len=4096, figure="available"),
    FigureCase("sglang/001.txt", "sglang", "0.4.9", "Qwen/Qwen3-235B-A22B-FP8", tp=4, pp=1, block_size=1,
               max_model_len=40960, figure="kv_size"),
    FigureCase("sglang/011.txt", "sglang", "0.5.8", "deepseek-ai/DeepSeek-V3", tp=2, pp=1, block_size=1,
               max_model_len=163840, figure="kv_size", why="MLA latent cache; the pool is capped by "
                                                         "--max-total-tokens, the arithmetic still holds"),
    FigureCase("sglang/013.txt", "sglang", "0.4.3.post4", "Qwen/QwQ-32B", tp=4, pp=1, block_size=1,
               max_model_len=131072, figure="kv_size"),
    FigureCase("sglang/013.txt", "sglang", "0.4.3.post4", "Qwen/QwQ-32B", tp=4, pp=1, block_size=1,
               max_model_len=131072, figure="avail_mem", memory_fraction=0.85),
    FigureCase("sglang/015.txt", "sglang", "0.4.6", "Qwen/Qwen3-14B", tp=1, pp=1, block_size=1,
               max_model_len=40960, figure="kv_size"),
    FigureCase("sglang/101.txt", "sglang", "0.5.23", "Qwen/Qwen3-14B", tp=4, pp=1, block_size=1,
               max_model_len=40960, figure="kv_size"),
    FigureCase("sglang/101.txt", "sglang", "0.5.23", "Qwen/Qwen3-14B", tp=4, pp=1, block_size=1,
               max_model_len=40960, figure="avail_mem", memory_fraction=0.80),
    FigureCase("sglang/301.txt", "sglang", "0.5.23", "Qwen/Qwen3-30B-A3B-FP8", tp=1, pp=1, block_size=1,
               max_model_len=40960, figure="kv_size"),
    # no avail_mem row for sglang/301: "Load weight end" avail mem 49.33 / usage 29.15 at 0.83 leaves 35.99 GiB
    # (393,034-393,143 tokens) where the build allocated 392,920; what this 2026 build also takes from the
    # static share is not known here
    FigureCase("sglang/102.txt", "sglang", "0.4.2", "meta-llama/Llama-3.1-8B-Instruct", tp=1, pp=1, block_size=1,
               max_model_len=131072, figure="kv_size"),
    FigureCase("sglang/103.txt", "sglang", "0.5.4", "meta-llama/Llama-3.3-70B-Instruct", tp=8, pp=1,
               block_size=1, max_model_len=131072, figure="kv_size", all_workers=False,
               why="TP 8: the retrieved paste shows the KV line of 4 ranks of 8 (all 2,795,207)"),
    # attention DP: the MLA latent is one cell per token on every rank, so DP attention leaves the cell as it is
    # (kv heads follow attn_tp = tp // dp, and MLA has one); the pool is the MIN over the TP group
    FigureCase("sglang/401.txt", "sglang", "0.4.6.post5", "deepseek-ai/DeepSeek-V3", tp=8, pp=1, block_size=1,
               max_model_len=163840, figure="kv_size", all_workers=False,
               why="TP 8 with attention DP 8: the retrieved excerpt shows the KV line of rank DP7 TP7 only; "
                   "DeepSeek-R1 has DeepSeek-V3's geometry"),
    FigureCase("sglang/402.txt", "sglang", "0.4.6", "deepseek-ai/DeepSeek-V3", tp=16, pp=1, block_size=1,
               max_model_len=4096, figure="kv_size", all_workers=False,
               why="TP 16 with attention DP 16: the excerpt shows the KV line of 4 ranks of 16 (all 161,488); "
                   "release unknown (the cell does not depend on it)"),
)

#: Logs with no column A, and why (the figure is not printed, or what turns it into tokens is unknown).
FIGURE_SKIPPED: dict[str, str] = {
    "vllm/003.txt": "no available-KV figure; model unknown",
    "vllm/007.txt": "no available-KV figure (early V1 logged only '# GPU blocks')",
    "vllm/009.txt": "no available-KV figure; model checkpoint and TP unknown",
    "vllm/013.txt": "the paste ends before the KV lines",
    "vllm/015.txt": "model unknown (10.55 GiB / 230,528 tokens = 49,140 B per token of some model)",
    "vllm/017.txt": "no available-KV figure; model unknown",
    "vllm/019.txt": "Qwen3.6-27B-AutoRound config not bundled",
    "vllm/021.txt": "no available-KV figure; Qwen3.8-27B-FP8 config not bundled",
    "vllm/023.txt": "no available-KV figure (V0 error line only)",
    "vllm/025.txt": "no token count; DeepSeek-V4-Flash config not bundled",
    "vllm/027.txt": "no token count (start-up error); model checkpoint unknown",
    "vllm/102.txt": "refused to start with a positive figure (1.71 GiB): the error is the max-length check, "
                    "whose estimated length the paste cut off; no token count",
    "vllm/103.txt": "no available-KV figure (this V0 release logged none); 405B-FP8 config not bundled",
    "vllm/104.txt": "Qwen2.5-72B-Instruct-GPTQ-Int4 config not bundled",
    "vllm/105.txt": "negative figure with an unknown checkpoint",
    "vllm/106.txt": "no token count to check the figure against",
    "vllm-cpu/vllm-long-max-model-len.log": "refused before the KV cache (max_model_len check)",
    "vllm-cpu/vllm-tp3.log": "refused before the KV cache (8 attention heads do not divide by TP 3)",
    "vllm-cpu/vllm-tp2-worker-fp8-block.log": "refused while loading (gate/up width 192 not divisible by block_n 128)",
    "vllm-cpu/vllm-tp2-worker-fp8-kernel.log": "refused while loading (a worker failed to start)",
    "vllm/202.txt": "no available-KV figure (0.8.4 logged none at INFO)",
    "vllm/203.txt": "no available-KV figure (0.8.4 logged none at INFO)",
    "vllm/204.txt": "no available-KV figure (0.8.4 logged none at INFO)",
    "sglang/003.txt": "Qwen3-Omni-30B-A3B config not bundled",
    "sglang/005.txt": "no K/V size line; model unknown",
    "sglang/007.txt": "start-up error, no KV pool",
    "sglang/009.txt": "this SGLang did not log the MLA pool; GPU unknown",
}


def _vllm_tokens(model: ModelSpec, c: FigureCase, budget: int) -> tuple[int, int]:
    """vLLM's token count for ``budget`` bytes per worker: the KV cache groups of engines/vllm/kv_groups.py
    (one group for these models: ``budget // (page x layers) x block``), MIN over PP stages."""
    version = Version(c.version)
    layer = kv_layer_bytes_per_token(model, tp=c.tp, kv_cache_dtype=c.kv_cache_dtype)
    per_stage = kv_bytes_per_token_by_stage(model, engine=VLLM.memory, tp=c.tp, pp=c.pp,
                                            kv_cache_dtype=c.kv_cache_dtype, version=version)
    states = vllm_state_bytes(model, c.tp, version)
    kind = model.linear_state.kind if model.linear_state else None
    tokens = []
    for r in stage_ranges(model.num_hidden_layers, c.pp, VLLM.memory, version=version):
        cache = vllm_kv_cache(version, kinds=[model.layer_kinds[i] for i in r], page_bytes=layer * c.block_size,
                              block_size=c.block_size, budget_bytes=budget, max_model_len=c.max_model_len,
                              max_num_batched_tokens=8192, pp=c.pp, sliding_window=model.sliding_window,
                              chunk_size=model.attention_chunk_size, state_bytes=[states[i] for i in r],
                              is_mla=model.is_mla, state_kind=kind)
        tokens.append(cache.logged_tokens)
    return min(tokens), max(per_stage)


def _sglang_cell(model: ModelSpec, c: FigureCase) -> int:
    """SGLang's cell size: ``kv_heads_per_rank x head_dim x layers x 2 x bytes`` (MLA: the latent,
    ``(kv_lora_rank + qk_rope_head_dim) x layers x bytes``); ``model_runner.profile_max_num_token``."""
    return max(kv_bytes_per_token_by_stage(model, engine=SGLANG.memory, tp=c.tp, pp=c.pp,
                                           kv_cache_dtype=c.kv_cache_dtype))


def figure_row(c: FigureCase) -> FigureRow:
    """Column A for ``c``: the engine's figure through the engine's own arithmetic."""
    model = MODEL_LOADERS[c.model]()
    body = log_body(c.log)
    log = parse_log(body, log_grammars(c.engine))
    half = PRINT_HALF_UNIT_GIB
    if c.engine == "vllm":
        m = AVAILABLE_RE.search(body)
        gib = float(m.group(1)) if m else log.available_kv_gib
        assert gib is not None, f"{c.log}: no available-KV figure"

        def tokens_of(g: float) -> int:
            return _vllm_tokens(model, c, int(g * GIB))[0] if g > 0 else 0
        bpt = _vllm_tokens(model, c, 0)[1]
    elif c.figure == "kv_size":
        assert log.available_kv_gib is not None, f"{c.log}: no K/V size"
        gib = log.available_kv_gib
        cell = bpt = _sglang_cell(model, c)
        if not model.is_mla:
            half = 2 * PRINT_HALF_UNIT_GIB      # K and V are printed (and rounded) separately

        def tokens_of(g: float) -> int:
            # memory_pool.py: each layer's buffer holds size + 1 slots (slot 0 takes padded writes)
            return max(0, math.floor(g * GIB / cell) - 1)
    else:  # avail_mem: rest = avail - (avail + usage) x (1 - f) = avail x f - usage x (1 - f)
        m = re.search(r"Load weight end\..*?avail mem=([0-9.]+) GB, mem usage=([0-9.]+) GB", body)
        assert m and c.memory_fraction is not None, f"{c.log}: no 'Load weight end' figures"
        avail, usage, f = float(m.group(1)), float(m.group(2)), c.memory_fraction
        gib = avail * f - usage * (1 - f)       # its rounding: 0.005 x f + 0.005 x (1 - f) = 0.005
        cell = bpt = _sglang_cell(model, c)

        def tokens_of(g: float) -> int:
            return max(0, int(g * GIB // cell))
    logged = min(log.kv_tokens_all) if log.kv_tokens_all else None
    return FigureRow(c, gib, bpt, tokens_of(gib), tokens_of(gib - half), tokens_of(gib + half), logged)


@dataclass(frozen=True)
class Row:
    """A case's prediction next to what its log reports."""

    case: Case
    prediction: PoolPrediction
    logged: StartupLog

    @property
    def logged_tokens(self) -> int | None:
        """The pool the engine served from; where the log only gives ``# GPU blocks`` (and no concurrency line
        to infer the block from), blocks x the block the prediction used (the engine's default for the
        release and platform: 16 on CUDA, ``vllm/config.py`` ``CacheConfig``)."""
        if self.logged.kv_tokens is not None:
            return self.logged.kv_tokens
        if self.logged.gpu_blocks is not None:
            return self.logged.gpu_blocks * self.prediction.block_size
        return None

    @property
    def ratio(self) -> float | None:
        """``logged / predicted``: below 1 the prediction promised more than the engine gave."""
        logged = self.logged_tokens
        if logged is None or not self.prediction.kv_tokens:
            return None
        return logged / self.prediction.kv_tokens


def log_body(log: str) -> str:
    """The log text below the header (``---`` line)."""
    text = (LOGS / log).read_text(encoding="utf-8")
    head, sep, body = text.partition("\n---\n")
    return body if sep else text


def log_header(log: str) -> dict[str, str]:
    """The header's ``key: value`` lines."""
    text = (LOGS / log).read_text(encoding="utf-8")
    head = text.partition("\n---\n")[0]
    out: dict[str, str] = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def idle_gpus(name: str, count: int) -> list[Gpu]:
    total = GPU_TOTAL_MIB[name]
    cuda = GPU_CUDA_TOTAL_MIB.get(name)
    if cuda is None:
        return [Gpu(i, name=name, memory_total_mib=total, memory_free_mib=total - IDLE_USED_MIB)
                for i in range(count)]
    # the reservation as NVML's v2 struct would give it, and the same idle margin below CUDA's total
    idle_free = cuda - (IDLE_USED_MIB - DRIVER_RESERVE_ESTIMATE_MIB)
    return [Gpu(i, name=name, memory_total_mib=total, memory_free_mib=idle_free, memory_reserved_mib=total - cuda)
            for i in range(count)]


def measure(case: Case) -> Row:
    """Predict ``case`` and parse its log."""
    model = MODEL_LOADERS[case.model]()
    prediction = predict_pool(model, engine=ENGINES[case.engine].memory, engine_version=case.version,
                              tp=case.tp, pp=case.pp,
                              gpus=idle_gpus(case.gpu, case.tp * case.pp), max_model_len=case.max_model_len,
                              memory_fraction=case.memory_fraction, kv_cache_dtype=case.kv_cache_dtype,
                              link=GPU_LINK[case.gpu], enforce_eager=case.enforce_eager,
                              max_num_batched_tokens=case.max_num_batched_tokens, max_num_seqs=case.max_num_seqs,
                              enable_expert_parallel=case.enable_expert_parallel)
    return Row(case, prediction, parse_log(log_body(case.log), log_grammars(case.engine)))


def _fmt(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


#: Logs no pool can be predicted for from free memory and flags, besides ``SKIPPED`` (whose header
#: lacks an input): the CPU backend's pool is the ``VLLM_CPU_KVCACHE_SPACE`` flag itself.
CPU_NOT_PREDICTED = "CPU backend: the pool is the VLLM_CPU_KVCACHE_SPACE flag (1 GiB), not sized from memory"


def all_logs() -> list[str]:
    """Every engine startup log kept under tests/data/logs (vLLM, SGLang, vLLM's CPU backend)."""
    out = []
    for sub in ("vllm", "sglang", "vllm-cpu"):
        out += sorted(f"{sub}/{p.name}" for p in (LOGS / sub).iterdir() if p.suffix in (".txt", ".log"))
    return out


def error_pct(row: Row) -> float | None:
    """Column B: ``predicted / logged - 1`` in % (positive: the prediction promised more)."""
    logged = row.logged_tokens
    if not logged:
        return None
    return 100 * (row.prediction.kv_tokens / logged - 1)


@dataclass(frozen=True)
class Summary:
    """Median and worst ``|error|`` of column B over a set of rows."""

    n: int
    median_pct: float
    worst_pct: float
    worst_log: str


def summarize(rows: list[Row]) -> Summary | None:
    errs = [(abs(e), r.case.log) for r in rows if (e := error_pct(r)) is not None]
    if not errs:
        return None
    worst = max(errs)
    return Summary(len(errs), statistics.median(e for e, _ in errs), worst[0], worst[1])


def render(rows: list[Row], figures: list[FigureRow]) -> str:
    by_log = {r.case.log: r for r in rows}
    figs: dict[str, list[FigureRow]] = {}
    for f in figures:
        figs.setdefault(f.case.log, []).append(f)
    skipped = {s.log: s.why for s in SKIPPED}
    lines = [f"{'log':44} {'model':28} {'A: figure -> tokens [rounding]':44} {'logged':>10}  A    "
             f"{'B: predicted':>12} {'B error':>8}  complete"]
    for log in all_logs():
        model = ""
        a_text, a_ok = "-", ""
        fs = figs.get(log, [])
        if fs:
            model = fs[0].case.model
            parts = []
            for f in fs:
                unit = {"available": "GiB", "kv_size": "GiB K+V", "avail_mem": "GiB rest"}[f.case.figure]
                parts.append(f"{f.figure_gib:.2f} {unit} -> {f.tokens:,} [{f.tokens_lo:,}-{f.tokens_hi:,}]"
                             if f.tokens_hi else f"{f.figure_gib:.2f} {unit} -> 0 (refused)")
            a_text = "; ".join(parts)
            a_ok = ("ok" if all(f.exact for f in fs) else "MISS") if all(f.case.all_workers for f in fs) else "<=ok"
        logged: int | None = None
        b_pred, b_err, complete = "-", "-", ""
        r = by_log.get(log)
        if r is not None:
            model = r.case.model
            logged = r.logged_tokens
            b_pred = _fmt(r.prediction.kv_tokens)
            e = error_pct(r)
            b_err = f"{e:+.1f}%" if e is not None else "no pool"
            complete = "yes" if r.case.complete else "no"
        elif fs:
            logged = fs[0].logged
        lines.append(f"{log:44} {model.split('/')[-1][:28]:28} {a_text[:44]:44} {_fmt(logged):>10}  {a_ok:4} "
                     f"{b_pred:>12} {b_err:>8}  {complete}")
        if len(a_text) > 44:
            lines.append(f"{'':73} {a_text[44:]}")
    lines.append("")
    a_rows = [f for f in figures if f.case.all_workers]
    lines.append(f"Column A (engine figure -> tokens): {sum(f.exact for f in a_rows)}/{len(a_rows)} figures give the "
                 f"logged count within the printing's rounding (+-{PRINT_HALF_UNIT_GIB} GiB per printed number; "
                 f"widest interval +-{max(f.bound_pct for f in a_rows):.2f}% of the count); "
                 f"{sum(not f.case.all_workers for f in figures)} shows one rank of several (pool <= it).")
    for label, keep in (("complete rows", lambda r: r.case.complete), ("all rows", lambda r: True)):
        summ = summarize([r for r in rows if keep(r)])
        if summ:
            lines.append(f"Column B (pool from free memory and flags), {label}: n={summ.n} median |error| "
                         f"{summ.median_pct:.1f}%, worst {summ.worst_pct:.1f}% ({summ.worst_log})")
    for engine in ("vllm", "sglang"):
        summ = summarize([r for r in rows if r.case.complete and r.case.engine == engine])
        if summ:
            lines.append(f"  {engine:6} complete rows: n={summ.n} median {summ.median_pct:.1f}%, worst "
                         f"{summ.worst_pct:.1f}%")
    misses = [r for r in rows if r.case.complete and r.logged_tokens is None]
    for r in misses:
        lines.append(f"  {r.case.log}: predicted {r.prediction.kv_tokens:,} tokens "
                     f"({r.prediction.kv_budget_bytes_per_rank / GIB:+.2f} GiB), the engine logged "
                     f"{r.logged.available_kv_gib:+.2f} GiB and refused to start (not in the median)")
    lines.append("")
    lines.append("Column A notes:")
    lines.extend(f"  {f.case.log}: {f.case.why}" for f in figures if f.case.why)
    lines.append("Column B assumed:")
    lines.extend(f"  {r.case.log}: {r.case.assumed}" for r in rows if r.case.assumed)
    lines.append("No column A:")
    lines.extend(f"  {log}: {why}" for log, why in FIGURE_SKIPPED.items())
    lines.append("No column B:")
    lines.extend(f"  {log}: {skipped.get(log, CPU_NOT_PREDICTED if log.startswith('vllm-cpu/') else '?')}"
                 for log in all_logs() if log not in by_log)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The ledger: the table as data (tests/data/calibration/ledger.json), the README's numbers from it
# ---------------------------------------------------------------------------------------------

LEDGER = REPO / "tests" / "data" / "calibration" / "ledger.json"
README = REPO / "README.md"
README_BEGIN = "<!-- accuracy ledger: generated by `python benchmarks/bench_calibration.py --write-readme` -->"
README_END = "<!-- end of the accuracy ledger -->"
#: the launches of the test suite whose logs are kept here (the real engines, not pastes)
REAL_LAUNCHES = {
    "vllm-cpu/": "real launch: vLLM 0.32.0 CPU build on this project's machine "
                 "(tests/launch/test_startup_engine.py, @pytest.mark.engine)",
    "llamacpp/real-cpu-b11434.log": "real launch: llama-server b11434 on this project's CPU machine "
                                    "(tests/engines/test_llamacpp.py)",
}
LLAMACPP_LOGS = ("llamacpp/real-cpu-b11434.log",)
#: the groups whose median and worst |error| are recorded; a group gets worse -> CI fails
GROUPS = ("fitted", "held_out")


def source_of(log: str) -> str:
    for prefix, what in REAL_LAUNCHES.items():
        if log.startswith(prefix):
            return what
    header = log_header(log)
    return header.get("url") or header.get("source") or "unknown"


def ledger_rows() -> list[dict[str, object]]:
    """One row per log: its source, the inputs predicted from, column A and column B."""
    cases = {c.log: c for c in CASES}
    figs: dict[str, list[FigureRow]] = {}
    for fc in FIGURE_CASES:
        figs.setdefault(fc.log, []).append(figure_row(fc))
    skipped = {k.log: k.why for k in SKIPPED}
    rows: list[dict[str, object]] = []
    for log in [*all_logs(), *LLAMACPP_LOGS]:
        grammar = "llamacpp" if log.startswith("llamacpp/") else ("vllm" if log.startswith("vllm") else "sglang")
        row: dict[str, object] = {"log": log, "engine": grammar, "source": source_of(log)}
        if grammar == "llamacpp":
            row["logged_tokens"] = parse_llamacpp_log((LOGS / log).read_text(encoding="utf-8")).kv_tokens
            row["column_a"] = None
            row["column_b"] = None
            row["why_not_predicted"] = ("llama.cpp's cache is the --ctx-size it was given (cells x streams), not "
                                        "sized from free memory: its KV MiB per buffer is predicted exactly "
                                        "(tests/engines/test_llamacpp.py)")
            rows.append(row)
            continue
        fs = figs.get(log, [])
        row["column_a"] = [{"figure": f.case.figure, "figure_gib": round(f.figure_gib, 4), "tokens": f.tokens,
                            "tokens_lo": f.tokens_lo, "tokens_hi": f.tokens_hi, "logged": f.logged,
                            "all_workers": f.case.all_workers, "exact": f.exact} for f in fs] or None
        if not fs:
            row["why_no_column_a"] = FIGURE_SKIPPED.get(log, "no figure")
        c = cases.get(log)
        if c is None:
            row["logged_tokens"] = fs[0].logged if fs else parse_log(log_body(log), log_grammars(grammar)).kv_tokens
            row["column_b"] = None
            row["why_not_predicted"] = skipped.get(log, CPU_NOT_PREDICTED if log.startswith("vllm-cpu/") else "?")
            rows.append(row)
            continue
        r = measure(c)
        e = error_pct(r)
        row["logged_tokens"] = r.logged_tokens
        row["inputs"] = {"version": c.version, "model": c.model, "gpu": c.gpu, "tp": c.tp, "pp": c.pp,
                         "memory_fraction": c.memory_fraction, "max_model_len": c.max_model_len,
                         "kv_cache_dtype": c.kv_cache_dtype}
        row["column_b"] = {"predicted_tokens": r.prediction.kv_tokens,
                           "predicted_budget_gib": round(r.prediction.kv_budget_bytes_per_rank / GIB, 3),
                           "error_pct": None if e is None else round(e, 2),
                           "complete": c.complete, "fitted": c.fitted, "assumed": c.assumed or None,
                           "first_scored_pct": c.first_scored_pct if c.first_scored_pct is not None
                           else None if c.fitted or e is None or not c.complete else round(e, 2)}
        rows.append(row)
    return rows


def group_of(row: dict[str, object]) -> str | None:
    """``fitted`` / ``held_out`` for a scored row (complete header, a pool to compare), else None."""
    b = row.get("column_b")
    if not isinstance(b, dict) or not b["complete"] or b["error_pct"] is None:
        return None
    return "fitted" if b["fitted"] else "held_out"


def _first_scored(row: dict[str, object]) -> bool:
    """A complete row that was scored as held out (it may be fitted since)."""
    b = row.get("column_b")
    return isinstance(b, dict) and bool(b["complete"]) and b.get("first_scored_pct") is not None


def ledger_summary(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """Median and worst |error| of column B per group, and column A's exact count."""
    out: dict[str, dict[str, object]] = {}
    for g in GROUPS:
        errs = sorted((abs(float(r["column_b"]["error_pct"])), str(r["log"]))  # type: ignore[index]
                      for r in rows if group_of(r) == g)
        if errs:
            out[g] = {"n": len(errs), "median_pct": round(statistics.median(e for e, _ in errs), 2),
                      "worst_pct": round(errs[-1][0], 2), "worst_log": errs[-1][1]}
    first = sorted((abs(float(r["column_b"]["first_scored_pct"])), str(r["log"]))  # type: ignore[index]
                   for r in rows if _first_scored(r))
    if first:
        out["held_out_as_first_scored"] = {"n": len(first),
                                           "median_pct": round(statistics.median(e for e, _ in first), 2),
                                           "worst_pct": round(first[-1][0], 2), "worst_log": first[-1][1]}
    figures = [f for r in rows for f in (r.get("column_a") or [])]  # type: ignore[attr-defined]
    whole = [f for f in figures if f["all_workers"]]
    out["column_a"] = {"n": len(whole), "exact": sum(1 for f in whole if f["exact"]),
                       "bounds_only": len(figures) - len(whole)}
    return out


def ledger() -> dict[str, object]:
    rows = ledger_rows()
    return {"about": "The calibration ledger: one row per engine startup log kept in tests/data/logs (public "
                     "pastes and this project's real launches). Column A: the engine's own KV figure turned "
                     "into tokens (must be exact). Column B: the pool predict_pool gives from the header's "
                     "inputs, error = predicted / logged - 1. Generated by benchmarks/bench_calibration.py "
                     "--write-ledger; tests/memory/test_ledger.py fails when a group's median or worst gets "
                     "worse than 'recorded'.",
            "recorded": ledger_summary(rows), "rows": rows}


def readme_block(data: dict[str, object]) -> str:
    """The README's accuracy figures, from the ledger only."""
    rows: list[dict[str, object]] = data["rows"]  # type: ignore[assignment]
    rec: dict[str, dict[str, object]] = data["recorded"]  # type: ignore[assignment]
    engines: dict[str, set[str]] = {}
    for r in rows:
        b = r.get("inputs")
        if isinstance(b, dict):
            engines.setdefault(str(r["engine"]), set()).add(str(b["version"]))
    by_kind = {"public": sum(1 for r in rows if not str(r["source"]).startswith("real launch")),
               "real": sum(1 for r in rows if str(r["source"]).startswith("real launch"))}
    a = rec["column_a"]
    lines = [README_BEGIN,
             f"The ledger (`tests/data/calibration/ledger.json`) has {len(rows)} rows: {by_kind['public']} "
             f"public startup logs and {by_kind['real']} logs of the test suite's real launches.",
             "",
             f"- **A, the engine's own KV figure -> tokens**: {a['exact']}/{a['n']} figures give the logged count "
             f"within the figure's printed rounding; {a['bounds_only']} show one rank of several (the pool is "
             f"at most what they give).",
             ]
    for g, label in (("fitted", "the logs the rules were fitted to"),
                     ("held_out", "held-out logs, added after the rules and not tuned to")):
        s = rec.get(g)
        if s is None:
            lines.append(f"- **B on {label}**: none yet.")
            continue
        scored = [r for r in rows if group_of(r) == g]
        each = ", ".join(f"{r['log']} {float(r['column_b']['error_pct']):+.1f} %" for r in scored)  # type: ignore[index]
        lines.append(f"- **B on {label}** (n={s['n']}): **median |error| {s['median_pct']:.1f} %, worst "
                     f"{s['worst_pct']:.1f} %** ({each}).")
    s = rec.get("held_out_as_first_scored")
    if s is not None:
        firsts = [r for r in rows if _first_scored(r)]
        since = [r for r in firsts if r["column_b"]["fitted"]]  # type: ignore[index]
        lines.append(
            f"- **B on every held-out log as first scored**, before any rule read after it (n={s['n']}): "
            f"**median |error| {s['median_pct']:.1f} %, worst {s['worst_pct']:.1f} %** ({s['worst_log']})"
            + (": " + "; ".join(f"{r['log']} was {float(r['column_b']['first_scored_pct']):+.1f} %, "  # type: ignore[index]
                                f"{float(r['column_b']['error_pct']):+.1f} % since the rule read after it"  # type: ignore[index]
                                for r in since) if since else "") + ".")
    assumed = [r for r in rows if isinstance(r.get("column_b"), dict) and not r["column_b"]["complete"]]  # type: ignore[index]
    lines.append("- Engines and releases predicted for: "
                 + "; ".join(f"{e} {', '.join(sorted(v, key=Version))}" for e, v in sorted(engines.items()))
                 + f". {len(assumed)} rows with an assumed input are shown, not scored: "
                 + "; ".join(f"{r['log']} ({r['column_b']['assumed']})" for r in assumed) + ".")  # type: ignore[index]
    lines.append(f"- Assumed in every row of B: the GPU idle before the launch (NVML free = total - {IDLE_USED_MIB} "
                 f"MiB), NVML totals by GPU model, CUDA's total NVML's less ~450 MiB where no public figure is "
                 f"known (A100 40GB: 40,339 MiB, deviceQuery), the interconnect by GPU model, the KV dtype the "
                 f"model's own unless the header says otherwise.")
    lines.append(README_END)
    return "\n".join(lines)


def write_readme(data: dict[str, object]) -> bool:
    """Replace the README's ledger block; True when it changed."""
    text = README.read_text(encoding="utf-8")
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:start] + readme_block(data) + text[end:]
    if new != text:
        README.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--write-ledger" in args:
        LEDGER.parent.mkdir(parents=True, exist_ok=True)
        LEDGER.write_text(json.dumps(ledger(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {LEDGER.relative_to(REPO)}")
    if "--write-readme" in args:
        data = json.loads(LEDGER.read_text(encoding="utf-8"))
        print("README.md " + ("updated" if write_readme(data) else "unchanged"))
    if not args:
        print(render([measure(c) for c in CASES], [figure_row(c) for c in FIGURE_CASES]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
