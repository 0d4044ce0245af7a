"""llama.cpp's memory arithmetic: which device each layer lands on, and the bytes each device holds.

Pure functions of the model (a :class:`GgufSpec`), the flags and each device's free memory; read in
llama.cpp b11434:

- context: ``llama_context`` (``src/llama-context.cpp``) pads ``n_ctx`` to 256; with a unified KV cache
  (the server's default of 4 auto slots) one stream of ``n_ctx`` cells, otherwise one stream per slot
  of ``GGML_PAD(n_ctx / n_seq_max, 256)`` cells (so ``n_ctx`` is rounded to a multiple). With
  ``--fit`` on and no ``-c``, ``common/fit.cpp`` sets ``n_ctx = n_ctx_train x streams`` first.
- layers: ``llama_model_base::load_tensors`` (``src/llama-model.cpp``): the split points are the
  cumulative ``tensor_split`` proportions, or each device's free memory when all are zero; with
  ``act = min(n_gpu_layers, n_layer + 1)`` layers offloaded starting at ``i_gpu_start = n_layer + 1 -
  n_gpu_layers``, layer ``il`` goes to the first device whose split point exceeds ``(il - i_gpu_start)
  / act``; the rest stay on the CPU. Layer ``n_layer`` is the output layer. The token embedding
  (the input layer) always stays on the CPU.
- ``none``: ``llama_prepare_model_devices`` (``src/llama.cpp``) keeps only ``main_gpu``.
- KV: ``llama_kv_cache`` (``src/llama-kv-cache.cpp``) allocates per layer ``ggml_row_size(type_k,
  n_embd_k_gqa) x cells x streams`` (and the same for V) in the buffer of the device holding the layer;
  an MLA model (``hparams.is_mla()``: deepseek2 and kin) gets no V tensor (``has_v = !is_mla``): its K
  row is the compressed latent, ``kv_lora_rank + n_rot`` values of its one KV head, and V is read as a
  view of it (``llama-graph.cpp`` decompresses it with ``wv_b``, ``v_mla``);
  sliding-window layers get ``GGML_PAD(min(cells, n_swa x (unified ? n_seq_max : 1) + n_ubatch), 256)``
  cells (``src/llama-kv-cache-iswa.cpp``).
- ``row`` (``common/arg.cpp``'s help for ``--main-gpu``): the matrix weights of every layer are split by
  rows across the devices in ``tensor_split`` proportions; the KV cache and intermediate results stay
  on ``main_gpu``.
- ``tensor`` (docs/multi-gpu.md, ``llama_meta_device_get_split_state``): weights and KV split across
  the devices by ``tensor_split`` (evenly when not given).

Compute buffers are an estimate (llama.cpp sizes them by reserving the graph): on each device that
holds layers, three ``n_ubatch x n_ff`` float32 activations of the MLP; on the device holding the
output layer also the ``n_ubatch x n_vocab`` float32 logits. The verdicts leave llama.cpp's own
``--fit`` margin (1024 MiB per device) for what the estimate misses.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpulayout.engines.llamacpp.flags import CACHE_TYPES, CTX_PAD, DEFAULT_UBATCH, LlamaCppFlags
from pytest_gpulayout.machine.facts import MIB
from pytest_gpulayout.model.gguf import GgufSpec


def pad(n: int, to: int = CTX_PAD) -> int:
    return (n + to - 1) // to * to


def row_bytes(cache_type: str, n: int) -> int:
    """``ggml_row_size``: bytes of ``n`` values of ``cache_type``."""
    block, size = CACHE_TYPES[cache_type]
    return n // block * size


@dataclass(frozen=True)
class ContextSize:
    """``n_ctx`` after llama.cpp's padding, cells per stream and the number of streams."""

    n_ctx: int
    cells: int          # n_ctx_seq: cells of each stream (what one slot can hold)
    streams: int        # 1 with a unified cache, else one per slot
    slots: int
    swa_cells: int      # cells of a sliding-window layer (== cells without SWA)

    @property
    def tokens(self) -> int:
        return self.cells * self.streams

    def to_json(self) -> dict[str, int]:
        return {"n_ctx": self.n_ctx, "cells": self.cells, "streams": self.streams, "slots": self.slots,
                "swa_cells": self.swa_cells}


