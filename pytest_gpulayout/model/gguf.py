"""A model as llama.cpp sees it, read from its ``.gguf`` file (metadata and tensor table, never the data).

llama.cpp takes every shape number from the GGUF key/value section (``src/llama-model.cpp``,
``load_hparams``; key names in ``src/llama-arch.cpp``) and every weight's size from the tensor table,
so the prediction here uses the same two sources: no guess from a config.json, no bytes-per-parameter
rule. What is read:

- ``general.architecture`` and, under that prefix, ``block_count``, ``context_length``,
  ``embedding_length``, ``feed_forward_length``, ``attention.head_count``, ``attention.head_count_kv``
  (a number or one per layer; llama.cpp defaults it to ``head_count``), ``attention.key_length`` /
  ``value_length`` (default ``embedding_length / head_count``), ``attention.sliding_window``,
  ``expert_count``, and for MLA models (deepseek2 and kin) ``attention.key_length_mla`` /
  ``value_length_mla``: ``hparams.is_mla()`` (``src/llama-hparams.cpp``) is both being non-zero, and
  then ``key_length`` is the cached latent (kv_lora_rank + rope dims) with one KV head.
- Each tensor's name, ggml type and size in bytes. ``blk.<i>.*`` belongs to layer ``i``;
  ``token_embd.*`` is the input layer (llama.cpp keeps it on the CPU); ``output*`` is the output
  layer. Without an ``output.weight`` the output layer re-uses the token embedding
  (``TENSOR_DUPLICATED`` in the per-architecture loaders), so that copy is counted there too.

Split files (``name-00001-of-00003.gguf``) are read together: the tensor table is the union.

The header is walked here (``_Header``) with the ``gguf`` package's (PyPI, llama.cpp's ``gguf-py``) type
codes and ggml type sizes; it is imported inside ``load_gguf``, so importing this module costs nothing
at pytest start-up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import open_regular
from pytest_gpulayout.model.spec import FULL, SLIDING, ModelSpec

#: llama.cpp b11434 ``src/llama-hparams.h``: the most layers it builds (``llama-model.cpp`` asserts it)
LLAMA_MAX_LAYERS = 512

_BLK_RE = re.compile(r"^blk\.(\d+)\.")
_SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")

#: Sliding-window layer patterns llama.cpp hard-codes per architecture when the file has no
#: ``sliding_window_pattern`` (``hparams.set_swa_pattern(n)`` in ``src/llama-model.cpp``): with pattern
#: ``n`` layer ``il`` is sliding when ``il % n < n - 1``.
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gemma3n": 5}


@dataclass(frozen=True)
class GgufTensor:
    """One entry of the tensor table: where it lives in the model and how many bytes it takes."""

    name: str
    ggml_type: str      # "F16", "Q4_K", ...
    n_bytes: int
    layer: int | None   # ``blk.<i>``: i; None for input / output tensors

    @property
    def role(self) -> str:
        """``layer``, ``input`` (token embedding) or ``output`` (final norm, lm head)."""
        if self.layer is not None:
            return "layer"
        return "input" if self.name.startswith("token_embd") else "output"


@dataclass(frozen=True)
class GgufSpec(ModelSpec):
    """A :class:`ModelSpec` plus what llama.cpp's placement needs from the GGUF file itself."""

    arch: str = ""
    file_type: str | None = None                    # general.file_type as a name ("MOSTLY_Q4_K_M")
    tensors: tuple[GgufTensor, ...] = ()
    n_head_kv_per_layer: tuple[int, ...] = ()       # KV heads of each layer (0: layer has no KV cache)
    head_dim_k: int = 0
    head_dim_v: int = 0
    n_ctx_train: int = 0
    swa_pattern: int = 0                            # 0: no sliding-window layers
    files: tuple[str, ...] = field(default_factory=tuple)
    head_dim_k_mla: int = 0                         # attention.key_length_mla (0: not an MLA GGUF)
    head_dim_v_mla: int = 0                         # attention.value_length_mla

    @property
    def is_mla(self) -> bool:
        """``llama_hparams::is_mla``: both MLA head sizes given (the cache then keeps the latent only)."""
        return self.head_dim_k_mla != 0 and self.head_dim_v_mla != 0

    # -- bytes from the tensor table ------------------------------------------------------------
    def layer_weight_bytes(self, il: int) -> int:
        return sum(t.n_bytes for t in self.tensors if t.layer == il)

    @property
    def input_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors if t.role == "input")

    @property
    def output_bytes(self) -> int:
        """The output layer: final norm and lm head, or the duplicated token embedding when tied."""
        own = sum(t.n_bytes for t in self.tensors if t.role == "output")
        if not any(t.name == "output.weight" for t in self.tensors):
            own += sum(t.n_bytes for t in self.tensors if t.name == "token_embd.weight")
        return own

    @property
    def file_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    def is_swa(self, il: int) -> bool:
        """llama.cpp's ``hparams.is_swa(il)`` for the pattern ``set_swa_pattern`` sets."""
        n = self.swa_pattern
        return n > 0 and self.sliding_window is not None and il % n < n - 1

    def n_embd_k_gqa(self, il: int) -> int:
        return self.n_head_kv_per_layer[il] * self.head_dim_k

    def n_embd_v_gqa(self, il: int) -> int:
        return self.n_head_kv_per_layer[il] * self.head_dim_v


