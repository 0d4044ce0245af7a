"""What an engine's startup log says: the KV pool it allocated, its concurrency, or why it failed.

One parser serves two callers. ``parse_log(text)`` reads a finished log (``gpulayout parse-log``).
``LogWatcher`` is the same parser fed one line at a time while the launcher streams the engine's
output, so the launcher can stop the engine the moment every expected engine has reported its pool
or a recognised error has happened, instead of waiting minutes for the server to become ready.

The formats come from the engines' sources across versions (vLLM 0.6 - 0.33, SGLang 0.4 - 0.5.23;
read in the engines' source) and from real pasted logs. They are matched after removing the noise that
real logs carry: ANSI colours (real ESC bytes and the ``^[[0;36m`` caret notation of copied
terminals), container timestamps, process prefixes (``(EngineCore_DP0 pid=1)``, ``(Worker_TP1 pid=2)``,
``[2025-01-01 00:00:00 DP1 TP3]``), vLLM's ``LEVEL date [file:line]`` and thousands separators.

What counts as an error. Engines print tracebacks that are not fatal (vLLM logs a failed chat
template warm-up with a full traceback at WARNING level) and errors during their own shutdown. So:
lines at vLLM's INFO/WARNING/DEBUG level never raise the alarm (except a negative KV budget, which
is always fatal), nothing after the server said it was ready or began shutting down counts, and a
specific cause (heads not divisible, KV too small ...) always wins over a generic one
("EngineCore failed to start", a bare traceback), because the generic lines come after the cause.
A pydantic ``ValidationError`` (vLLM's config checks) names only the config class; the indented
``Value error, ...`` line after it is what went wrong, so that line is the one reported.

Which engine wrote it. Pasted logs arrive with prose around them (an issue title "vLLM vs SGLang", a
URL into vllm-project/...) and SGLang 0.4 logs carry vLLM module paths. Such mentions only give a
provisional answer; the first line only one engine prints (its own pool, prefix or error wording)
decides, whatever was mentioned before it. What marks each engine's lines is its ``LogGrammar``
(``engines/vllm/log.py``, ``engines/sglang/log.py``): this module names no engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol

from pytest_gpulayout.inputs.files import strip_ansi

#: Error kinds, as design.md names them (``StartupLog.error_kind``).
ErrorKind = Literal["tp_memory_unbalanced", "heads_not_divisible", "kv_cache_too_small",
                    "insufficient_free_memory", "no_kv_memory", "oom", "other_error"]
TP_MEMORY_UNBALANCED: Final = "tp_memory_unbalanced"
HEADS_NOT_DIVISIBLE: Final = "heads_not_divisible"
KV_CACHE_TOO_SMALL: Final = "kv_cache_too_small"
INSUFFICIENT_FREE_MEMORY: Final = "insufficient_free_memory"
NO_KV_MEMORY: Final = "no_kv_memory"
OOM: Final = "oom"
OTHER_ERROR: Final = "other_error"

#: Keys of ``StartupLog.to_json()``: the ``parse-log --json`` contract of design.md.
JSON_KEYS = ("engine", "kv_tokens", "kv_tokens_all", "gpu_blocks", "max_concurrency", "max_concurrency_len",
             "available_kv_gib", "error_kind", "error_numbers")

_MAX_ERROR_LINE = 600

#: The neutral names of what an engine's log says about its own configuration (``StartupLog.config``):
#: its release, the model it loaded, its layout, its context length, memory fraction and KV dtype, and the
#: device it ran on ("cpu": a pool not sized from GPU memory). An engine with its own log reader may add
#: keys of its own beside these (llama.cpp: ``n_ctx_seq``, ``n_seq_max``, ... ``engines/llamacpp/log.py``).
CONFIG_KEYS = ("version", "model", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
               "max_model_len", "memory_fraction", "kv_cache_dtype", "split_mode", "device")


@dataclass(frozen=True)
class StartupLog:
    """The facts of one startup log. ``None`` / empty where the log does not say.

    ``kv_tokens`` is the pool the engine serves from: the smallest report when several ranks
    (SGLang, vLLM <= 0.11) or several DP engines report. ``kv_tokens_all`` keeps every report in
    log order, so a lopsided DP replica or rank stays visible.
    """

    engine: str | None = None
    kv_tokens: int | None = None
    kv_tokens_all: tuple[int, ...] = ()
    gpu_blocks: int | None = None
    max_concurrency: float | None = None
    max_concurrency_len: int | None = None
    available_kv_gib: float | None = None
    weights_gib: float | None = None
    error_kind: ErrorKind | None = None
    error_numbers: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    error_line: str | None = None
    ready: bool = False
    #: ``kv_tokens`` is a pool the engine sized before its final one, and the final never came (TensorRT-LLM's
    #: ``KvCacheCreator`` builds a small cache to profile with, then the real one: ``engines/trtllm/log.py``):
    #: what a launch stopped in between saw, not the pool it would serve from
    kv_provisional: bool = False
    #: what the engine printed about its own configuration (``LogGrammar.config``; keys ``CONFIG_KEYS``),
    #: the first value of each key: the settings it actually ran with, to hold the deployment to
    config: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def has_pool(self) -> bool:
        return self.kv_tokens is not None or self.gpu_blocks is not None

    def to_json(self) -> dict[str, Any]:
        """Exactly the keys of the ``parse-log --json`` object (README.md, "The CLI")."""
        return {
            "engine": self.engine,
            "kv_tokens": self.kv_tokens,
            "kv_tokens_all": list(self.kv_tokens_all),
            "gpu_blocks": self.gpu_blocks,
            "max_concurrency": self.max_concurrency,
            "max_concurrency_len": self.max_concurrency_len,
            "available_kv_gib": self.available_kv_gib,
            "error_kind": self.error_kind,
            "error_numbers": dict(self.error_numbers),
        }


def parse_log(text: str, grammars: Sequence[LogGrammar]) -> StartupLog:
    """Parse a whole startup log (any mix of the noise above): one grammar, the engine that wrote it;
    several, the one its lines mark (``LogWatcher``)."""
    watcher = LogWatcher(grammars)
    for line in text.splitlines():
        watcher.feed(line)
    return watcher.result()


# ------------------------------------------------------------------------------------------------
# Noise
# ------------------------------------------------------------------------------------------------
_ISO_TS_RE = re.compile(r"\s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
_PROC_RE = re.compile(r"\s*\((?P<proc>[^()]{1,80}?) pid=\d+\)\s?")
_SGL_PREFIX_RE = re.compile(
    r"\s*\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<tags>(?: [A-Z][A-Z_]*\d+)*)\]\s?")
_VLLM_LEVEL_RE = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]\s]+\]|[\w./-]+:\d+\])\s?")
_FILE_ONLY_RE = re.compile(r"\[[\w./-]+\.py:\d+\]\s")
_UVICORN_RE = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")


@dataclass(frozen=True)
class LogLine:
    message: str          # the engine's message: prefixes removed, indentation kept
    level: str | None     # vLLM / uvicorn level where the line has one
    proc: str | None      # vLLM process name (EngineCore_DP0, Worker_TP1 ...)
    tags: str | None      # SGLang rank tags ("", "TP0", "DP1 TP3"); None when no SGLang prefix
    sglang_prefix: bool
    vllm_prefix: bool     # vLLM's "LEVEL mm-dd hh:mm:ss [file:line]" was there


class LogGrammar(Protocol):
    """What marks one engine's startup log, and how its pools are counted (``Engine.logs``)."""

    @property
    def name(self) -> str:
        """The engine's name (``StartupLog.engine``)."""
        ...

    @property
    def pools_per_rank(self) -> bool:
        """One pool line per rank and one summary per replica (not one size line per engine core)."""
        ...

    @property
    def concurrency_from_context(self) -> bool:
        """Without a concurrency line, the pool over the logged context length stands in."""
        ...

    def owns(self, msg: str, line: LogLine) -> bool:
        """A line only this engine prints: it decides."""
        ...

    def mentions(self, msg: str, line: LogLine) -> bool:
        """A line that names it (prose, a module path, a flag): only a guess."""
        ...

    @property
    def config_words(self) -> tuple[str, ...]:
        """Substrings of the lines where it prints its own configuration (a cheap test before ``config``)."""
        ...

    def config(self, msg: str) -> dict[str, str]:
        """What this line says about the engine's own configuration, by ``CONFIG_KEYS`` name (empty: nothing)."""
        ...