def split_context(n_ctx: int, slots: int, *, unified: bool) -> tuple[int, int]:
    """``(n_ctx, n_ctx_seq)`` as ``llama_context`` (``src/llama-context.cpp``, b11434) sets them from a
    requested total of ``n_ctx`` (``--ctx-size``) over ``slots`` sequences (``n_seq_max``, ``--parallel``):
    ``n_ctx`` padded to 256; with a unified KV cache every sequence may use all of it
    (``n_ctx_seq = n_ctx``), otherwise each gets ``GGML_PAD(n_ctx / n_seq_max, 256)`` and ``n_ctx`` is
    rounded to ``n_ctx_seq x n_seq_max`` ("n_ctx is not divisible by n_seq_max - rounding down")."""
    n_ctx = pad(n_ctx)
    if unified:
        return n_ctx, n_ctx
    cells = pad(n_ctx // slots)
    return cells * slots, cells


def context_size(model: GgufSpec, flags: LlamaCppFlags, *, n_ubatch: int = DEFAULT_UBATCH) -> ContextSize:
    slots = flags.slots
    unified = flags.kv_unified
    streams = 1 if unified else slots
    if flags.ctx_size:
        n_ctx = flags.ctx_size
    elif flags.fit_on:
        n_ctx = model.n_ctx_train * streams      # common/fit.cpp, n_ctx_auto
    else:
        n_ctx = model.n_ctx_train
    n_ctx, cells = split_context(n_ctx, slots, unified=unified)
    swa = cells
    if model.swa_pattern and model.sliding_window:
        swa = min(cells, pad(min(cells, model.sliding_window * (slots if unified else 1) + n_ubatch)))
    return ContextSize(n_ctx, cells, streams, slots, swa)


def kv_layer_bytes(model: GgufSpec, il: int, flags: LlamaCppFlags, ctx: ContextSize) -> int:
    """K + V bytes of layer ``il`` (0 for a layer without KV heads)."""
    if model.n_head_kv_per_layer[il] == 0:
        return 0
    cells = ctx.swa_cells if model.is_swa(il) else ctx.cells
    return _cell_bytes(model, il, flags) * cells * ctx.streams


def _cell_bytes(model: GgufSpec, il: int, flags: LlamaCppFlags) -> int:
    """K (+ V, none for MLA: ``has_v = !is_mla`` in ``llama_kv_cache``) bytes of one cell of layer ``il``."""
    k = row_bytes(flags.type_k, model.n_embd_k_gqa(il))
    return k if model.is_mla else k + row_bytes(flags.type_v, model.n_embd_v_gqa(il))


def kv_total_bytes(model: GgufSpec, flags: LlamaCppFlags, ctx: ContextSize) -> int:
    return sum(kv_layer_bytes(model, il, flags, ctx) for il in range(model.num_hidden_layers))


def kv_bytes_per_token(model: GgufSpec, flags: LlamaCppFlags) -> int:
    """K + V bytes one full-attention token takes over all layers."""
    return sum(_cell_bytes(model, il, flags) for il in range(model.num_hidden_layers) if model.n_head_kv_per_layer[il])


def split_points(proportions: Sequence[float]) -> list[float]:
    total = sum(proportions)
    out, acc = [], 0.0
    for p in proportions:
        acc += p
        out.append(acc / total)
    return out


def layer_devices(n_layer: int, n_gpu_layers: int, proportions: Sequence[float]) -> tuple[int | None, ...]:
    """Device index (into ``proportions``) of layers ``0 .. n_layer`` (the last is the output layer);
    ``None`` for a layer left on the CPU. ``n_gpu_layers < 0`` means all (llama.cpp's -1 / -2)."""
    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    if not proportions or sum(proportions) <= 0:
        return (None,) * (n_layer + 1)
    splits = split_points(proportions)
    start = max(n_layer + 1 - ngl, 0)
    act = min(ngl, n_layer + 1)
    out: list[int | None] = []
    for il in range(n_layer + 1):
        if il < start or il - start >= act:
            out.append(None)
        else:
            out.append(min(bisect.bisect_right(splits, (il - start) / act), len(splits) - 1))
    return tuple(out)


@dataclass(frozen=True)
class DeviceUse:
    """What llama.cpp puts on one device (bytes). ``device`` is the position in the deployment's GPUs."""

    device: int
    gpu: int | None               # machine GPU index (None for the CPU)
    layers: tuple[int, ...]
    weights: int
    kv: int
    compute: int
    free_mib: int | None

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute

    @property
    def headroom_mib(self) -> float | None:
        return None if self.free_mib is None else round(self.free_mib - self.total / MIB, 1)

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "gpu": self.gpu, "layers": len(self.layers),
                "first_layer": self.layers[0] if self.layers else None,
                "last_layer": self.layers[-1] if self.layers else None,
                "weights_mib": round(self.weights / MIB, 2), "kv_mib": round(self.kv / MIB, 2),
                "compute_mib": round(self.compute / MIB, 2), "total_mib": round(self.total / MIB, 2),
                "free_mib": self.free_mib, "headroom_mib": self.headroom_mib}