# ------------------------------------------------------------------------------------------------
# Reading: the header only (key/values and tensor table), never the tensor data
# ------------------------------------------------------------------------------------------------
class _Header:
    """GGUF's header walked with ``struct`` (value type codes and ggml type sizes from the ``gguf``
    package): it stops before the tensor data, so a multi-GB model is read in milliseconds and a file
    holding only the header (a model's metadata without its weights, as in ``examples/``) reads too.
    ``gguf.GGUFReader`` maps the data section and refuses such a file."""

    def __init__(self, path: Path):
        import struct

        import gguf

        self.path = path
        self.gguf = gguf
        self.struct = struct
        self.f = open_regular(path, what="GGUF file")  # closed in read(); a FIFO or /dev/zero is refused
        self.endian = "<"

    def _read(self, n: int) -> bytes:
        b = self.f.read(n)
        if len(b) != n:
            raise InputError("truncated GGUF header (the file ends inside its metadata)", where=self.path)
        return b

    def _u(self, fmt: str) -> Any:
        size = self.struct.calcsize(fmt)
        return self.struct.unpack(self.endian + fmt, self._read(size))[0]

    def _str(self) -> str:
        n = self._u("Q")
        if n > 1 << 24:
            raise InputError("corrupt GGUF header (a string of more than 16 MiB)", where=self.path)
        return self._read(n).decode("utf-8", "replace")

    _SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def _value(self, vtype: int, *, keep: bool) -> Any:
        if vtype == 8:  # STRING
            return self._str()
        if vtype == 9:  # ARRAY
            sub = self._u("I")
            n = self._u("Q")
            if sub == 8:
                if not keep:
                    for _ in range(n):
                        self.f.seek(self._u("Q"), 1)
                    return n
                return [self._str() for _ in range(n)]
            fmt = self._SCALARS.get(sub)
            if fmt is None:
                raise InputError(f"corrupt GGUF header (array of unknown type {sub})", where=self.path)
            size = self.struct.calcsize(fmt)
            if not keep:
                self.f.seek(size * n, 1)
                return n
            data = self._read(size * n)
            return list(self.struct.unpack(f"{self.endian}{n}{fmt}", data))
        fmt = self._SCALARS.get(vtype)
        if fmt is None:
            raise InputError(f"corrupt GGUF header (value of unknown type {vtype})", where=self.path)
        return self._u(fmt)

    def read(self) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
        """(key/values, [(tensor name, ggml type name, bytes)]). Token lists are kept as their length."""
        try:
            if self._read(4) != b"GGUF":
                raise InputError("not a GGUF file (no GGUF magic at the start)", where=self.path)
            version = self._u("I")
            if version & 0xFFFF == 0 and version != 0:
                self.endian = ">"
                version = self.struct.unpack(">I", self.struct.pack("<I", version))[0]
            if version not in (2, 3):
                raise InputError(f"GGUF version {version} is not read here (2 or 3 are)", where=self.path)
            n_tensors = self._u("Q")
            n_kv = self._u("Q")
            kv: dict[str, Any] = {}
            for _ in range(n_kv):
                key = self._str()
                vtype = self._u("I")
                kv[key] = self._value(vtype, keep=not key.startswith("tokenizer.ggml."))
            sizes = self.gguf.GGML_QUANT_SIZES
            qtypes = self.gguf.GGMLQuantizationType
            tensors = []
            for _ in range(n_tensors):
                name = self._str()
                n_dims = self._u("I")
                n_el = 1
                for _ in range(n_dims):
                    n_el *= self._u("Q")
                t = self._u("I")
                self._u("Q")  # offset
                try:
                    qt = qtypes(t)
                except ValueError:
                    raise InputError(f"tensor {name} has ggml type {t}, unknown to the gguf package",
                                     where=self.path) from None
                block, size = sizes[qt]
                tensors.append((name, qt.name, n_el // block * size))
            return kv, tensors
        finally:
            self.f.close()


def _int_key(fields: Mapping[str, Any], key: str, where: Path, *, required: bool = False,
             default: int | None = None) -> int | None:
    v = fields.get(key)
    if v is None:
        if required:
            raise InputError(f"missing GGUF key {key}: llama.cpp needs it to load this model", where=where)
        return default
    if isinstance(v, (list, str)) or isinstance(v, bool):
        raise InputError(f"GGUF key {key} must be one number, got {v!r:.60}", where=where)
    return int(v)


def _split_files(path: Path) -> list[Path]:
    m = _SPLIT_RE.match(path.name)
    if not m:
        return [path]
    n = int(m.group("n"))
    files = [path.with_name(f"{m.group('stem')}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputError(f"split GGUF: {len(missing)} of {n} parts are missing ({', '.join(missing[:3])})",
                         where=path)
    return files


def load_gguf(path: str | Path) -> GgufSpec:
    """Read ``path`` (and its sibling parts when it is a split file) into a :class:`GgufSpec`."""
    p = Path(path)
    try:
        import gguf  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency; reported in one line if someone removed it
        raise InputError("reading .gguf files needs the 'gguf' package: pip install gguf", where=p) from None
    files = _split_files(p)
    fields: dict[str, Any] = {}
    raw_tensors: list[tuple[str, str, int]] = []
    for i, f in enumerate(files):
        try:
            meta, ts = _Header(f).read()
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror or err}", where=f) from None
        if i == 0:
            fields = meta
        raw_tensors.extend(ts)
    arch = fields.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise InputError("missing GGUF key general.architecture: is this a llama.cpp model file?", where=p)
    a = arch
    n_layer = _int_key(fields, f"{a}.block_count", p, required=True) or 0
    if n_layer > LLAMA_MAX_LAYERS:
        raise InputError(f"{a}.block_count {n_layer:,} is past what llama.cpp builds: b11434 src/llama-model.cpp "
                         f"asserts \"GGML_ASSERT(hparams.n_layer_all > 0 && hparams.n_layer_all <= "
                         f"LLAMA_MAX_LAYERS)\" (LLAMA_MAX_LAYERS = {LLAMA_MAX_LAYERS}, src/llama-hparams.h)",
                         where=p)
    n_embd = _int_key(fields, f"{a}.embedding_length", p, required=True) or 0
    n_ctx_train = _int_key(fields, f"{a}.context_length", p, required=True) or 0
    heads = _per_layer(fields, f"{a}.attention.head_count", n_layer, p) or (0,) * n_layer
    kv = _per_layer(fields, f"{a}.attention.head_count_kv", n_layer, p) or heads
    ff = _per_layer(fields, f"{a}.feed_forward_length", n_layer, p) or (0,) * n_layer
    n_head = max(heads) if heads else 0
    head_k = _int_key(fields, f"{a}.attention.key_length", p, default=n_embd // n_head if n_head else 0) or 0
    head_v = _int_key(fields, f"{a}.attention.value_length", p, default=n_embd // n_head if n_head else 0) or 0
    k_mla = _int_key(fields, f"{a}.attention.key_length_mla", p) or 0
    v_mla = _int_key(fields, f"{a}.attention.value_length_mla", p) or 0
    window = _int_key(fields, f"{a}.attention.sliding_window", p)
    pattern = SWA_PATTERNS.get(a, 0) if window else 0
    experts = _int_key(fields, f"{a}.expert_count", p)
    tokens = fields.get("tokenizer.ggml.tokens")
    vocab = _int_key(fields, f"{a}.vocab_size", p) or (tokens if isinstance(tokens, int) else 0)
    tensors: list[GgufTensor] = []
    for tname, ttype, nbytes in raw_tensors:
        m = _BLK_RE.match(tname)
        tensors.append(GgufTensor(tname, ttype, nbytes, int(m.group(1)) if m else None))
    ftype = _int_key(fields, "general.file_type", p)
    ftype_name = None
    if ftype is not None:
        try:
            from gguf import LlamaFileType

            ftype_name = LlamaFileType(ftype).name
        except (ImportError, ValueError):
            ftype_name = str(ftype)
    name = fields.get("general.name")
    kinds = tuple(SLIDING if (pattern and window and il % pattern < pattern - 1) else FULL for il in range(n_layer))
    return GgufSpec(
        name=name if isinstance(name, str) and name else p.stem,
        source=str(p),
        model_type=a,
        num_attention_heads=n_head,
        num_key_value_heads=max(kv) if kv else n_head,
        head_dim=head_k,
        num_hidden_layers=n_layer,
        hidden_size=n_embd,
        intermediate_size=max(ff) if ff else 0,
        vocab_size=vocab,
        dtype="float16",
        tie_word_embeddings=not any(t.name == "output.weight" for t in tensors),
        max_position_embeddings=n_ctx_train,
        v_head_dim=head_v,
        layer_types=kinds,
        sliding_window=window,
        num_experts=experts,
        weight_bytes_measured=sum(t.n_bytes for t in tensors),
        architectures=(a,),
        arch=a,
        file_type=ftype_name,
        tensors=tuple(tensors),
        n_head_kv_per_layer=tuple(kv),
        head_dim_k=head_k,
        head_dim_v=head_v,
        n_ctx_train=n_ctx_train,
        swa_pattern=pattern,
        files=tuple(str(f) for f in files),
        head_dim_k_mla=k_mla,
        head_dim_v_mla=v_mla,
    )


def _per_layer(fields: Mapping[str, Any], key: str, n_layer: int, where: Path) -> tuple[int, ...] | None:
    """llama.cpp's ``get_key_or_arr``: one number for every layer, or an array of ``n_layer``."""
    v = fields.get(key)
    if v is None:
        return None
    if isinstance(v, Sequence) and not isinstance(v, str):
        if len(v) != n_layer:
            raise InputError(f"GGUF key {key} has {len(v)} entries for {n_layer} layers", where=where)
        return tuple(int(x) for x in v)
    return (int(v),) * n_layer