def clean(raw: str) -> str:
    """The line without ANSI colour codes and trailing whitespace."""
    return strip_ansi(raw).rstrip()


def _split(raw: str) -> LogLine:
    s = clean(raw)
    m = _ISO_TS_RE.match(s)
    if m:
        s = s[m.end():]
    proc = None
    tags = None
    sgl = False
    for _ in range(3):  # a Ray actor prefix can precede vLLM's own
        m = _PROC_RE.match(s)
        if m:
            proc = m.group("proc")
            s = s[m.end():]
            continue
        m = _SGL_PREFIX_RE.match(s)
        if m:
            tags = m.group("tags").strip()
            sgl = True
            s = s[m.end():]
            continue
        break
    level = None
    m = _VLLM_LEVEL_RE.match(s)
    vllm = m is not None
    if m:
        level = m.group("level")
        s = s[m.end():]
    else:
        m = _FILE_ONLY_RE.match(s) or _UVICORN_RE.match(s)
        if m:
            level = m.groupdict().get("level")
            s = s[m.end():]
    if level == "WARN":
        level = "WARNING"
    return LogLine(s, level, proc, tags, sgl, vllm)


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def _num(text: str) -> float:
    return float(text.replace(",", ""))


# ------------------------------------------------------------------------------------------------
# Pool lines
# ------------------------------------------------------------------------------------------------
_N = r"(\d{1,3}(?:,\d{3})+|\d+)"  # 1,234,567 or 1234567 (never a trailing comma)
_F = r"(-?\d+(?:\.\d+)?)"