@dataclass(frozen=True)
class Layout:
    """The whole picture for one (flags, devices) pair: per-device use and what stays on the CPU."""

    mode: str
    proportions: tuple[float, ...]      # the split llama.cpp uses (tensor_split or free memory)
    split_source: str                   # "tensor_split" | "free memory" | "even" | "main_gpu"
    devices: tuple[DeviceUse, ...]
    cpu: DeviceUse
    ctx: ContextSize
    kv_bytes_per_token: int

    @property
    def kv_total(self) -> int:
        return sum(d.kv for d in self.devices) + self.cpu.kv

    @property
    def cpu_layers(self) -> int:
        return len([il for il in self.cpu.layers])

    def to_json(self) -> dict[str, object]:
        return {"split_mode": self.mode, "proportions": [round(p, 4) for p in self.proportions],
                "split_source": self.split_source, "devices": [d.to_json() for d in self.devices],
                "cpu": self.cpu.to_json(), "context": self.ctx.to_json(),
                "kv_total_bytes": self.kv_total, "kv_bytes_per_token": self.kv_bytes_per_token}


def _compute_bytes(model: GgufSpec, has_layers: bool, has_output: bool, n_ubatch: int) -> int:
    out = 0
    if has_layers:
        out += 3 * n_ubatch * model.intermediate_size * 4
    if has_output:
        out += n_ubatch * (model.vocab_size + model.hidden_size) * 4
    return out


