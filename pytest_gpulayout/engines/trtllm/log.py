"""TensorRT-LLM's startup log: its KV pool lines of both eras, its refusals, and the watcher that reads
them as the log streams (``parse-log --engine trtllm``; the startup check).

Pool lines (the C++ KV cache manager, printed as ``[TensorRT-LLM][INFO] ...``):

* 1.x / 0.17+ (PyTorch backend): ``[MemUsageChange] Allocated 52.51 GiB for max tokens in paged KV cache
  (860320).``, ``Max KV cache blocks per sequence: 65 [window size=2051], tokens per block=32, primary
  blocks=116617, secondary blocks=0`` (0.20: ``Max KV cache pages per sequence: 5 [window size=157]``),
  ``Number of blocks in KV cache primary pool: N``, ``Number of tokens per block: 32.``, ``Max tokens in
  paged KV cache: N``, and from ``_torch/pyexecutor/_util.py`` ``Peak memory during memory usage profiling
  (torch + non-torch): X GiB, available KV cache memory when calculating max tokens: Y GiB, ...``.
* The TensorRT engine era (0.x, Triton backend): ``Using 10718 tokens in paged KV cache.``, ``Allocate
  69524783104 bytes for k/v cache.``, ``Memory usage when calculating max tokens in paged kv cache:
  total: X GiB, available: Y GiB``.

The PyTorch backend builds its KV cache twice: a small one for the estimation run, then the real one
after ``Peak memory during memory usage profiling``. A pool line before that mark is the estimation's:
the pool is the last line after it (or the last line of a log that has no mark).

Refusals: ``maxTokensInPagedKvCache ... must be large enough to process at least 1 sequence`` and
``Impossible to fit in any sequence in kvCache`` (``kv_cache_too_small``), ``CUDA out of memory`` /
``OutOfMemoryError`` (``oom``), the ``Mapping`` and fraction texts (``divisibility.py``). ``Adjusted
max_seq_len to N`` is a warning: TensorRT-LLM starts with the shorter ``max_seq_len``
(``resource_manager._validate_and_adjust_attention_windows``); it is reported as ``kv_cache_too_small``
with ``max_seq_len_lowered_to`` in ``error_numbers``, and the process is not failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from pytest_gpulayout.inputs.files import strip_ansi
from pytest_gpulayout.launch.logparse import (
    HEADS_NOT_DIVISIBLE,
    KV_CACHE_TOO_SMALL,
    OOM,
    OTHER_ERROR,
    ErrorKind,
    StartupLog,
)

ENGINE = "trtllm"
_N = r"(\d{1,3}(?:,\d{3})+|\d+)"
_F = r"(\d+(?:\.\d+)?)"

#: lines only TensorRT-LLM prints (its logger's prefixes)
#: the PyTorch backend's own out-of-memory explanation (1.0.0rc1 on: tensorrt_llm/_torch/pyexecutor/
#: py_executor_creator.py, ``_ExecutorMemoryMonitor._maybe_explain_if_oom``: "out of memory" while one
#: component of the executor is made), then "The following component could not be created: KV cache",
#: "Total GPU memory (GiB): ...", "Free GPU memory before component creation attempt (GiB): ..."; a log
#: may hold it without any ``[TRT-LLM]`` tag (mlcommons/inference#2501: only the RuntimeError was pasted)
_EXECUTOR_OOM = "Executor creation failed due to insufficient GPU memory"
OWN_RE = re.compile(r"\[TensorRT-LLM\]|\[TRT-LLM\]|" + re.escape(_EXECUTOR_OOM))
_OOM_TOTAL_RE = re.compile(r"^Total GPU memory \(GiB\): " + _F)
_OOM_FREE_RE = re.compile(r"^Free GPU memory before component creation attempt \(GiB\): " + _F)
_ALLOCATED_RE = re.compile(r"\[MemUsageChange\] Allocated " + _F + r" GiB for max tokens in paged KV cache \("
                           + _N + r"\)")
_BLOCKS_PER_SEQ_RE = re.compile(r"Max KV cache (?:blocks|pages) per sequence: (\d+) \[window size=(\d+)\]"
                                r"(?:, tokens per block=(\d+), primary blocks=(\d+))?")
_PRIMARY_POOL_RE = re.compile(r"Number of blocks in KV cache primary pool: " + _N)
_TOKENS_PER_BLOCK_RE = re.compile(r"Number of tokens per block: (\d+)")
_MAX_TOKENS_RE = re.compile(r"Max tokens in paged KV cache: " + _N)
_USING_TOKENS_RE = re.compile(r"Using " + _N + r" tokens in paged KV cache")
_ALLOCATE_BYTES_RE = re.compile(r"Allocate (\d+) bytes for k/v cache")
_MEM_USAGE_RE = re.compile(r"Memory usage when calculating max tokens in paged kv cache: total:? " + _F
                           + r" ?GiB, available:? " + _F + r" ?GiB")
_PEAK_RE = re.compile(r"Peak memory during memory usage profiling \(torch \+ non-torch\): " + _F
                      + r" GiB, available KV cache memory when calculating max tokens: " + _F + r" GiB")
_WEIGHTS_RE = re.compile(r"Rank \d+ uses " + _F + r" GB for model weights|Memory used after loading model "
                         r"weights \(inside torch\) in memory usage profiling: " + _F + r" GiB")
_LOWERED_RE = re.compile(r"Adjusted max_seq_len to (\d+)")
_READY_RE = re.compile(r"Application startup complete")

_ERRORS: tuple[tuple[ErrorKind, re.Pattern[str], tuple[str, ...], bool], ...] = (
    (KV_CACHE_TOO_SMALL, re.compile(r"maxTokensInPagedKvCache.*must be large enough"), (), True),
    (KV_CACHE_TOO_SMALL, re.compile(r"Impossib\w* to fit in any sequence in kvCache"), (), True),
    (HEADS_NOT_DIVISIBLE, re.compile(r"world_size must equal to tp_size \* pp_size \* cp_size, but got (\d+) != "
                                     r"(\d+) \* (\d+) \* (\d+)"),
     ("world_size", "tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"), True),
    (HEADS_NOT_DIVISIBLE, re.compile(r"moe_tp_size \* moe_ep_size \* moe_cluster_size must equal to "
                                     r"moe_world_size, but got (\d+) != (\d+)"),
     ("moe_tp_ep_cluster", "moe_world_size"), True),
    (OTHER_ERROR, re.compile(r"free_gpu_memory_fraction must be a float between 0 and 1|Invalid freeMemFraction"),
     (), True),
    # torch's allocator; the executor's explanation above; the C++ runtime's CUDA check
    # (cpp/include/tensorrt_llm/common/cudaUtils.h: "[TensorRT-LLM][ERROR] CUDA runtime error in <call>:
    # <cudaGetErrorString>", "out of memory" for cudaErrorMemoryAllocation; a pasted copy may break that
    # line, leaving "...): out of memory (/.../tensorrt_llm/...)": NVIDIA/TensorRT-LLM#260)
    (OOM, re.compile(r"(?:CUDA out of memory|OutOfMemoryError)(?:.*?Tried to allocate " + _F + r" ?GiB)?"
                     r"|" + re.escape(_EXECUTOR_OOM) + r"|CUDA runtime error in .*: out of memory"
                     r"|CUDA error: out of memory|\): out of memory \(\S*tensorrt_llm"),
     ("tried_gib",), True),
)
_EXC_RE = re.compile(r"^(?:\w+\.)*\w*(?:Error|Exception)\b:|\[TensorRT-LLM\]\[ERROR\]|\[TRT-LLM\] \[E\]")


@dataclass
class _Error:
    kind: ErrorKind
    numbers: dict[str, float]
    line: str


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def looks_like_trtllm(text: str) -> bool:
    """Whether any line of ``text`` is one only TensorRT-LLM prints."""
    return any(OWN_RE.search(line) or _ALLOCATED_RE.search(line) or _USING_TOKENS_RE.search(line)
               for line in text.splitlines())


@dataclass
class TrtLlmLogWatcher:
    """TensorRT-LLM's log, fed one line at a time (``launch.launcher.Watcher``).

    ``kv_complete``: the final pool was reported (a pool line after the profiling mark, an old-era
    ``Using N tokens`` line, or any pool once the server is ready). ``expected_engines``: trtllm-serve
    runs one executor for the whole TP x PP world; its ranks agree on one pool (MIN over ranks).
    """

    expected_engines: int = 1
    ranks_per_engine: int = 1
    lines: int = 0
    ready: bool = False
    engine_seen: bool = False
    _profiled: bool = False
    _pools: list[int] = field(default_factory=list)        # tokens, in order (after the mark if any)
    _final_pools: list[int] = field(default_factory=list)
    _blocks: list[int] = field(default_factory=list)
    _block_size: int | None = None
    _window: int | None = None
    _available: list[float] = field(default_factory=list)
    _weights: list[float] = field(default_factory=list)
    _errors: list[_Error] = field(default_factory=list)
    _lowered: int | None = None
    _lowered_line: str | None = None
    _generic: str | None = None
    _fatal: bool = False

    @property
    def kv_complete(self) -> bool:
        return len(self._final_pools) >= self.expected_engines or (self.ready and bool(self._pools))

    @property
    def failed(self) -> bool:
        return self._fatal

    def feed_lines(self, lines: Sequence[str]) -> None:
        """``feed`` each (the launcher hands its output over a chunk at a time)."""
        for raw in lines:
            self.feed(raw)

    def feed(self, raw: str) -> None:
        self.lines += 1
        line = strip_ansi(raw).rstrip()
        if OWN_RE.search(line):
            self.engine_seen = True
        if _READY_RE.search(line):
            self.ready = True
            return
        if _PEAK_RE.search(line):
            m = _PEAK_RE.search(line)
            assert m is not None
            self._profiled = True
            self._available.append(float(m.group(2)))
        m = _ALLOCATED_RE.search(line)
        if m:
            tokens = _int(m.group(2))
            self._add_pool(tokens, final=self._profiled)
            self._available.append(float(m.group(1)))
        for rx in (_MAX_TOKENS_RE, _USING_TOKENS_RE):
            m = rx.search(line)
            if m:
                self._add_pool(_int(m.group(1)), final=self._profiled or rx is _USING_TOKENS_RE)
        m = _BLOCKS_PER_SEQ_RE.search(line)
        if m:
            self._window = int(m.group(2))
            if m.group(3):
                self._block_size = int(m.group(3))
                self._blocks.append(int(m.group(4)))
        m = _PRIMARY_POOL_RE.search(line)
        if m:
            self._blocks.append(_int(m.group(1)))
        m = _TOKENS_PER_BLOCK_RE.search(line)
        if m:
            self._block_size = int(m.group(1))
        m = _ALLOCATE_BYTES_RE.search(line)
        if m:
            self._available.append(round(int(m.group(1)) / 2**30, 2))
        m = _MEM_USAGE_RE.search(line)
        if m:
            self._available.append(float(m.group(2)))
        m = _WEIGHTS_RE.search(line)
        if m:
            self._weights.append(float(m.group(1) or m.group(2)))
        m = _LOWERED_RE.search(line)
        if m and not self.ready:
            self._lowered, self._lowered_line = int(m.group(1)), line.strip()
        if not self.ready:
            self._error_facts(line)

    def _add_pool(self, tokens: int, *, final: bool) -> None:
        self.engine_seen = True
        if final:
            self._final_pools.append(tokens)
        self._pools.append(tokens)

    def _error_facts(self, line: str) -> None:
        oom = next((e for e in self._errors if e.kind == OOM), None)
        if oom is not None:  # the executor's explanation goes on with the memory it saw
            for key, rx in (("total_gib", _OOM_TOTAL_RE), ("free_gib", _OOM_FREE_RE)):
                m = rx.search(line)
                if m:
                    oom.numbers.setdefault(key, float(m.group(1)))
        for kind, rx, names, fatal in _ERRORS:
            m = rx.search(line)
            if m:
                numbers = {n: float(g) for n, g in zip(names, m.groups(), strict=False) if n and g is not None}
                if not any(e.kind == kind for e in self._errors):
                    self._errors.append(_Error(kind, numbers, line.strip()[:600]))
                self._fatal = self._fatal or fatal
                return
        if _EXC_RE.search(line.strip()) and "[W]" not in line and "WARNING" not in line:
            self._fatal = True
            if self._generic is None:
                self._generic = line.strip()[:600]

    def result(self) -> StartupLog:
        finals = self._final_pools or self._pools[-1:]
        tokens_all = list(finals)
        if not tokens_all and self._blocks and self._block_size:
            tokens_all = [self._blocks[-1] * self._block_size]
        kv_tokens = min(tokens_all) if tokens_all else None
        kind: ErrorKind | None = None
        numbers: Mapping[str, float] = {}
        line: str | None = None
        if self._errors:
            e = self._errors[0]
            kind, numbers, line = e.kind, e.numbers, e.line
        elif self._generic is not None:
            kind, line = OTHER_ERROR, self._generic
        elif self._lowered is not None:
            kind, numbers, line = KV_CACHE_TOO_SMALL, {"max_seq_len_lowered_to": self._lowered}, self._lowered_line
        window = self._lowered or self._window
        conc = round(kv_tokens / window, 2) if kv_tokens is not None and window else None
        return StartupLog(
            engine=ENGINE if (self.engine_seen or tokens_all or self._blocks) else None,
            kv_tokens=kv_tokens,
            kv_tokens_all=tuple(tokens_all),
            gpu_blocks=self._blocks[-1] if self._blocks else None,
            max_concurrency=conc,
            max_concurrency_len=window if conc is not None else None,
            available_kv_gib=self._available[-1] if self._available else None,
            weights_gib=max(self._weights) if self._weights else None,
            error_kind=kind,
            error_numbers=MappingProxyType(dict(numbers)),
            error_line=line,
            ready=self.ready,
            # the estimation pool only: the launch stopped before the profiled one (or the paste cut it)
            kv_provisional=kv_tokens is not None and not self._final_pools and not self.ready,
        )


def parse_trtllm_log(text: str) -> StartupLog:
    """A whole TensorRT-LLM startup log."""
    w = TrtLlmLogWatcher()
    for line in text.splitlines():
        w.feed(line)
    return w.result()