# vLLM V1 0.8 - 0.33: "GPU KV cache size: 1,234 tokens" ("CPU", "XPU", "GPU + host" from 0.30)
_V1_SIZE_RE = re.compile(r"\b(?:[A-Z]{2,5}(?: \+ host)?) KV cache size: " + _N + r" tokens")
# "Maximum concurrency for 2,048 tokens per request: 997.08x" (same line from 0.30, next line before)
_CONCURRENCY_RE = re.compile(r"Maximum concurrency for " + _N + r" tokens per request: " + _F + "x")
# V0 "# GPU blocks: N, # CPU blocks: M", "# cuda blocks: ...", early V1 "# GPU blocks: N",
# and the paste where markdown ate the leading "# ".
_V0_BLOCKS_RE = re.compile(r"(?:^|#\s?|\s)(GPU|cuda|CUDA|XPU|xpu|hpu|HPU|npu|NPU|neuron|tpu|TPU) blocks: "
                           r"(\d+)")
_V0_CPU_ONLY_RE = re.compile(r"^\s*# CPU blocks: (\d+)\s*$")
# SGLang: "KV Cache is allocated. [dtype: torch.bfloat16, ]#tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"
_SGL_ALLOC_RE = re.compile(
    r"KV Cache (is allocated|VA upper bound)\.(?: dtype: [^,]+,)? #tokens: " + _N
    + r"(?:, (?:K size: " + _F + r" GB, V size: " + _F + r" GB|KV size: " + _F + r" GB))?")
# SGLang of early 2025 (0.4.1-0.4.3): "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB." without the
# count (``mem_cache/memory_pool.py`` ``MHATokenToKVPool._create_buffers``); the count is the
# ``max_total_num_tokens=`` line's
_SGL_ALLOC_SIZES_RE = re.compile(r"KV Cache is allocated\.(?: dtype: [^,]+,)? (?:K size: " + _F + r" GB, V size: "
                                 + _F + r" GB|KV size: " + _F + r" GB)")
_SGL_POST_CAPTURE_RE = re.compile(
    r"Post-capture KV sizing: KV cache allocated\.(?: dtype: [^,]+,)? #tokens: " + _N
    + r"(?:, KV size: " + _F + r" GB)?")
_SGL_MAX_TOTAL_RE = re.compile(r"max_total_num_tokens=" + _N + r"(?:.*?context_len=(\d+))?")

# Memory facts
_AVAILABLE_KV_RE = re.compile(r"Available KV cache memory: " + _F + r" ?GiB")
_V0_REST_KV_RE = re.compile(
    r"(?:rest of the memory reserved for KV Cache is|kv_cache_size=)\s*" + _F + r" ?GiB")
_CPU_KV_SET_RE = re.compile(r"(?:Explicitly|Auto) set \(" + _F + r"/" + _F + r"\) GiB for KV cache")
_KV_IN_USE_RE = re.compile(r"Current kv cache memory in use is " + _F + r" GiB")
_WEIGHTS_RE = re.compile(
    r"(?:Model loading took|Loading model weights took) " + _F + r" ?(?:GiB|GB)"
    r"|Load weight end\..*?mem usage=" + _F + r" ?GB")
_READY_RE = re.compile(r"Application startup complete|fired up and ready to roll")
_SHUTDOWN_RE = re.compile(r"\[shutdown\]|Shutting down|shutdown triggered")


