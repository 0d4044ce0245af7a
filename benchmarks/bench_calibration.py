"""How well ``memory.predict_pool`` matches the KV pools real engines logged.

    python benchmarks/bench_calibration.py

Every startup log under ``tests/data/logs/{vllm,sglang}`` carries a header (source, engine version,
GPU, model, TP/PP, memory fraction, max_model_len) above ``---``. Where the header says enough, this
predicts the pool from it and compares it with the pool the log reports (``logparse.parse_log``:
``GPU KV cache size`` / ``# GPU blocks`` x 16 / SGLang ``#tokens``). It prints one row per log and the
median / min / max of ``logged / predicted`` per engine.

Why a table and not just a number: the pool is what a user sizes a deployment by, so a systematic
error (a missing reserve, a wrong default) shows up as a ratio that drifts one way for one engine.
The rows say which inputs were read off the header and which were assumed (``complete``), so a
ratio built on a guess is never mistaken for a measurement. ``tests/test_calibration.py`` asserts
the band on the complete rows.

Assumptions common to every row: the GPU was idle before launch, so NVML's free memory is its total
less ~500 MiB (driver reservation and CUDA context); NVML totals per GPU model are those of the
table ``GPU_TOTAL_MIB``; the KV cache dtype is the model's (``auto``) unless the header says otherwise.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_gpulayout.launch.logparse import StartupLog, parse_log  # noqa: E402
from pytest_gpulayout.machine.facts import GIB, Gpu  # noqa: E402
from pytest_gpulayout.memory.pool import PoolPrediction, predict_pool  # noqa: E402
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
}
#: Free memory on an idle GPU, below NVML's total: the driver's reservation and a CUDA context.
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
         assumed="V0 engine (0.7.x era, Feb 2025); every V0 release gives the same prediction"),
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
    Skipped("sglang/003.txt", "sglang", "Qwen3-Omni not in the catalog; GPU unknown"),
    Skipped("sglang/005.txt", "sglang", "model and GPU unknown"),
    Skipped("sglang/007.txt", "sglang", "start-up error, no KV pool"),
    Skipped("sglang/009.txt", "sglang", "GPU unknown; this SGLang did not log the MLA pool size"),
    Skipped("sglang/011.txt", "sglang", "pool capped by --max-total-tokens 10000, not by memory"),
)


@dataclass(frozen=True)
class Row:
    """A case's prediction next to what its log reports."""

    case: Case
    prediction: PoolPrediction
    logged: StartupLog

    @property
    def logged_tokens(self) -> int | None:
        """The pool the engine served from (``# GPU blocks`` x 16 where the log only gives blocks)."""
        if self.logged.kv_tokens is not None:
            return self.logged.kv_tokens
        if self.logged.gpu_blocks is not None:
            return self.logged.gpu_blocks * 16
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
    return [Gpu(i, name=name, memory_total_mib=total, memory_free_mib=total - IDLE_USED_MIB)
            for i in range(count)]


def measure(case: Case) -> Row:
    """Predict ``case`` and parse its log."""
    model = MODEL_LOADERS[case.model]()
    prediction = predict_pool(model, engine=case.engine, engine_version=case.version, tp=case.tp, pp=case.pp,
                              gpus=idle_gpus(case.gpu, case.tp * case.pp), max_model_len=case.max_model_len,
                              memory_fraction=case.memory_fraction, kv_cache_dtype=case.kv_cache_dtype)
    return Row(case, prediction, parse_log(log_body(case.log), case.engine))


def _fmt(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render(rows: list[Row]) -> str:
    lines = [f"{'log':15} {'engine':17} {'model':34} {'GPU x TP':26} {'predicted':>10} {'logged':>10} "
             f"{'ratio':>6}  {'KV GiB pred/log':>16}  complete"]
    for r in rows:
        c = r.case
        gpu = f"{c.gpu.replace('NVIDIA ', '').replace('GeForce ', '')} x{c.tp}" + (f" PP{c.pp}" if c.pp > 1 else "")
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        avail = r.logged.available_kv_gib
        kv = f"{r.prediction.kv_budget_bytes_per_rank / GIB:.2f}/" + ("-" if avail is None else f"{avail:.2f}")
        lines.append(f"{c.log:15} {c.engine + ' ' + c.version:17} {c.model.split('/')[-1][:34]:34} {gpu:26} "
                     f"{_fmt(r.prediction.kv_tokens):>10} {_fmt(r.logged_tokens):>10} {ratio:>6}  {kv:>16}  "
                     f"{'yes' if c.complete else 'no'}")
    lines.append("")
    lines.append("KV GiB: predicted budget per rank / the log's 'Available KV cache memory' (vLLM) or K+V size "
                 "(SGLang).")
    for engine in ("vllm", "sglang"):
        for label, keep in (("all rows", lambda r: True), ("complete rows", lambda r: r.case.complete)):
            ratios = [r.ratio for r in rows if r.case.engine == engine and keep(r) and r.ratio is not None]
            if ratios:
                lines.append(f"{engine:6} {label:13}: n={len(ratios)} median {statistics.median(ratios):.3f} "
                             f"min {min(ratios):.3f} max {max(ratios):.3f}")
    lines.append("")
    lines.append("Assumed:")
    lines.extend(f"  {r.case.log}: {r.case.assumed}" for r in rows if r.case.assumed)
    lines.append("Not predicted (the header lacks an input):")
    lines.extend(f"  {s.log}: {s.why}" for s in SKIPPED)
    return "\n".join(lines)


def main() -> int:
    print(render([measure(c) for c in CASES]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