def plan_layout(model: GgufSpec, flags: LlamaCppFlags, gpus: Sequence[int], free_mib: Sequence[int | None], *,
                n_ubatch: int = DEFAULT_UBATCH) -> Layout:
    """Per-device weights, KV and compute for ``flags`` on the deployment's ``gpus`` (CUDA order)."""
    n_layer = model.num_hidden_layers
    ctx = context_size(model, flags, n_ubatch=n_ubatch)
    mode = flags.mode
    n_dev = len(gpus)
    if mode == "none" or n_dev == 0:
        main = flags.main_gpu or 0
        use = [main] if n_dev and main < n_dev else []
        props: tuple[float, ...] = tuple(1.0 if i in use else 0.0 for i in range(n_dev))
        source = "main_gpu"
    elif flags.tensor_split is not None and any(flags.tensor_split):
        props = tuple(list(flags.tensor_split)[:n_dev] + [0.0] * max(0, n_dev - len(flags.tensor_split)))
        source = "tensor_split"
    elif mode == "tensor":
        props = (1.0,) * n_dev
        source = "even"
    else:
        props = tuple(float(f) if f is not None else 1.0 for f in free_mib)
        source = "free memory"
    ngl = flags.ngl
    if mode in ("row", "tensor"):
        where = layer_devices(n_layer, ngl, (1.0,))      # offloaded layers all live on the split device
    else:
        where = layer_devices(n_layer, ngl, props)
    weights = [0] * n_dev
    kv = [0] * n_dev
    layers: list[list[int]] = [[] for _ in range(n_dev)]
    cpu_layers: list[int] = []
    cpu_weights = model.input_bytes
    cpu_kv = 0
    share = split_points(props) if sum(props) > 0 else []
    fractions = [share[0]] + [share[i] - share[i - 1] for i in range(1, len(share))] if share else []
    main = flags.main_gpu or 0
    has_output = [False] * n_dev
    for il in range(n_layer + 1):
        w = model.layer_weight_bytes(il) if il < n_layer else model.output_bytes
        k = kv_layer_bytes(model, il, flags, ctx) if il < n_layer else 0
        dev = where[il]
        if dev is None:
            cpu_weights += w
            cpu_kv += k
            if il < n_layer:
                cpu_layers.append(il)
            continue
        if mode in ("row", "tensor"):
            for d in range(n_dev):
                weights[d] += round(w * fractions[d])
                if fractions[d] > 0 and il < n_layer:
                    layers[d].append(il)
            if mode == "row":
                kv[main] += k
            else:
                for d in range(n_dev):
                    kv[d] += round(k * fractions[d])
            if il == n_layer:
                has_output[main if mode == "row" else n_dev - 1] = True
        else:
            weights[dev] += w
            kv[dev] += k
            if il < n_layer:
                layers[dev].append(il)
            else:
                has_output[dev] = True
    devices = []
    for d in range(n_dev):
        has = bool(layers[d]) or has_output[d]
        compute = _compute_bytes(model, bool(layers[d]), has_output[d], n_ubatch) if has else 0
        if mode == "row" and d == main and any(layers):
            compute = _compute_bytes(model, True, has_output[d], n_ubatch)
        devices.append(DeviceUse(d, gpus[d], tuple(layers[d]), weights[d], kv[d], compute, free_mib[d]))
    cpu = DeviceUse(-1, None, tuple(cpu_layers), cpu_weights, cpu_kv,
                    _compute_bytes(model, bool(cpu_layers), where[n_layer] is None, n_ubatch), None)
    return Layout(mode, props, source, tuple(devices), cpu, ctx, kv_bytes_per_token(model, flags))


def fitting_split(model: GgufSpec, flags: LlamaCppFlags, gpus: Sequence[int], free_mib: Sequence[int],
                  margin_mib: int, *, max_part: int = 8) -> tuple[int, ...] | None:
    """The simplest integer ``tensor_split`` (each part <= ``max_part``, closest to the cards' free memory
    ratio first) under which every device keeps ``margin_mib`` free; None when none does.

    Candidates are ordered by how far they are from the free-memory proportions, so two cards of 24 GB
    and 8 GB get ``3,1`` when that fits.
    """
    import itertools

    n = len(gpus)
    if n < 2:
        return None
    total_free = sum(free_mib)
    target = [f / total_free for f in free_mib]
    cands = []
    for parts in itertools.product(range(0, max_part + 1), repeat=n):
        if sum(parts) == 0 or any(p == 0 for p in parts):
            continue
        from math import gcd

        g = 0
        for p in parts:
            g = gcd(g, p)
        if g != 1:
            continue
        s = sum(parts)
        dist = sum(abs(p / s - t) for p, t in zip(parts, target, strict=True))
        cands.append((round(dist, 6), s, parts))
    cands.sort()
    for _, _, parts in cands:
        trial = LlamaCppFlags(**{**flags.__dict__, "tensor_split": tuple(float(p) for p in parts)})
        lay = plan_layout(model, trial, gpus, list(free_mib))
        if all(d.free_mib is not None and d.total / MIB + margin_mib <= d.free_mib for d in lay.devices):
            return parts
    return None