# ------------------------------------------------------------------------------------------------
# Error lines: (kind, regex, number names). The first kind that matches a line decides it.
# ------------------------------------------------------------------------------------------------
_CONTEXT_TOO_LONG = ("max_model_len", "derived_max_model_len")  # the numbers of a too-long context
_ERRORS: tuple[tuple[ErrorKind, re.Pattern[str], tuple[str, ...]], ...] = (
    (TP_MEMORY_UNBALANCED, re.compile(
        r"memory capacity is unbalanced"
        r"(?:.*?(?:min_per_gpu_memory|pre_model_load_memory)=" + _F
        + r".*?local_gpu_memory=" + _F + r"(?:.*?local_gpu_memory \* 0\.9=" + _F + r")?)?"),
     ("min_free_gib", "local_free_gib", "required_free_gib")),
    (HEADS_NOT_DIVISIBLE, re.compile(
        r"Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)"),
     ("num_attention_heads", "tensor_parallel_size")),
    (HEADS_NOT_DIVISIBLE, re.compile(
        r"Total number of hidden layers \((\d+)\) must be divisible by pipeline parallel size \((\d+)\)"),
     ("num_hidden_layers", "pipeline_parallel_size")),
    (HEADS_NOT_DIVISIBLE, re.compile(r"\b(?:num_)?heads \((\d+)\) must be divisible by \w+ \((\d+)\)"),
     ("num_attention_heads", "tensor_parallel_size")),
    (KV_CACHE_TOO_SMALL, re.compile(
        r"To serve at least one request with the models?'s max seq len \(" + _N + r"\)"
        r"(?:, \(" + _F + r" GiB KV cache is needed, which is larger than the available KV cache memory \("
        + _F + r" GiB\))?(?:.*?estimated maximum model length is (\d+))?"),
     ("max_model_len", "needed_gib", "available_gib", "estimated_max_model_len")),
    (KV_CACHE_TOO_SMALL, re.compile(
        r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache "
        r"\((\d+)\)"),
     ("max_model_len", "kv_tokens")),
    (KV_CACHE_TOO_SMALL, re.compile(r"KV pool holds (\d+) tokens, fewer than --context-length (\d+)"),
     ("kv_tokens", "max_model_len")),
    (INSUFFICIENT_FREE_MEMORY, re.compile(
        r"Free memory on device(?: \w+:(\d+))? \(" + _F + r"/" + _F + r" GiB\) on startup is less than "
        r"desired GPU memory utilization \(" + _F + r", " + _F + r" GiB\)"),
     ("device_index", "free_gib", "total_gib", "memory_fraction", "requested_gib")),
    (INSUFFICIENT_FREE_MEMORY, re.compile(
        r"Available memory on node (\d+) \(" + _F + r"/" + _F + r" GiB\) on startup is less than desired "
        r"CPU memory utilization \(" + _F + r", " + _F + r" GiB\)"),
     ("numa_node", "free_gib", "total_gib", "memory_fraction", "requested_gib")),
    (NO_KV_MEMORY, re.compile(r"No available memory for the cache blocks"), ()),
    (NO_KV_MEMORY, re.compile(
        r"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=" + _F
        + r"(?:.*?above " + _F + r")?(?:.*?=\s*" + _F + r"\))?"),
     ("mem_fraction_static", "suggested_mem_fraction_static", "minimum_mem_fraction_static")),
    (NO_KV_MEMORY, re.compile(
        r"Not enough memory\. Please try to increase --mem-fraction-static\.?"
        r"(?: Current value: [\w.]*mem_fraction_static=" + _F + r")?"),
     ("mem_fraction_static",)),
    (NO_KV_MEMORY, re.compile(
        r"worker already uses " + _F + r" GiB .*?more than the " + _F + r" GiB of CPU memory reserved"),
     ("used_gib", "reserved_gib")),
    (NO_KV_MEMORY, re.compile(r"Cannot auto-fit max_model_len: not enough GPU memory"), ()),
    (OOM, re.compile(r"Failed to load model - not enough GPU memory"), ()),
    # A context longer than the model's positions, refused at config time (no kind of its own in
    # design.md). vLLM: "... derived max_model_len (max_position_embeddings=2048.0 or model_max_length=None
    # ...)", the first key being the derived value; SGLang: "... derived context_length (2048)".
    (OTHER_ERROR, re.compile(
        r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len \(\w+=(\d+(?:\.\d+)?)"),
     _CONTEXT_TOO_LONG),
    (OTHER_ERROR, re.compile(
        r"(?:User-specified|Target model's) context_length \((\d+)\) is greater than the derived context_length "
        r"\((\d+)\)"),
     _CONTEXT_TOO_LONG),
    (OOM, re.compile(
        r"(?:CUDA out of memory|OutOfMemoryError)(?:.*?Tried to allocate " + _F + r" ?(GiB|MiB))?"
        r"(?:.*?total capacity of " + _F + r" ?GiB of which " + _F + r" ?(GiB|MiB) is free)?"),
     ("tried_gib", "", "total_gib", "free_gib", "")),
    # Block-quantized (FP8) weights split by TP: each rank's slice must be whole quant blocks.
    # vllm/model_executor/layers/quantization/utils/fp8_utils.py, validate_fp8_block_shape(_moe):
    # "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n
    # = 128." (MoE), "Weight output_partition_size = 64 is not divisible by ... block_n = 128." (dense)
    (HEADS_NOT_DIVISIBLE, re.compile(
        r"(?:output_size of gate's and up's weight|Weight output_partition_size) = (\d+) is not divisible by "
        r"weight quantization block_n = (\d+)"),
     ("output_size_per_partition", "block_n")),
    (HEADS_NOT_DIVISIBLE, re.compile(
        r"(?:input_size of down's weight|Weight input_size_per_partition) = (\d+) is not divisible by "
        r"weight quantization block_k = (\d+)"),
     ("input_size_per_partition", "block_k")),
    # divide(): "8 is not divisible by 3" (vLLM and SGLang linear layers, vocab split)
    (HEADS_NOT_DIVISIBLE, re.compile(r"\b(\d+) is not divisible by (\d+)\b"), ("numerator", "denominator")),
)

# Generic failure markers: they say "it failed", never why.
_FAILURE_RE = re.compile(
    r"EngineCore failed to start|Engine core initialization failed|Scheduler hit an exception"
    r"|Initialization failed\.|Received sigquit from a child process"
    r"|scheduler died during initialization|Worker failed with error|Error executing method"
    r"|Worker \S+ pid \d+ died, exit code"
)
_EXIT_CODE_RE = re.compile(r"exit code:? (-?\d+)")
# Exceptions that only wrap the real one, raised in another process after it: vLLM's EngineCore
# ("WorkerProc initialization failed due to an exception in a background process. See stack trace for
# root cause.", vllm/v1/executor/multiproc_executor.py) and API server ("Engine core initialization
# failed. See root cause above.", vllm/v1/engine/utils.py). They never displace the cause.
_WRAPPER_RE = re.compile(r"root cause|WorkerProc initialization failed|Engine core initialization failed")
_EXC_SUMMARY_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception))(?::\s|$)")
_TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\)")
_HEAD_ASSERT_RE = re.compile(r"^\s*assert .*heads.*%.*tp_size|^\s*assert .*tp_size\s*%.*heads")
# What a pydantic ValidationError says went wrong, on the indented line(s) after its summary:
# "  Value error, <the validator's message> [type=value_error, ...]", "  Assertion failed, ...", or a
# field error such as "  Input should be a valid integer [type=int_parsing, ...]".
_PYDANTIC_CAUSE_RE = re.compile(r"^\s+(?:(?:Value error|Assertion failed), \S|\S.*\[type=\w+)")
_PYDANTIC_TAIL_RE = re.compile(r"\s*\[type=\w+.*$")
# Asked to be allowed: the engine only warns about a context beyond the model's positions when the
# user set VLLM_ALLOW_LONG_MAX_MODEL_LEN / SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN; the refusal says so.
_CONTEXT_OVERRIDE_HINT = "To allow overriding this maximum"

