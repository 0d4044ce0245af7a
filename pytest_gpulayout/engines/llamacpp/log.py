"""llama.cpp's startup log: the lines ``llama-server`` b11434 prints about its KV cache, buffers, context
and failures (``src/llama-kv-cache.cpp``, ``src/llama-context.cpp``, ``tools/server/server.cpp``), and
the watcher the startup check feeds them to."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.engines.llamacpp.flags import (
    ENGINE,
)
from pytest_gpulayout.launch.logparse import NO_KV_MEMORY, OOM, OTHER_ERROR, ErrorKind, StartupLog, clean

# ------------------------------------------------------------------------------------------------
# Log lines
# ------------------------------------------------------------------------------------------------
_F = r"(\d+(?:\.\d+)?)"
#: current (b5xxx+): "llama_kv_cache: size =  64.00 MiB (  2048 cells,  4 layers,  4/4 seqs), K (f16): ..."
#: mid-2025 "llama_kv_cache_unified: size = ... (4096 cells, 32 layers, 1 seqs), K (f16): ..."
_KV_SIZE_RE = re.compile(
    r"(?P<fn>\w*kv_cache\w*): size = +" + _F + r" MiB \( *(?P<cells>\d+) cells, +(?P<layers>\d+) layers"
    r"(?:, +(?P<seqs>\d+)(?:/(?P<streams>\d+))? seqs)?\), K \((?P<tk>\w+)\): +" + _F
    + r" MiB, V \((?P<tv>\w+)\): +" + _F + r" MiB")
#: older releases: "llama_new_context_with_model: KV self size  =  256.00 MiB, K (f16): 128.00 MiB, V (f16): ..."
_KV_SELF_RE = re.compile(
    r"KV self size += +" + _F + r" MiB(?:, K \((?P<tk>\w+)\): +" + _F + r" MiB, V \((?P<tv>\w+)\): +" + _F
    + r" MiB)?")
#: the older releases' cache header, before their KV self size line (ggml-org/llama.cpp#11200, b4462):
#: "llama_kv_cache_init: kv_size = 32768, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 64, can_shift = 1"
#: and mid-2025 (InftyAI/llmaz#402): "llama_kv_cache_unified: kv_size = 4096, type_k = 'f16', ..., n_layer = 32, ..."
_KV_INIT_RE = re.compile(r"kv_cache\w*: kv_size = (\d+),.*\bn_layer = (\d+)")
#: ``llama_context::sched_reserve`` (src/llama-context.cpp): a failed compute-buffer reservation that
#: llama.cpp retries with a smaller graph; only a failure after it stops the load.
_PP_RETRY_RE = re.compile(r"compute buffer allocation failed, retrying without pipeline parallelism")
#: "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB" (also llama_kv_cache_init / _unified / iswa)
_KV_BUFFER_RE = re.compile(r"(?P<buf>\S+) KV buffer size = +" + _F + r" MiB")
_MODEL_BUFFER_RE = re.compile(r"(?P<buf>\S+) model buffer size = +" + _F + r" MiB")
_COMPUTE_BUFFER_RE = re.compile(r"(?P<buf>\S+) compute buffer size = +" + _F + r" MiB")
_N_CTX_RE = re.compile(r"llama_(?:context|new_context_with_model): n_ctx += (\d+)")
#: "llama_context: n_ctx_seq             = 512" (b11434); "n_ctx_per_seq = 4096" (2025)
_N_CTX_SEQ_RE = re.compile(r"n_ctx_(?:per_)?seq += (\d+)")

# What llama-server says about its own configuration (``StartupLog.config``), as b11434 prints it:
#: ``common_params_print_info`` (``common/common.cpp``): "build 11434 (b11434) with GNU 12.2.0 for Linux
#: x86_64" (a trace line: the launch's ``--verbosity 4`` shows it); before 2026 the server's own "build:
#: 4462 (c05e8c99) with cc ... for x86_64-linux-gnu"
_BUILD_RE = re.compile(r"\bbuild:? (\d+) \([^)]*\) with ")
#: ``llama_context::llama_context`` (``src/llama-context.cpp``): "n_seq_max             = 3",
#: "kv_unified            = false"
_N_SEQ_MAX_RE = re.compile(r"llama_context: n_seq_max += (\d+)")
_KV_UNIFIED_RE = re.compile(r"llama_context: kv_unified += (true|false)")
#: ``print_info`` (``src/llama-model.cpp``): "n_ctx_train           = 4096"
_N_CTX_TRAIN_RE = re.compile(r"\bn_ctx_train += (\d+)")
#: ``load_tensors`` (``src/llama-model.cpp``, printed where a GPU backend is built in): "offloaded 20/33
#: layers to GPU", out of ``n_layer + 1`` (the output layer counts)
_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
#: ``llama_prepare_model_devices`` (``src/llama.cpp``): one line per device the model uses, "using device
#: CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - 23723 MiB free" (only ``main_gpu``'s with split mode
#: none); with split mode tensor first "creating a Meta device for tensor parallelism from 2 devices:"
_USING_DEVICE_RE = re.compile(r"\busing device (\S+) \(.*\) - \d+ MiB free")
_META_DEVICE_RE = re.compile(r"creating a Meta device (?:for tensor parallelism from|with) (\d+) devices")
#: ``server_context::load_model`` (``tools/server/server-context.cpp``): "initializing, n_slots = 3,
#: n_ctx_slot = 512, kv_unified = 'false'" (after the KV cache: a launch stopped at its KV lines may not
#: reach it)
_SLOTS_RE = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)")
#: a row split's weights live in a split buffer ("CUDA_Split model buffer size", SYCL's "SYCL_Split")
_SPLIT_BUFFER = "_Split"
#: words of the lines above, for the watcher's cheap test before its patterns
_CONFIG_WORDS = ("build", "n_seq_max", "kv_unified", "offloaded", "using device", "Meta device", "n_slots")
_READY_RE = re.compile(r"server is listening on|\blistening on (?:https?|unix)://|all slots are idle"
                       r"|HTTP server listening")
_OWN_RE = re.compile(r"\b(?:llama_model_loader|llama_kv_cache|llama_context|llama_new_context_with_model|"
                     r"llm_load_tensors|load_tensors|print_info|llama_model_load|ggml_cuda_init|"
                     r"llama_server|srv +load_model|main: server is listening)\b")

#: "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on device 1: cudaMalloc failed: out of memory"
_CUDA_OOM_RE = re.compile(r"allocating " + _F + r" MiB on device (\d+): cudaMalloc failed: out of memory")
_ALLOC_FAIL_RE = re.compile(r"failed to allocate (\S+) buffer of size (\d+)")
_KV_ALLOC_FAIL_RE = re.compile(r"failed to allocate buffer for kv cache|failed to allocate kv cache|"
                               r"llama_kv_cache\w*: failed to allocate")
_MODEL_FAIL_RE = re.compile(r"error loading model: (.*)|failed to load model|exiting due to model loading error"
                            r"|failed to initialize the context: (.*)|failed to create context with model")
_OTHER_FATAL_RE = re.compile(
    r"invalid value for main_gpu|does not support split buffers|LLAMA_SPLIT_MODE_TENSOR not implemented|"
    r"SPLIT_MODE_TENSOR requires flash_attn|Unsupported cache type|GGML_ASSERT|terminate called|"
    r"cache type \w+ with block size \d+ does not divide|"
    r"couldn't start HTTP listener|error: invalid argument|error while handling argument")


@dataclass(frozen=True)
class KvReport:
    """One KV cache the log reported: its size line (and, for sliding-window models, one per cache)."""

    mib: float
    cells: int | None
    layers: int | None
    seqs: int | None
    streams: int | None
    type_k: str | None
    type_v: str | None
    k_mib: float | None
    v_mib: float | None


@dataclass(frozen=True)
class LlamaCppLog:
    """What a llama.cpp startup log says. ``kv_buffers_mib`` maps each buffer (``CUDA0``, ``CPU``) to
    its KV MiB summed over the caches (a sliding-window model prints one set of lines per cache)."""

    kv: tuple[KvReport, ...] = ()
    kv_buffers_mib: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    model_buffers_mib: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    compute_buffers_mib: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    n_ctx: int | None = None
    n_ctx_seq: int | None = None
    error_kind: ErrorKind | None = None
    error_numbers: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    error_line: str | None = None
    ready: bool = False
    llamacpp_lines: bool = False
    #: what it said about its own configuration (None / empty: the log does not say)
    build: int | None = None
    n_seq_max: int | None = None
    kv_unified: bool | None = None
    n_ctx_train: int | None = None
    n_slots: int | None = None
    n_ctx_slot: int | None = None
    offloaded: tuple[int, int] | None = None   # (layers offloaded, layers offloadable = n_layer + 1)
    devices: tuple[str, ...] = ()              # the devices it used, in order ("CUDA0", "CUDA1", "RPC0[...]")
    meta_devices: int | None = None            # split mode tensor: devices under its Meta device

    @property
    def split_mode(self) -> str | None:
        """The split mode the log shows: ``tensor`` (a Meta device), ``row`` (a split buffer of weights);
        None where it does not tell (``layer`` and ``none`` differ only in the devices used)."""
        if self.meta_devices is not None:
            return "tensor"
        if any(_SPLIT_BUFFER in name for name in self.model_buffers_mib):
            return "row"
        return None

    @property
    def request_len(self) -> int | None:
        """The longest request one slot takes: the server's ``n_ctx_slot`` (``n_ctx_seq`` capped at
        ``n_ctx_train``, ``tools/server/server-context.cpp``), else ``n_ctx_seq``."""
        if self.n_ctx_slot is not None:
            return self.n_ctx_slot
        if self.n_ctx_seq is not None and self.n_ctx_train is not None:
            return min(self.n_ctx_seq, self.n_ctx_train)
        return self.n_ctx_seq

    @property
    def config(self) -> dict[str, str]:
        """``StartupLog.config``: what llama-server said it ran with, in ``logparse.CONFIG_KEYS`` names
        where they mean the same and in llama.cpp's own names where not.

        - ``version``: ``b<build>`` (llama.cpp's releases are build numbers; ``engine_version`` pins one);
        - ``max_model_len``: the longest request, one slot's context (:attr:`request_len`). llama.cpp has
          no such flag: the deployment's ``ctx_size`` is the total ``--ctx-size`` (``flags.server_argv``),
          which ``llama_context`` splits over ``--parallel`` slots unless the cache is unified
          (``memory.split_context``); ``n_ctx`` and ``n_ctx_seq`` keep both figures;
        - ``split_mode``: only where the log shows it (:attr:`split_mode`);
        - ``n_ctx``, ``n_ctx_seq``, ``n_seq_max``, ``kv_unified``, ``n_slots``, ``n_ctx_train``,
          ``offloaded_layers`` / ``offloadable_layers``, ``devices`` (comma separated), ``meta_devices``.
        """
        out: dict[str, str] = {}
        if self.build is not None:
            out["version"] = f"b{self.build}"
        if self.request_len is not None:
            out["max_model_len"] = str(self.request_len)
        if self.split_mode is not None:
            out["split_mode"] = self.split_mode
        for key, value in (("n_ctx", self.n_ctx), ("n_ctx_seq", self.n_ctx_seq), ("n_seq_max", self.n_seq_max),
                           ("n_slots", self.n_slots), ("n_ctx_train", self.n_ctx_train),
                           ("meta_devices", self.meta_devices)):
            if value is not None:
                out[key] = str(value)
        if self.kv_unified is not None:
            out["kv_unified"] = "true" if self.kv_unified else "false"
        if self.offloaded is not None:
            out["offloaded_layers"], out["offloadable_layers"] = str(self.offloaded[0]), str(self.offloaded[1])
        if self.devices:
            out["devices"] = ",".join(self.devices)
        return out

    @property
    def kv_mib(self) -> float | None:
        """All KV memory the log reported: the per-buffer lines summed, else the size lines."""
        if self.kv_buffers_mib:
            return round(sum(self.kv_buffers_mib.values()), 2)
        if self.kv:
            return round(sum(r.mib for r in self.kv), 2)
        return None

    @property
    def kv_tokens(self) -> int | None:
        """Cells the full-attention cache holds over all its streams (the largest cache reported)."""
        sizes = [r.cells * (r.streams or 1) for r in self.kv if r.cells is not None]
        if sizes:
            return max(sizes)
        return self.n_ctx

    def to_startup_log(self) -> StartupLog:
        """The ``parse-log --json`` shape shared with vLLM and SGLang (design.md)."""
        base = [r for r in self.kv if r.cells is not None]
        tokens = self.kv_tokens
        conc: float | None = None
        conc_len: int | None = None
        if base:
            big = max(base, key=lambda r: r.cells or 0)
            streams = big.streams or 1
            conc_len = big.cells
            conc = float(streams)
        return StartupLog(
            engine=ENGINE if self.llamacpp_lines else None, kv_tokens=tokens,
            kv_tokens_all=tuple((r.cells or 0) * (r.streams or 1) for r in base) if base else (
                (tokens,) if tokens is not None else ()),
            gpu_blocks=None, max_concurrency=conc, max_concurrency_len=conc_len,
            available_kv_gib=round(self.kv_mib / 1024, 4) if self.kv_mib is not None else None,
            weights_gib=round(sum(self.model_buffers_mib.values()) / 1024, 4) if self.model_buffers_mib else None,
            error_kind=self.error_kind, error_numbers=self.error_numbers, error_line=self.error_line,
            ready=self.ready, config=MappingProxyType(self.config))

    def to_json(self) -> dict[str, Any]:
        return {"kv_mib": self.kv_mib, "kv_buffers_mib": dict(self.kv_buffers_mib),
                "model_buffers_mib": dict(self.model_buffers_mib),
                "compute_buffers_mib": dict(self.compute_buffers_mib), "n_ctx": self.n_ctx,
                "n_ctx_seq": self.n_ctx_seq, "config": self.config,
                "kv_caches": [{"mib": r.mib, "cells": r.cells, "layers": r.layers, "seqs": r.seqs,
                               "streams": r.streams, "type_k": r.type_k, "type_v": r.type_v} for r in self.kv]}


class LlamaCppLogWatcher:
    """The llama.cpp log parser fed one line at a time (the launcher's ``LogWatcher`` protocol:
    ``feed``, ``lines``, ``kv_complete``, ``failed``, ``ready``, ``result()``).

    The KV pool is complete once a size line has come after its buffer lines and the compute buffers
    were reserved (they follow the last KV cache), or the server said it is listening. A sliding-window
    model prints two caches; waiting for the compute buffers keeps both.
    """

    def __init__(self) -> None:
        self.lines = 0
        self._kv: list[KvReport] = []
        self._kv_buf: dict[str, float] = {}
        self._model_buf: dict[str, float] = {}
        self._compute_buf: dict[str, float] = {}
        self._n_ctx: int | None = None
        self._n_ctx_seq: int | None = None
        self._said: dict[str, Any] = {}  # LlamaCppLog's configuration fields, first value of each
        self._devices: list[str] = []
        self._kv_init: tuple[int, int] | None = None  # (kv_size, n_layer) for the next KV self size line
        self._errors: list[tuple[ErrorKind, dict[str, float], str]] = []
        self._fatal = False
        self.ready = False
        self._own = False

    @property
    def kv_complete(self) -> bool:
        return bool(self._kv) and (bool(self._compute_buf) or self.ready)

    @property
    def failed(self) -> bool:
        return self._fatal

    def feed_lines(self, lines: Sequence[str]) -> None:
        """``feed`` each (the launcher hands its output over a chunk at a time)."""
        for raw in lines:
            self.feed(raw)

    def feed(self, raw: str) -> None:
        self.lines += 1
        msg = clean(raw)
        if "MiB" not in msg and "error" not in msg.lower() and "fail" not in msg.lower() and not (
                "listening" in msg or "n_ctx" in msg or "idle" in msg or "assert" in msg.lower()
                or "terminate" in msg or "invalid" in msg or "not implemented" in msg or "split" in msg
                or "kv_size" in msg or any(w in msg for w in _CONFIG_WORDS)):
            if not self._own and _OWN_RE.search(msg):
                self._own = True
            return
        if _OWN_RE.search(msg):
            self._own = True
        if _READY_RE.search(msg):
            self.ready = True
            return
        m = _KV_SIZE_RE.search(msg)
        if m:
            self._own = True
            seqs = int(m.group("seqs")) if m.group("seqs") else None
            streams = int(m.group("streams")) if m.group("streams") else None
            self._kv.append(KvReport(float(m.group(2)), int(m.group("cells")), int(m.group("layers")), seqs,
                                     streams, m.group("tk"), m.group("tv"), float(m.group(6)), float(m.group(8))))
            return
        m = _KV_INIT_RE.search(msg)
        if m:
            self._own = True
            self._kv_init = (int(m.group(1)), int(m.group(2)))
            return
        m = _KV_SELF_RE.search(msg)
        if m:
            self._own = True
            cells, layers = self._kv_init or (None, None)
            self._kv_init = None
            self._kv.append(KvReport(float(m.group(1)), cells, layers, None, None, m.group("tk"), m.group("tv"),
                                     float(m.group(3)) if m.group(3) else None,
                                     float(m.group(5)) if m.group(5) else None))
            return
        for rx, into in ((_KV_BUFFER_RE, self._kv_buf), (_MODEL_BUFFER_RE, self._model_buf),
                         (_COMPUTE_BUFFER_RE, self._compute_buf)):
            m = rx.search(msg)
            if m:
                self._own = True
                buf = m.group("buf")
                into[buf] = round(into.get(buf, 0.0) + float(m.group(2)), 2)
                return
        m = _N_CTX_RE.search(msg)
        if m and self._n_ctx is None:  # the first context is the served model's (a draft model's follows)
            self._n_ctx = int(m.group(1))
        m = _N_CTX_SEQ_RE.search(msg)
        if m and self._n_ctx_seq is None:
            self._n_ctx_seq = int(m.group(1))
        self._config_in(msg)
        if self.ready:
            return
        self._errors_in(msg)

    def _config_in(self, msg: str) -> None:
        """The lines where llama-server says what it runs with (the first of each kind counts)."""
        for key, rx in (("build", _BUILD_RE), ("n_seq_max", _N_SEQ_MAX_RE), ("n_ctx_train", _N_CTX_TRAIN_RE),
                        ("meta_devices", _META_DEVICE_RE)):
            m = rx.search(msg)
            if m and key not in self._said:
                self._said[key] = int(m.group(1))
        m = _KV_UNIFIED_RE.search(msg)
        if m and "kv_unified" not in self._said:
            self._said["kv_unified"] = m.group(1) == "true"
        m = _OFFLOADED_RE.search(msg)
        if m and "offloaded" not in self._said:
            self._said["offloaded"] = (int(m.group(1)), int(m.group(2)))
        m = _SLOTS_RE.search(msg)
        if m and "n_slots" not in self._said:
            self._said["n_slots"], self._said["n_ctx_slot"] = int(m.group(1)), int(m.group(2))
        m = _USING_DEVICE_RE.search(msg)
        if m and self._n_ctx is None and m.group(1) not in self._devices:  # the served model's devices
            self._devices.append(m.group(1))

    def _errors_in(self, msg: str) -> None:
        line = msg.strip()[:600]
        if _PP_RETRY_RE.search(msg):
            # the allocation failures before this line were recovered from (ggml-org/llama.cpp#26297)
            self._errors = [e for e in self._errors if e[0] != OOM]
            return
        m = _CUDA_OOM_RE.search(msg)
        if m:
            self._add(OOM, {"tried_mib": float(m.group(1)), "device_index": int(m.group(2))}, line)
            return
        if _KV_ALLOC_FAIL_RE.search(msg):
            self._add(NO_KV_MEMORY, {}, line)
            self._fatal = True
            return
        m = _ALLOC_FAIL_RE.search(msg)
        if m:
            self._add(OOM, {"tried_mib": round(int(m.group(2)) / 2**20, 2)}, line)
            return
        if _MODEL_FAIL_RE.search(msg) or _OTHER_FATAL_RE.search(msg):
            self._add(OTHER_ERROR, {}, line)
            self._fatal = True

    def _add(self, kind: ErrorKind, numbers: dict[str, float], line: str) -> None:
        for i, (k, nums, ln) in enumerate(self._errors):
            if k == kind:
                self._errors[i] = (k, {**numbers, **nums}, ln)
                return
        self._errors.append((kind, numbers, line))

    def _chosen(self) -> tuple[ErrorKind, dict[str, float], str] | None:
        """A memory cause beats the generic "error loading model" that follows it."""
        for kind in (OOM, NO_KV_MEMORY):
            for err in self._errors:
                if err[0] == kind:
                    return err
        return self._errors[0] if self._errors else None

    @property
    def is_llamacpp(self) -> bool:
        return self._own

    def result(self) -> LlamaCppLog:
        err = self._chosen()
        return LlamaCppLog(
            kv=tuple(self._kv), kv_buffers_mib=MappingProxyType(dict(self._kv_buf)),
            model_buffers_mib=MappingProxyType(dict(self._model_buf)),
            compute_buffers_mib=MappingProxyType(dict(self._compute_buf)), n_ctx=self._n_ctx,
            n_ctx_seq=self._n_ctx_seq, error_kind=err[0] if err else None,
            error_numbers=MappingProxyType(dict(err[1])) if err else MappingProxyType({}),
            error_line=err[2] if err else None, ready=self.ready, llamacpp_lines=self._own,
            devices=tuple(self._devices), **self._said)


class StartupLogWatcher(LlamaCppLogWatcher):
    """The same watcher, whose ``result()`` is the engines' common :class:`StartupLog` (what the
    launcher hands back); ``llamacpp_result()`` keeps the llama.cpp facts."""

    def result(self) -> StartupLog:  # type: ignore[override]
        return super().result().to_startup_log()

    def llamacpp_result(self) -> LlamaCppLog:
        return super().result()


def parse_llamacpp_log(text: str) -> LlamaCppLog:
    w = LlamaCppLogWatcher()
    for line in text.splitlines():
        w.feed(line)
    return w.result()


def looks_like_llamacpp(text: str) -> bool:
    """Some line only llama.cpp prints (its loader, KV cache, context or server function names)."""
    return any(_OWN_RE.search(line) or _KV_SIZE_RE.search(line) or _KV_SELF_RE.search(line)
               for line in text.splitlines())
