"""The static checks for ``engine: llamacpp``, under the same five names as for vLLM and SGLang.

Why the same names: the pytest items (``gpulayout.yaml::<deployment>::<name>``), the summary table, JUnit properties
and ``check --json`` all key on them, and each question has a llama.cpp answer:

- ``placement``: are the GPUs there, whole (no MIG slice), and do ``main_gpu`` / ``tensor_split`` name
  devices that exist (``llama_prepare_model_devices`` in ``src/llama.cpp`` refuses an out-of-range
  ``main_gpu``)?
- ``heads``: a quantized cache type's block (32 values for q8_0/q4_0 ...) must divide the head size
  (``llama_init_from_model`` in ``src/llama-context.cpp`` refuses otherwise), and an MLA model
  (deepseek2 and kin: one latent cache whose V is a view of K) or deepseek4 takes one cache type for K
  and V (the same function refuses two); ``split_mode: tensor``
  needs an architecture on llama.cpp's list (``llm_arch_supports_sm_tensor``, ``src/llama-arch.cpp``);
  ``layer``/``row``/``none`` split nothing that must divide.
- ``balance``: weights + KV + compute per device against its free memory, with the ``tensor_split``
  that fits when one overflows (llama.cpp's own split is by free memory when ``tensor_split`` is not
  given: ``load_tensors`` in ``src/llama-model.cpp``); ``--fit`` (on by default, ``common/fit.cpp``)
  changes unset flags instead of failing, so an overflow it would absorb warns, naming what it costs.
- ``links``: ``row`` and ``tensor`` reduce across the GPUs inside every layer, so over PCIe they warn and
  ``layer`` (which only hands activations over at the split) is suggested; ``--rpc`` across hosts
  warns (llama.cpp's ``tools/rpc/README.md`` calls it a fragile, insecure proof of concept) and fails
  when an RPC server would have to listen on a non-loopback address the manifest does not name.
- ``kv_pool``: the KV cache llama.cpp allocates (cells x streams, by cache type) per device, against
  ``require``.

Pure functions of (deployment, machine, model); the facts they read are in the arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Omit, Override, Replace, Subject
from pytest_gpulayout.engines.llamacpp.flags import (
    CACHE_TYPES,
    FIT_TARGET_MIB,
    NO_TENSOR_SPLIT_ARCHS,
    ROW_SPLIT_GONE_BUILD,
    LlamaCppFlags,
    build_number,
    format_split,
)
from pytest_gpulayout.engines.llamacpp.manifest import is_loopback
from pytest_gpulayout.engines.llamacpp.memory import Layout, fitting_split, plan_layout
from pytest_gpulayout.findings import Finding, RawFacts, Status
from pytest_gpulayout.machine.facts import GIB, MIB, Machine, describe_link, is_nvlink, link_family, slowest
from pytest_gpulayout.model.gguf import GgufSpec
from pytest_gpulayout.model.spec import ModelSpec

#: The numbers behind one llama.cpp verdict: its own keys under the shared check names.
LlamaCppFacts = RawFacts


def _finding(check: str, status: Status, message: str, **values: Any) -> Finding:
    return Finding(check, status, message, LlamaCppFacts(values))


def _flags(dep: Deployment) -> LlamaCppFlags:
    return dep.llamacpp or LlamaCppFlags()


def deployment_gpus(dep: Deployment, machine: Machine) -> tuple[int, ...]:
    """Machine indices of the GPUs llama.cpp uses, in CUDA order: ``gpus``, else every visible one."""
    if dep.gpus is None:
        return machine.indices
    out = []
    for ref in dep.gpus:
        try:
            out.append(machine.gpu(ref).index)
        except KeyError:
            raise ValueError(f"gpus lists {ref!r}, which is not a visible GPU on this machine "
                             f"(visible: {', '.join(map(str, machine.indices)) or 'none'})") from None
    return tuple(out)


#: ``llama_init_from_model`` (``src/llama-context.cpp``): ``hparams.is_mla() || arch == LLM_ARCH_DEEPSEEK4``
#: refuse different K and V cache types
ONE_CACHE_TYPE_ARCHS = frozenset(("deepseek4",))


def _spec(model: ModelSpec) -> GgufSpec | None:
    return model if isinstance(model, GgufSpec) else None


def layout_for(dep: Deployment, machine: Machine, model: GgufSpec, flags: LlamaCppFlags | None = None) -> Layout:
    gpus = deployment_gpus(dep, machine)
    free = [machine.gpu(g).memory_free_mib for g in gpus]
    return plan_layout(model, flags or _flags(dep), gpus, free)


def _label(gpus: tuple[int, ...], d: int) -> str:
    return f"GPU{gpus[d]}"


# ------------------------------------------------------------------------------------------------
def check_placement(s: Subject) -> Finding:
    dep, machine = s.dep, s.machine
    flags = _flags(dep)
    try:
        gpus = deployment_gpus(dep, machine)
    except ValueError as err:
        return _finding("placement", Status.FAIL, f"{err}", gpus=None)
    data: dict[str, Any] = {"gpus": list(gpus), "split_mode": flags.mode}
    if not gpus:
        return _finding("placement", Status.WARN, "no GPU visible: llama.cpp would run every layer "
                                                  "on the CPU", **data)
    mig = [g for g in gpus if machine.gpu(g).mig]
    if mig:
        return _finding("placement", Status.FAIL, f"GPU{mig[0]} is a MIG slice; give llama.cpp whole "
                                                  f"GPUs", **data)
    main = flags.main_gpu or 0
    if main >= len(gpus):
        return _finding("placement", Status.FAIL,
                        f"main_gpu {main} but llama.cpp sees {len(gpus)} GPUs (0..{len(gpus) - 1}): "
                        f"it stops with 'invalid value for main_gpu'", **data)
    if flags.tensor_split is not None and len(flags.tensor_split) > len(gpus):
        return _finding("placement", Status.FAIL,
                        f"tensor_split has {len(flags.tensor_split)} proportions for {len(gpus)} "
                        f"GPUs: give one per GPU", **data)
    tenants = [g for g in gpus if machine.gpu(g).processes]
    used = ", ".join(f"GPU{g}" for g in gpus)
    if flags.mode == "none":
        used = f"GPU{gpus[main]} only (split_mode none, main_gpu {main})"
    if not machine.tenants_known:
        return _finding("placement", Status.WARN,
                        f"{used}; other tenants and MIG mode of these GPUs are unknown (machine from "
                        f"{machine.source}: topo text lists links only); probe the host (machine: auto) to check "
                        f"them", **data)
    if tenants:
        return _finding("placement", Status.WARN,
                        f"{used}; GPU{tenants[0]} runs other processes: their memory is not free for "
                        f"llama.cpp (the balance check counts free memory)", **data)
    return _finding("placement", Status.PASS, f"llama.cpp uses {used}", **data)


def check_heads(s: Subject) -> Finding:
    dep, machine, model = s.dep, s.machine, s.model
    flags = _flags(dep)
    spec = _spec(model)
    arch = spec.arch if spec else model.model_type
    try:
        n = len(deployment_gpus(dep, machine)) or 1
    except ValueError:
        n = 1
    per_rank = model.num_key_value_heads // n if flags.mode == "tensor" else model.num_key_value_heads
    data = {"num_attention_heads": model.num_attention_heads, "num_key_value_heads": model.num_key_value_heads,
            "kv_heads_per_rank": per_rank, "split_mode": flags.mode, "architecture": arch}
    if spec is not None and (spec.is_mla or arch in ONE_CACHE_TYPE_ARCHS) and flags.type_k != flags.type_v:
        why = "an MLA model: its cache keeps one latent row, read as V too" if spec.is_mla else f"'{arch}'"
        return _finding("heads", Status.FAIL,
                        f"cache_type_k {flags.type_k} and cache_type_v {flags.type_v} differ, which "
                        f"llama.cpp refuses for {why} (llama.cpp: 'model does not support different K "
                        f"({flags.type_k}) and V ({flags.type_v}) cache types'); give both the same type", **data)
    for which, ctype, dim in (("K", flags.type_k, model.head_dim), ("V", flags.type_v, model.head_dim_v)):
        block = CACHE_TYPES[ctype][0]
        if dim and dim % block:
            return _finding("heads", Status.FAIL,
                            f"cache_type_{which.lower()} {ctype} stores blocks of {block} values, which do "
                            f"not divide the head size {dim} (llama.cpp: '{which} cache type {ctype} with block size "
                            f"{block} does not divide n_embd_head_{which.lower()}={dim}'); use f16, bf16 or f32",
                            **data)
    if flags.mode == "tensor":
        if arch in NO_TENSOR_SPLIT_ARCHS:
            return _finding("heads", Status.FAIL,
                            f"split_mode tensor is not implemented for architecture '{arch}' (llama.cpp: "
                            f"'LLAMA_SPLIT_MODE_TENSOR not implemented for architecture'); use split_mode: layer",
                            **data)
        if model.num_key_value_heads % n:
            return _finding("heads", Status.WARN,
                            f"split_mode tensor over {n} GPUs splits {model.num_key_value_heads} KV heads "
                            f"unevenly: one GPU holds more KV than the others", **data)
        return _finding("heads", Status.PASS, f"split_mode tensor: {model.num_key_value_heads} KV heads "
                                              f"over {n} GPUs ({per_rank} each)", **data)
    return _finding("heads", Status.PASS, f"split_mode {flags.mode} keeps whole layers and heads: "
                                          f"nothing must divide", **data)


def _fmt_gib(b: float) -> str:
    return f"{b / GIB:.2f} GiB"


def check_balance(s: Subject) -> Finding:
    dep, machine, model = s.dep, s.machine, s.model
    spec = _spec(model)
    flags = _flags(dep)
    if spec is None:
        return _finding("balance", Status.FAIL, "engine llamacpp needs a .gguf model", devices=[])
    try:
        gpus = deployment_gpus(dep, machine)
    except ValueError as err:
        return _finding("balance", Status.SKIP, f"not judged: {err}", devices=[])
    free = [machine.gpu(g).memory_free_mib for g in gpus]
    if not gpus or any(f is None for f in free):
        return _finding("balance", Status.WARN, f"GPU memory unknown from {machine.source}: the "
                                                f"per-device fit cannot be judged", devices=[],
                        min_free_gib=None, max_free_gib=None, headroom_gib=None)
    lay = plan_layout(spec, flags, gpus, free)
    used = [d for d in lay.devices if d.layers or d.total]
    frees = [d.free_mib or 0 for d in lay.devices]
    data: dict[str, Any] = {
        "min_free_gib": round(min(frees) / 1024, 2), "max_free_gib": round(max(frees) / 1024, 2),
        "headroom_gib": round(min((d.headroom_mib or 0.0) for d in used) / 1024, 2) if used else None,
        "split_mode": lay.mode, "split_source": lay.split_source,
        "tensor_split_used": [round(p, 3) for p in lay.proportions], "devices": [d.to_json() for d in lay.devices],
        "cpu_layers": len(lay.cpu.layers), "suggested_tensor_split": None,
    }
    per_dev = "; ".join(f"{_label(gpus, d.device)}: {len(d.layers)} layers, {_fmt_gib(d.weights)} weights + "
                        f"{_fmt_gib(d.kv)} KV + {_fmt_gib(d.compute)} compute = {_fmt_gib(d.total)} of "
                        f"{(d.free_mib or 0) / 1024:.2f} GiB free" for d in lay.devices if d.total)
    split = (f"split {format_split(flags.tensor_split or ())} (tensor_split)" if lay.split_source == "tensor_split"
             else f"split by {lay.split_source}" + (f" ({':'.join(f'{p / 1024:.1f}' for p in frees)} GiB)"
                                                   if lay.split_source == "free memory" else ""))
    cpu = (f"; {len(lay.cpu.layers)} of {spec.num_hidden_layers} layers and their KV stay on the CPU "
           f"({_fmt_gib(lay.cpu.weights + lay.cpu.kv)} of host memory; much slower)" if lay.cpu.layers else "")
    head = f"split_mode {lay.mode}, {split}: {per_dev}{cpu}"
    over = [d for d in lay.devices if d.free_mib is not None and d.total / MIB > d.free_mib]
    tight = [d for d in lay.devices
             if d.free_mib is not None and d.total and d.total / MIB + FIT_TARGET_MIB > d.free_mib]
    if over or tight:
        suggest = fitting_split(spec, flags, gpus, [f or 0 for f in free], FIT_TARGET_MIB) \
            if lay.mode in ("layer", "row") and len(gpus) > 1 else None
        data["suggested_tensor_split"] = list(suggest) if suggest else None
        fix = (f"set tensor_split: [{', '.join(map(str, suggest))}] (from the cards' free memory: every GPU then "
               f"keeps {FIT_TARGET_MIB} MiB free)" if suggest else
               "lower ctx_size or parallel, use a smaller cache_type (q8_0), a smaller quant, or more GPUs")
        if over:
            d = over[0]
            short = d.total / MIB - (d.free_mib or 0)
            fit_absorbs = (flags.fit_on and flags.n_gpu_layers is None and flags.tensor_split is None
                           and lay.mode != "tensor" and lay.mode != "row")
            msg = (f"{head}. {_label(gpus, d.device)} overflows by {short / 1024:.2f} GiB")
            if fit_absorbs:
                what = "lower the context" if flags.ctx_size is None else "move layers to the CPU (slow)"
                return _finding("balance", Status.WARN, f"{msg}: --fit (on) will {what} to make it fit; to keep "
                                                        f"every layer on the GPUs, {fix}", **data)
            return _finding("balance", Status.FAIL, f"{msg}: llama.cpp will fail to allocate it "
                                                    f"(cudaMalloc out of memory); {fix}", **data)
        d = tight[0]
        return _finding("balance", Status.WARN,
                        f"{head}. {_label(gpus, d.device)} keeps only {d.headroom_mib:.0f} MiB free, under the "
                        f"{FIT_TARGET_MIB} MiB llama.cpp's --fit leaves for what the estimate misses; {fix}", **data)
    return _finding("balance", Status.PASS, f"{head}; every GPU keeps at least {FIT_TARGET_MIB} MiB free", **data)


def check_links(s: Subject) -> Finding:
    dep, machine = s.dep, s.machine
    flags = _flags(dep)
    try:
        gpus = deployment_gpus(dep, machine)
    except ValueError as err:
        return _finding("links", Status.SKIP, f"not judged: {err}", worst_link=None)
    rpc_note, rpc_status = _rpc_verdict(dep, flags)
    if rpc_status is Status.FAIL:
        return _finding("links", Status.FAIL, rpc_note, worst_link="NET", rpc=list(flags.rpc))
    if flags.mode == "none" or len(gpus) < 2:
        msg = "one GPU: no link between GPUs is used"
        return _finding("links", rpc_status if flags.rpc else Status.SKIP,
                        msg + (f"; {rpc_note}" if flags.rpc else ""), worst_link="NET" if flags.rpc else None)
    kinds = [machine.effective_link(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    known = [k for k in kinds if k is not None]
    worst = slowest(known)
    data = {"worst_link": worst, "split_mode": flags.mode, "rpc": list(flags.rpc)}
    if worst is None:
        return _finding("links", Status.WARN, f"the links between the GPUs are unknown from "
                                              f"{machine.source}", **data)
    where = "-".join(f"GPU{g}" for g in gpus)
    notes = []
    status = Status.PASS
    if flags.mode in ("row", "tensor") and not is_nvlink(worst):
        status = Status.FAIL if link_family(worst) == "NET" else Status.WARN
        notes.append(f"split_mode {flags.mode} reduces across {where} inside every layer, and they are joined by "
                     f"{worst} ({describe_link(worst)}): use split_mode: layer (the default), which only hands the "
                     f"activations on at the layer split")
    if flags.mode == "row":
        v = build_number(dep.engine_version)
        gone = v is not None and v >= ROW_SPLIT_GONE_BUILD
        status = Status.FAIL if gone else max(status, Status.WARN, key=lambda s: s.severity)
        notes.append("split_mode row is deprecated (docs/multi-gpu.md: superseded by tensor)"
                     + (f"; llama.cpp b{v}'s CUDA backend has no split buffers and stops with 'does not support split "
                        f"buffers'" if gone else ""))
    if flags.rpc:
        notes.append(rpc_note)
        status = max(status, rpc_status, key=lambda s: s.severity)
    if not notes:
        return _finding("links", Status.PASS, f"split_mode {flags.mode} over {where} ({worst}): only the "
                                              f"activations cross at each layer split, any link will do", **data)
    return _finding("links", status, "; ".join(notes), **data)


def _rpc_verdict(dep: Deployment, flags: LlamaCppFlags) -> tuple[str, Status]:
    if not flags.rpc:
        return "", Status.PASS
    remote = [s for s in flags.rpc if not is_loopback(s.rsplit(":", 1)[0])]
    poc = ("--rpc is, in llama.cpp's own words (tools/rpc/README.md), a fragile and insecure proof of concept: "
           "the RPC protocol has no authentication or encryption")
    if remote and flags.rpc_host is None:
        return (f"rpc lists {remote[0]}: the rpc-server there must listen on a non-loopback address "
                f"(rpc-server -H), open to anyone on that network, and the manifest does not say so; set rpc_host "
                f"to the address it listens on to accept that, or tunnel the RPC port over SSH to 127.0.0.1. {poc}",
                Status.FAIL)
    if flags.rpc_host is not None and not is_loopback(flags.rpc_host):
        return f"rpc servers listen on {flags.rpc_host} (rpc_host): {poc}; keep that network private", Status.WARN
    return f"{poc}", Status.WARN


def check_kv_pool(s: Subject) -> Finding:
    dep, machine, model = s.dep, s.machine, s.model
    spec = _spec(model)
    flags = _flags(dep)
    if spec is None:
        return _finding("kv_pool", Status.FAIL, "engine llamacpp needs a .gguf model",
                        predicted_kv_tokens=None)
    try:
        gpus = deployment_gpus(dep, machine)
    except ValueError as err:
        return _finding("kv_pool", Status.SKIP, f"not judged: {err}", predicted_kv_tokens=None)
    free = [machine.gpu(g).memory_free_mib for g in gpus]
    lay = plan_layout(spec, flags, gpus, free)
    ctx = lay.ctx
    full = ctx.streams if not flags.kv_unified else 1
    weights = max((d.weights for d in lay.devices), default=lay.cpu.weights)
    data = {
        "kv_bytes_per_token_per_rank": lay.kv_bytes_per_token, "weights_gib_per_rank": round(weights / GIB, 3),
        "predicted_kv_tokens": ctx.tokens, "predicted_kv_tokens_per_replica": [ctx.tokens],
        "kv_bytes": lay.kv_total, "kv_mib": round(lay.kv_total / MIB, 2), "cells": ctx.cells, "slots": ctx.slots,
        "streams": ctx.streams, "n_ctx": ctx.n_ctx, "kv_unified": flags.kv_unified,
        "cache_type_k": flags.type_k, "cache_type_v": flags.type_v, "full_length_requests": full,
        "kv_mib_per_device": {f"GPU{gpus[d.device]}": round(d.kv / MIB, 2) for d in lay.devices},
        "kv_mib_cpu": round(lay.cpu.kv / MIB, 2),
    }
    per_dev = ", ".join(f"GPU{gpus[d.device]} {d.kv / MIB:,.2f} MiB" for d in lay.devices if d.kv)
    if lay.cpu.kv:
        per_dev += (", " if per_dev else "") + f"CPU {lay.cpu.kv / MIB:,.2f} MiB"
    sharing = (f"{ctx.slots} slots share one unified cache of {ctx.cells:,} cells" if flags.kv_unified
               else f"{ctx.slots} slot{'s' if ctx.slots > 1 else ''} x {ctx.cells:,} cells")
    msg = (f"KV cache {lay.kv_total / MIB:,.2f} MiB ({sharing}, K {flags.type_k}, V {flags.type_v}, "
           f"{lay.kv_bytes_per_token:,} B/token): {per_dev}")
    problems = []
    if dep.require.kv_tokens is not None and ctx.tokens < dep.require.kv_tokens:
        problems.append(f"below require.kv_tokens {dep.require.kv_tokens:,}: raise ctx_size")
    if dep.require.concurrency is not None and full < dep.require.concurrency:
        problems.append(f"{full} full-length slot{'s' if full != 1 else ''} is below require.concurrency "
                        f"{dep.require.concurrency}: set parallel: {dep.require.concurrency}")
    if problems:
        return _finding("kv_pool", Status.FAIL, msg + "; " + "; ".join(problems), **data)
    if ctx.cells > spec.n_ctx_train:
        return _finding("kv_pool", Status.WARN, msg + f"; each slot's {ctx.cells:,} cells exceed the model's trained "
                                                      f"context {spec.n_ctx_train:,}", **data)
    if lay.split_source == "free memory" and len(gpus) > 1 and any(f is None for f in free):
        # llama.cpp splits the layers (and their KV) by free memory: nobody looked at it, so the split is a guess
        return _finding("kv_pool", Status.WARN, msg + f"; the split per GPU is NOT known: without tensor_split "
                                                      f"llama.cpp splits by free memory, unknown from "
                                                      f"{machine.source} (the total is exact)", **data)
    return _finding("kv_pool", Status.PASS, msg, **data)


#: llama.cpp's answers under the suite's names (``EngineRules.check_overrides``); it spans no Ray cluster
OVERRIDES: Mapping[str, Override] = MappingProxyType({
    "placement": Replace(check_placement),
    "heads": Replace(check_heads),
    "balance": Replace(check_balance),
    "links": Replace(check_links),
    "kv_pool": Replace(check_kv_pool),
    "cluster": Omit("llama.cpp spans no Ray cluster: its --rpc servers are judged by links"),
})