# Lines worth a closer look; everything else is skipped after one search of the lower-cased line
# (the launcher may see MBs of output; a case-insensitive alternation would cost 20x more).
_KEYWORDS = ("kv cache", "blocks:", "concurrency", "max_total_num_tokens", "model loading", "loading model",
             "load weight", "startup complete", "ready to roll", "shut", "sigquit", "unbalanced", "divisible",
             "max seq len", "kv pool", "memory", "error", "exception", "failed", "traceback", "assert",
             "died", "fraction", "gib", "no available", "[type=")
_INTERESTING_RE = re.compile("|".join(re.escape(k) for k in _KEYWORDS))
#: lines looked at together by ``LogWatcher.feed_lines``
_BLOCK = 64

@dataclass
class _Error:
    kind: ErrorKind
    numbers: dict[str, float]
    line: str
    fatal_class: bool     # False for conditions the engine only warns about and survives


def _numbers(names: tuple[str, ...], m: re.Match[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    groups = m.groups()
    for i, name in enumerate(names):
        if not name or i >= len(groups) or groups[i] is None:
            continue
        value = _num(groups[i])
        if name in ("tried_gib", "free_gib") and i + 1 < len(groups) and groups[i + 1] == "MiB":
            value = round(value / 1024, 4)
        is_float = name.endswith("gib") or "fraction" in name
        out[name] = value if is_float or not value.is_integer() else int(value)
    return out


class LogWatcher:
    """The parser, one line at a time.

    ``expected_engines``: pools to wait for. vLLM >= 0.15 logs one KV size line per engine core (one
    per DP replica); vLLM 0.8 - 0.11 one per worker, so pass ``dp * tp * pp`` there. SGLang logs one
    "KV Cache is allocated" per rank (pass ``ranks_per_engine = tp * pp``) and one
    ``max_total_num_tokens=`` summary per replica; either completes a replica.
    """

    def __init__(self, grammars: Sequence[LogGrammar], expected_engines: int = 1, ranks_per_engine: int = 1):
        if not grammars:
            raise ValueError("a log watcher needs at least one engine's log grammar")
        self._grammars = tuple(grammars)
        #: the engine that wrote the log: the one grammar given, else the one its lines mark (None: unknown)
        self.grammar: LogGrammar | None = self._grammars[0] if len(self._grammars) == 1 else None
        self._engine_fixed = len(self._grammars) == 1
        self._engine_sure = False               # an engine's own line was seen (not only a mention)
        self.expected_engines = max(1, expected_engines)
        self.ranks_per_engine = max(1, ranks_per_engine)
        self.lines = 0
        self.ready = False
        self.shutting_down = False
        self._tokens: list[int] = []            # vLLM size lines, SGLang allocation lines, in order
        self._token_keys: list[str | None] = []  # SGLang rank tag of each allocation line
        self._blocks: list[int] = []
        self._concurrency: list[tuple[int, float]] = []
        self._max_total: list[tuple[int, int | None, str | None]] = []  # tokens, context_len, DP key
        self._va_upper: list[int] = []
        self._available: list[float] = []
        self._available_fallback: list[float] = []
        self._sgl_kv_gib: list[float] = []
        self._weights: list[float] = []
        self._errors: list[_Error] = []
        self._generic: str | None = None        # first generic error line
        self._generic_numbers: dict[str, float] = {}
        self._generic_is_cause = False           # _generic is an exception's own line, not "failed to start"
        self._fatal = False
        self._last_code_line = ""
        self._validation_open = False           # the last exception summary was a pydantic ValidationError
        self._cause: str | None = None          # the line under that summary that says what went wrong
        self._config: dict[str, dict[str, str]] = {}  # engine name -> what its config lines said
        self._config_words = tuple(sorted({w for g in self._grammars for w in g.config_words}))

    @property
    def engine(self) -> str | None:
        """The name of the engine that wrote the log, as far as its lines tell (None: not known yet)."""
        return self.grammar.name if self.grammar is not None else None

    # -- state the launcher polls ------------------------------------------------------------------
    @property
    def kv_reports(self) -> int:
        """Pools reported so far, counted the way ``expected_engines`` counts them."""
        if self.grammar is not None and self.grammar.pools_per_rank:
            keyed = {k for k in self._token_keys if k is not None}
            unkeyed = sum(1 for k in self._token_keys if k is None)
            ranks = len(keyed) + unkeyed
            replicas_from_ranks = ranks // self.ranks_per_engine
            dp_keys = {k for _, _, k in self._max_total if k is not None}
            replicas_from_summary = len(dp_keys) + sum(1 for _, _, k in self._max_total if k is None)
            return max(replicas_from_ranks, replicas_from_summary)
        return len(self._tokens) + len(self._blocks)

    @property
    def kv_complete(self) -> bool:
        """Every expected engine has reported its pool."""
        return self.kv_reports >= self.expected_engines

    @property
    def failed(self) -> bool:
        """A fatal error was recognised (an exception summary or the engine's own failure line)."""
        return self._fatal

    @property
    def error_kind(self) -> ErrorKind | None:
        err = self._chosen_error()
        if err is not None:
            return err.kind
        return OTHER_ERROR if self._generic is not None or self._cause is not None else None

    # -- feeding -------------------------------------------------------------------------------------
    def feed_lines(self, lines: Sequence[str]) -> None:
        """``feed`` for each of ``lines``, with one look per block of ``_BLOCK`` lines where none of them can
        matter (no keyword, no configuration word, the engine known): what a flood of noise costs is one
        search per block, not a call per line (a 300 MB log took 48 s of a 60 s timeout to read)."""
        for i in range(0, len(lines), _BLOCK):
            block = lines[i:i + _BLOCK]
            if self._engine_sure or self._engine_fixed:
                joined = "\n".join(block)   # no keyword holds a line break: a match is within one line
                if not _INTERESTING_RE.search(joined.lower()) and not any(w in joined for w in self._config_words):
                    self.lines += len(block)
                    continue
            for raw in block:
                self.feed(raw)

    def feed(self, raw: str) -> None:
        self.lines += 1
        if any(w in raw for w in self._config_words):
            self._config_facts(raw)
        if not _INTERESTING_RE.search(raw.lower()) and not self._needs_context(raw):
            return
        line = _split(raw)
        msg = line.message
        if not self._engine_fixed and (self.grammar is None or not self._engine_sure):
            self._detect_engine(msg, line)
        if _READY_RE.search(msg):
            self.ready = True
            return
        if _SHUTDOWN_RE.search(msg) and (self._tokens or self._blocks or self._max_total):
            self.shutting_down = True  # a shutdown before any pool is part of a failed startup
        self._pool_facts(msg, line)
        if not (self.ready or self.shutting_down):
            self._error_facts(msg, line)

    def _needs_context(self, raw: str) -> bool:
        # a prefix alone says which engine this is: SGLang's "[ts TP0]", vLLM's "(EngineCore pid=1)"
        return not self._engine_sure and not self._engine_fixed and ("] " in raw or " pid=" in raw)

    def _detect_engine(self, msg: str, line: LogLine) -> None:
        """An engine's own line decides (and overrides an earlier guess); a mention only guesses."""
        for g in self._grammars:
            if g.owns(msg, line):
                self.grammar, self._engine_sure = g, True
                return
        if self.grammar is None:
            self.grammar = next((g for g in self._grammars if g.mentions(msg, line)), None)

    def _config_facts(self, raw: str) -> None:
        """The engine's own configuration line(s): the first value of each key is kept, per engine."""
        msg = _split(raw).message
        for g in self._grammars:
            if any(w in raw for w in g.config_words):
                said = self._config.setdefault(g.name, {})
                for key, value in g.config(msg).items():
                    said.setdefault(key, value)

    def _pool_facts(self, msg: str, line: LogLine) -> None:
        m = _V1_SIZE_RE.search(msg)
        if m:
            self._tokens.append(_int(m.group(1)))
            self._token_keys.append(line.proc)
        m = _CONCURRENCY_RE.search(msg)
        if m:
            self._concurrency.append((_int(m.group(1)), _num(m.group(2))))
        if "blocks:" in msg:
            m = _V0_BLOCKS_RE.search(msg)
            if m:
                self._blocks.append(int(m.group(2)))
                if int(m.group(2)) == 0 and not (self.ready or self.shutting_down):
                    # V0 raises "No available memory for the cache blocks" on 0 blocks the next moment
                    # (``worker/worker.py`` ``raise_if_cache_size_invalid``): a paste cut before it is that error
                    self._add_error(NO_KV_MEMORY, {}, msg, fatal_class=True)
            else:
                m = _V0_CPU_ONLY_RE.match(msg)
                if m:
                    self._blocks.append(int(m.group(1)))
        m = _SGL_ALLOC_RE.search(msg)
        if m:
            tokens = _int(m.group(2))
            if m.group(1) == "VA upper bound":
                self._va_upper.append(tokens)
            else:
                self._tokens.append(tokens)
                self._token_keys.append(line.tags)
                k, v, kv = m.group(3), m.group(4), m.group(5)
                if k is not None and v is not None:
                    self._sgl_kv_gib.append(round(_num(k) + _num(v), 4))
                elif kv is not None:
                    self._sgl_kv_gib.append(_num(kv))
        else:
            m = _SGL_ALLOC_SIZES_RE.search(msg)
            if m:
                k, v, kv = m.group(1), m.group(2), m.group(3)
                self._sgl_kv_gib.append(round(_num(k) + _num(v), 4) if k is not None and v is not None else _num(kv))
        m = _SGL_POST_CAPTURE_RE.search(msg)
        if m:
            self._tokens.append(_int(m.group(1)))
            self._token_keys.append(line.tags)
            if m.group(2) is not None:
                self._sgl_kv_gib.append(_num(m.group(2)))
        m = _SGL_MAX_TOTAL_RE.search(msg)
        if m:
            ctx = int(m.group(2)) if m.group(2) else None
            dp_key = None
            if line.tags is not None:
                dp_key = " ".join(t for t in line.tags.split() if t.startswith("DP"))
            self._max_total.append((_int(m.group(1)), ctx, dp_key))
        m = _AVAILABLE_KV_RE.search(msg)
        if m:
            value = _num(m.group(1))
            self._available.append(value)
            if value < 0 and not (self.ready or self.shutting_down):
                self._add_error(NO_KV_MEMORY, {"available_kv_gib": value}, msg, fatal_class=True)
        for rx in (_V0_REST_KV_RE, _CPU_KV_SET_RE, _KV_IN_USE_RE):
            m = rx.search(msg)
            if m:
                self._available_fallback.append(_num(m.group(1)))
        m = _WEIGHTS_RE.search(msg)
        if m:
            self._weights.append(_num(m.group(1) or m.group(2)))

    def _error_facts(self, msg: str, line: LogLine) -> None:
        if line.level in ("INFO", "WARNING", "DEBUG"):
            return  # vLLM says what it is; tracebacks at these levels were handled
        stripped = msg.strip()
        if not stripped:
            return
        summary = _EXC_SUMMARY_RE.match(msg)
        if summary or _FAILURE_RE.search(msg):
            self._fatal = True
        pydantic_cause = self._validation_open and _PYDANTIC_CAUSE_RE.match(msg) is not None
        for kind, rx, names in _ERRORS:
            m = rx.search(msg)
            if m:
                if kind == HEADS_NOT_DIVISIBLE and names == ("numerator", "denominator") and not summary:
                    continue  # a bare "x is not divisible by y" only counts as the exception's message
                if (names is _CONTEXT_TOO_LONG and not summary and not pydantic_cause
                        and _CONTEXT_OVERRIDE_HINT not in msg and line.level not in ("ERROR", "CRITICAL")):
                    continue  # SGLang's warning when the user allowed the longer context: it starts
                fatal_class = kind != KV_CACHE_TOO_SMALL or "KV pool holds" not in msg
                if kind == TP_MEMORY_UNBALANCED and not summary:
                    fatal_class = False  # SGLang only warns when its balance check is switched off
                self._add_error(kind, _numbers(names, m), stripped, fatal_class=fatal_class)
                break
        else:
            bare_assert = summary is not None and summary.group("exc") == "AssertionError"
            if bare_assert and _HEAD_ASSERT_RE.search(self._last_code_line):
                self._add_error(HEADS_NOT_DIVISIBLE, {}, f"{stripped} ({self._last_code_line.strip()})",
                                fatal_class=True)
            elif pydantic_cause:
                if self._cause is None:  # the validator's own words beat "1 validation error for X"
                    self._cause = _PYDANTIC_TAIL_RE.sub("", stripped)[:_MAX_ERROR_LINE]
            elif summary or _FAILURE_RE.search(msg) or _TRACEBACK_RE.match(msg) or line.level in ("ERROR",
                                                                                                   "CRITICAL"):
                cause = summary is not None and not _WRAPPER_RE.search(msg)
                if self._generic is None:
                    self._generic, self._generic_is_cause = stripped[:_MAX_ERROR_LINE], cause
                elif cause and not self._generic_is_cause:
                    # vLLM's worker logs "WorkerProc failed to start." and then the traceback whose last
                    # line is the exception: that line is the root cause, the first one only says it failed
                    self._generic, self._generic_is_cause = stripped[:_MAX_ERROR_LINE], True
                m = _EXIT_CODE_RE.search(msg)
                if m and "exit_code" not in self._generic_numbers:
                    self._generic_numbers["exit_code"] = int(m.group(1))
                if summary and self._generic is not None and _TRACEBACK_RE.match(self._generic):
                    self._generic = stripped[:_MAX_ERROR_LINE]  # the exception beats "Traceback ..."
        if msg.startswith("    ") and not msg.lstrip().startswith("File "):
            self._last_code_line = msg
        if summary:
            self._validation_open = summary.group("exc") == "ValidationError"
        elif pydantic_cause:
            self._validation_open = False  # its first cause is the one to report

    def _add_error(self, kind: ErrorKind, numbers: dict[str, float], line: str, *, fatal_class: bool) -> None:
        line = _PYDANTIC_TAIL_RE.sub("", line)[:_MAX_ERROR_LINE]
        for err in self._errors:
            if err.kind == kind:
                for k, v in numbers.items():
                    err.numbers.setdefault(k, v)
                if fatal_class and not err.fatal_class:
                    err.fatal_class = True
                return
        self._errors.append(_Error(kind, dict(numbers), line, fatal_class))

    def _chosen_error(self) -> _Error | None:
        for err in self._errors:
            if err.fatal_class:
                return err
        return self._errors[0] if self._errors else None

    # -- result --------------------------------------------------------------------------------------
    def result(self) -> StartupLog:
        tokens_all = list(self._tokens)
        if not tokens_all and self._max_total:
            tokens_all = [t for t, _, _ in self._max_total]
        if not tokens_all and self._blocks:
            block = _infer_block_size(self._blocks[0], self._concurrency[0] if self._concurrency else None)
            if block is not None:
                tokens_all = [b * block for b in self._blocks]
        err = self._chosen_error()
        kv_tokens = min(tokens_all) if tokens_all else None
        if kv_tokens is None and err is not None and "kv_tokens" in err.numbers:
            kv_tokens = int(err.numbers["kv_tokens"])  # V0 / SGLang say the pool in the error itself
            tokens_all = [kv_tokens]
        conc: float | None = None
        conc_len: int | None = None
        if self._concurrency:
            conc_len, conc = min(self._concurrency, key=lambda c: c[1])
        elif self.grammar is not None and self.grammar.concurrency_from_context and kv_tokens is not None:
            ctx = next((c for _, c, _ in self._max_total if c), None)
            if ctx:
                conc_len, conc = ctx, round(kv_tokens / ctx, 2)
        available = (min(self._available) if self._available
                     else min(self._sgl_kv_gib) if self._sgl_kv_gib
                     else min(self._available_fallback) if self._available_fallback else None)
        kind: ErrorKind | None = None
        numbers: Mapping[str, float] = {}
        line: str | None = None
        if err is not None:
            kind, numbers, line = err.kind, err.numbers, err.line
        elif self._generic is not None or self._cause is not None:
            kind, numbers, line = OTHER_ERROR, self._generic_numbers, self._cause or self._generic
        return StartupLog(
            engine=self.engine,
            kv_tokens=kv_tokens,
            kv_tokens_all=tuple(tokens_all),
            gpu_blocks=min(self._blocks) if self._blocks else None,
            max_concurrency=conc,
            max_concurrency_len=conc_len,
            available_kv_gib=available,
            weights_gib=max(self._weights) if self._weights else None,
            error_kind=kind,
            error_numbers=MappingProxyType(dict(numbers)),
            error_line=line,
            ready=self.ready,
            config=MappingProxyType(dict(self._config.get(self.engine or "", {}))),
        )


def _infer_block_size(blocks: int, concurrency: tuple[int, float] | None) -> int | None:
    """vLLM V0 prints blocks, not tokens; the concurrency line (blocks x block size / len) says the size.

    Only a power of two that reproduces the printed concurrency (``%.2f``) is accepted: no guess.
    """
    if concurrency is None or blocks <= 0:
        return None
    length, x = concurrency
    tolerance = 0.005 * length + 1
    fits = [b for b in (2 ** i for i in range(12)) if abs(blocks * b - x * length) <= tolerance]
    return fits[0] if len(fits) == 1 else None

