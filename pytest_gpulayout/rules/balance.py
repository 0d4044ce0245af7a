"""``balance``: will the engine's free-memory checks at start-up pass, and with how much room?

- SGLang (0.4.3 ``model_executor/model_runner.py`` to 0.5.23 ``distributed/bootstrap.py``): before
  loading weights each rank compares the MIN free memory over the TP x PP world with its own:
  ``min_free < 0.9 x local_free`` raises "The memory capacity is unbalanced". So it passes iff
  ``min_free >= 0.9 x max_free``; only when TP > 1. No flag turns it off; a variable of the release
  (``engines/sglang.balance_switch``) in the launch's environment downgrades it to a warning, and the
  finding says so. DP replicas are separate worlds, never compared.
- vLLM (>= 0.9.1, ``v1/worker/gpu_worker.py``; ``v1/worker/utils.py`` from 0.19): each rank refuses to
  start when its free memory is below
  ``gpu_memory_utilization x total`` ("Free memory on device ... on startup is less than desired GPU
  memory utilization"), with the total CUDA reports (NVML's less the driver's reservation).
  0.6.5-0.7.x do not check, and do not subtract other tenants either: the same shortfall makes them
  run out of memory after the profile run, so it fails the same way, with that message.
- DP replicas get equal load (round robin), so replicas whose predicted pools differ by more than 2x
  leave the small one as the bottleneck.

Both engines measure after their own CUDA context exists, which takes roughly the same few hundred
MiB on every rank: a margin below ``CONTEXT_RESERVE_GIB`` is reported as a warning. vLLM from 0.11
measures after its communicators are set up too (``engines/vllm.counts_communicators_in_budget``), so
their size by the TP group's interconnect (``memory/communicators.py``: 1.25 GiB per GPU over NVLink)
joins that margin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import Version

from pytest_gpulayout.check import Rule
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.engines.sglang import engine as sglang
from pytest_gpulayout.engines.sglang.engine import SGLANG
from pytest_gpulayout.engines.vllm.defaults import (
    FREE_MEMORY_CHECK_SINCE,
    counts_communicators_in_budget,
    oversubscribes_silently,
)
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, Status, present, register_facts, skipped, warned
from pytest_gpulayout.machine.facts import GIB, Gpu, Machine
from pytest_gpulayout.memory.common import MemoryUnknown, resolve_version
from pytest_gpulayout.memory.communicators import TpLink, communicator_gib, tp_link
from pytest_gpulayout.memory.reserves import default_memory_fraction
from pytest_gpulayout.memory.weights import weight_bytes_per_rank
from pytest_gpulayout.placement import Placement, PlacementError

CHECK = "balance"
SGLANG_RATIO = 0.9
CONTEXT_RESERVE_GIB = 0.5
LOPSIDED_RATIO = 2.0
VLLM_FREE_RULE_SINCE = str(FREE_MEMORY_CHECK_SINCE)


@register_facts("balance")
@dataclass(frozen=True)
class BalanceFacts(Facts):
    """Free memory over the world and each engine rule's margin: SGLang's 0.9-rule headroom (TP > 1),
    vLLM's free-memory margin (from ``VLLM_FREE_RULE_SINCE``), and the DP replicas' pools (DP > 1)."""

    min_free_gib: float | None
    max_free_gib: float | None
    headroom_gib: float | None
    rule: str | Absent = ABSENT
    vllm_min_margin_gib: float | Absent = ABSENT
    gpu_memory_utilization: float | Absent = ABSENT
    gpu_memory_utilization_source: str | Absent = ABSENT
    predicted_kv_tokens_per_replica: tuple[int, ...] | Absent = ABSENT


_UNKNOWN = BalanceFacts(min_free_gib=None, max_free_gib=None, headroom_gib=None)


def _gib(mib: int | None) -> float:
    return (mib or 0) / 1024


def _switch_text(version: Version) -> str:
    """How SGLang ``version`` lets the balance error become a warning (``engines/sglang.balance_switch``)."""
    if version < Version("0.4.5.post2"):
        return f"SGLang {version} has no switch for it"
    if version < Version("0.5.7"):
        return f"only {sglang.BALANCE_SWITCH_OLD}=1 in launch.env turns it into a warning"
    return f"only {sglang.BALANCE_SWITCH_NEW}=0 in launch.env turns it into a warning"


def _sglang_rule(dep: Deployment, machine: Machine, placement: Placement, version: Version,
                 env: Mapping[str, str]) -> tuple[Status, str, dict[str, Any]]:
    """Worst replica under ``min_free >= 0.9 x max_free`` over its TP x PP world. The switch of the
    release in ``env`` (the launch's variables) downgrades a shortfall to a warning."""
    margin = dep.require.balance_headroom_gib
    worst: tuple[float, int, list[int]] | None = None
    for d in range(dep.dp):
        world = list(placement.replica_gpus(d))
        frees = [_gib(machine.gpu(i).memory_free_mib) for i in world]
        headroom = min(frees) - SGLANG_RATIO * max(frees)
        if worst is None or headroom < worst[0]:
            worst = (headroom, d, world)
    assert worst is not None
    headroom, d, world = worst
    free_of = {i: _gib(machine.gpu(i).memory_free_mib) for i in world}
    lo = min(world, key=lambda i: free_of[i])
    hi = max(world, key=lambda i: free_of[i])
    need = SGLANG_RATIO * free_of[hi]
    data = {"min_free_gib": round(free_of[lo], 2), "max_free_gib": round(free_of[hi], 2),
            "headroom_gib": round(headroom, 2), "rule": "min_free >= 0.9 x max_free"}
    rep = f" (replica {d})" if dep.dp > 1 else ""
    if free_of[lo] == free_of[hi]:
        facts = (f"all {len(world)} ranks{rep} have {free_of[lo]:.2f} GiB free; SGLang needs min >= 0.9 x max = "
                 f"{need:.2f} GiB")
    else:
        facts = (f"GPU{lo} has {free_of[lo]:.2f} GiB free against {free_of[hi]:.2f} GiB on GPU{hi}{rep}; SGLang "
                 f"needs min >= 0.9 x max = {need:.2f} GiB")
    tenants = [p for p in machine.gpu(lo).processes]
    who = (" (held by " + ", ".join(f"{p.name or 'pid'} {p.pid}" for p in tenants[:3]) + ")") if tenants else ""
    if headroom < 0:
        lo_total = _gib(machine.gpu(lo).memory_total_mib)
        if lo_total < need:
            fix = (f"GPU{lo} has only {lo_total:.2f} GiB in total, so no cleanup makes it pass: do not mix card "
                   f"sizes in one TP group (use PP with an uneven layer split, or equal cards)")
        else:
            fix = (f"Free {-headroom:.2f} GiB or more on GPU{lo}{who}, or move the TP group to GPUs with equal "
                   f"free memory")
        switch = sglang.balance_switch(version, dict(env))
        if switch is not None:
            return Status.WARN, (
                f"{facts}: short by {-headroom:.2f} GiB; SGLang {version} would stop with \"The memory capacity "
                f"is unbalanced\", but {switch}={env[switch]} in the launch's environment turns that into a "
                f"warning, and every rank then sizes its pool by GPU{lo}'s free memory. {fix}"), data
        return Status.FAIL, (
            f"{facts}: short by {-headroom:.2f} GiB, so SGLang stops with \"The memory capacity is unbalanced\" "
            f"({_switch_text(version)}). {fix}"), data
    if headroom < margin:
        return Status.WARN, (
            f"{facts}: only {headroom:.2f} GiB of headroom, "
            f"below the {margin:g} GiB margin "
            f"(require.balance_headroom_gib); a tenant growing on GPU{lo}{who} tips it over"), data
    return Status.PASS, f"{facts}: {headroom:.2f} GiB of headroom", data


def _idle_gpus(machine: Machine, placement: Placement, need_gib: float) -> list[int]:
    """GPUs outside the layout, on its hosts, with no tenant and at least ``need_gib`` free."""
    hosts = {machine.gpu(i).host for i in placement.gpus}
    return [g.index for g in machine.gpus
            if g.index not in placement.gpus and g.host in hosts and not g.processes and not g.mig
            and g.memory_free_mib is not None and _gib(g.memory_free_mib) >= need_gib]


def _vllm_before_check(dep: Deployment, machine: Machine, placement: Placement,
                       version: Version) -> tuple[float, str]:
    """What vLLM holds on each GPU when it compares free memory with its request, and what that is:
    the CUDA context, and from 0.11 the communicators (largest over the replicas' TP groups)."""
    if counts_communicators_in_budget(version) or dep.tp * dep.pp == 1:
        return CONTEXT_RESERVE_GIB, "its CUDA context takes"

    def gib(link: TpLink) -> float:
        return communicator_gib(tp=dep.tp, world=dep.tp * dep.pp, link=link)

    link = max((tp_link(machine, replica) for replica in placement.replicas), key=gib)
    comm = gib(link)
    return CONTEXT_RESERVE_GIB + comm, (f"its CUDA context and, measured after them from 0.11, its communicators "
                                        f"(~{comm:.2f} GiB per GPU, {link.value}) take")


def _vllm_fix(dep: Deployment, machine: Machine, placement: Placement, fraction: float, short: list[int],
              max_ok: float, weights_gib: float | None, before: float) -> str:
    """The fix that works on this machine: other GPUs that are idle, else a memory fraction that still
    holds the weights, else freeing memory (a fraction below the weights' share cannot serve)."""
    total = min(_cuda_total_gib(machine.gpu(i)) for i in placement.gpus)
    idle = _idle_gpus(machine, placement, fraction * total + before)
    parts: list[str] = []
    if len(idle) >= len(short):
        kept = [i for i in placement.gpus if i not in short]
        new = sorted(kept + idle[:len(short)])
        parts.append(f"GPU{', GPU'.join(map(str, idle))} {'is' if len(idle) == 1 else 'are'} idle: "
                     f"set gpus: [{', '.join(map(str, new))}]")
    fraction_serves = weights_gib is None or max_ok * total > weights_gib + before
    if fraction_serves:
        parts.append(f"set memory_fraction: {int(max_ok * 100) / 100:.2f} or lower")
    parts.append(f"free memory on GPU{', GPU'.join(map(str, short))}")
    fix = ", or ".join(parts)
    if not fraction_serves and weights_gib is not None:
        fix += (f" (a memory_fraction of {int(max_ok * 100) / 100:.2f} cannot serve: {weights_gib:.2f} GiB of "
                f"weights per GPU need more than {max_ok * total:.2f} GiB)")
    return fix


def _cuda_total_gib(g: Gpu) -> float:
    return _gib(g.cuda_total_mib)


def _vllm_rule(dep: Deployment, machine: Machine, placement: Placement, fraction: float,
               fraction_source: str, weights_gib: float | None, version: Version) -> tuple[Status, str, dict[str, Any]]:
    """Per rank: free >= gpu_memory_utilization x total, the total CUDA reports (``Gpu.cuda_total_mib``:
    0.9.1 ``v1/worker/gpu_worker.py`` takes ``requested_memory`` from ``torch.cuda.mem_get_info``).
    ``weights_gib`` (per rank) keeps the advice from suggesting a fraction below what the weights alone
    take. With ``version`` in 0.6.5-0.7.x (``engines/vllm.oversubscribes_silently``) nothing checks:
    the same shortfall runs the engine out of memory after its profile run instead."""
    margins = {i: _gib(machine.gpu(i).memory_free_mib) - fraction * _cuda_total_gib(machine.gpu(i))
               for i in placement.gpus}
    worst_i = min(margins, key=margins.__getitem__)
    worst_margin = margins[worst_i]
    g = machine.gpu(worst_i)
    free, total = _gib(g.memory_free_mib), _cuda_total_gib(g)
    want = fraction * total
    reserved = (f"the driver's {_gib(g.memory_reserved_mib):.2f} GiB" if g.memory_reserved_mib is not None
                else f"~{_gib(g.driver_reserve_mib):.2f} GiB the driver reserves")
    data = {"vllm_min_margin_gib": round(worst_margin, 2), "gpu_memory_utilization": fraction,
            "gpu_memory_utilization_source": fraction_source}
    facts = (f"GPU{worst_i} has {free:.2f} GiB free; vLLM wants gpu_memory_utilization "
             f"{fraction:g} ({fraction_source}) x {total:.2f} GiB (the total CUDA reports: "
             f"{_gib(g.memory_total_mib):.2f} less {reserved}) = {want:.2f} GiB free at start-up")
    before, before_what = _vllm_before_check(dep, machine, placement, version)
    max_ok = max(0.0, (free - before) / total) if total else 0.0
    silent = oversubscribes_silently(version)
    if worst_margin < 0:
        short = [i for i in placement.gpus if margins[i] < 0]
        fix = _vllm_fix(dep, machine, placement, fraction, short, max_ok, weights_gib, before)
        if silent:
            return Status.FAIL, (
                f"{facts}: short by {-worst_margin:.2f} GiB. vLLM {version} does not check: it sizes the KV "
                f"cache as if the GPU were its alone (other tenants' memory is not subtracted) and runs out "
                f"of memory allocating it or capturing CUDA graphs (torch.OutOfMemoryError). Fix: {fix}"), data
        return Status.FAIL, (
            f"{facts}: short by {-worst_margin:.2f} GiB, so vLLM refuses to start (\"Free memory on device ... "
            f"is less than desired GPU memory utilization\"). Fix: {fix}"), data
    if worst_margin < before:
        return Status.WARN, (
            f"{facts}: {worst_margin:.2f} GiB to spare, less than the ~{before:.2f} GiB {before_what} before "
            f"the check; set memory_fraction: {int(max_ok * 100) / 100:.2f} to be safe"), data
    if silent:
        return Status.PASS, (f"{facts}: {worst_margin:.2f} GiB to spare (vLLM {version} does not check this, "
                             f"and would run out of memory without it)"), data
    return Status.PASS, f"{facts}: {worst_margin:.2f} GiB to spare", data


def _lopsided(s: Subject) -> tuple[Status, str, dict[str, Any]] | None:
    try:
        preds = s.replicas  # the prediction kv_pool reads
    except (MemoryUnknown, PlacementError):
        return None
    tokens = [p.kv_tokens for p in preds]
    data: dict[str, Any] = {"predicted_kv_tokens_per_replica": tuple(tokens)}
    lo, hi = min(tokens), max(tokens)
    if hi <= 0:
        return None  # no replica has a pool: kv_pool fails, there is no balance between replicas to judge
    listed = ", ".join(f"{t:,}" for t in tokens)
    if lo <= 0 or hi / lo > LOPSIDED_RATIO:
        return Status.WARN, (
            f"DP replicas' predicted pools are lopsided ({listed} tokens): "
            f"round-robin sends them equal load, so the smallest pool sets the pace; place replicas on GPUs "
            f"with similar free memory"), data
    return Status.PASS, f"DP replicas' pools within {LOPSIDED_RATIO:g}x ({listed} tokens)", data


def _weights_gib(s: Subject) -> float:
    """Weights on the most loaded rank: the prediction's (with the PP partition of ``launch.env`` that
    kv_pool uses), else computed alike where memory is unknown."""
    try:
        return s.replicas[0].weights_bytes_per_rank / GIB
    except (MemoryUnknown, PlacementError):
        dep = s.dep
        return weight_bytes_per_rank(s.model, tp=dep.tp, pp=dep.pp, engine=s.engine.memory,
                                     enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp,
                                     pp_layer_partition=s.knobs.pp_layer_partition) / GIB


def check_balance(s: Subject) -> Finding:
    dep, machine, host = s.dep, s.machine, s.host
    try:
        placement = s.placement
    except PlacementError as err:
        return skipped(CHECK, f"balance not checked: {err}", _UNKNOWN)
    missing = [i for i in placement.gpus if machine.gpu(i).memory_free_mib is None
               or machine.gpu(i).memory_total_mib is None]
    if missing:
        # Never a pass: the engines' start-up memory rules are exactly what nobody could look at.
        return warned(CHECK, f"memory balance NOT checked: free memory of "
                      f"{', '.join(f'GPU{i}' for i in missing)} is unknown (machine from {machine.source}). "
                      f"Probe the host (machine: auto) or use a snapshot with memory to get a verdict.", _UNKNOWN)
    frees = [_gib(machine.gpu(i).memory_free_mib) for i in placement.gpus]
    data = BalanceFacts(min_free_gib=round(min(frees), 2), max_free_gib=round(max(frees), 2), headroom_gib=None)
    parts: list[tuple[Status, str]] = []
    if dep.tp > 1:
        # SGLang's rule, by SGLang's release where the deployment runs SGLang; its headroom is reported for
        # every TP layout (what moving it to SGLang would meet)
        balances = "tp_balance" in s.engine.rules.start_rules
        sg_version = s.version if balances else resolve_version(SGLANG.memory, None, host)[0]
        env = {**host.env, **dep.launch.env}
        st, msg, d = _sglang_rule(dep, machine, placement, sg_version, env)
        data = replace(data, **d)
        if balances:
            parts.append((st, msg))
    if "free_memory" in s.engine.rules.start_rules:
        version, vsource = s.version, s.version_source
        if dep.memory_fraction is not None:
            fraction, source = dep.memory_fraction, "memory_fraction"
        else:
            total = min(machine.gpu(i).memory_total_mib or 0 for i in placement.gpus)
            fraction, _why = default_memory_fraction(s.engine.memory, version, gpu_total_mib=total, tp=dep.tp,
                                                     pp=dep.pp)
            source = f"{s.engine.display} {version} default, {vsource}"
        if version >= FREE_MEMORY_CHECK_SINCE or oversubscribes_silently(version):
            weights = _weights_gib(s)
            st, msg, d = _vllm_rule(dep, machine, placement, fraction, source, weights, version)
            parts.append((st, msg))
            data = replace(data, **d)
        else:
            parts.append((Status.PASS, f"vLLM {version} ({vsource}) has no free-memory start-up check (it came in "
                          f"{VLLM_FREE_RULE_SINCE}): other tenants' memory comes out of the KV pool instead"))
    if dep.dp > 1:
        lop = _lopsided(s)
        if lop:
            parts.append(lop[:2])
            data = replace(data, **lop[2])
    if not parts:
        why = ("SGLang's TP balance rule applies only with TP > 1" if "tp_balance" in s.engine.rules.start_rules
               or dep.tp == 1 else f"{s.engine.display} makes no start-up check of free memory across its ranks "
               "(the TP balance rule is SGLang's, the free-memory rule vLLM's)")
        return skipped(CHECK, f"{why}, and a single replica has no peers to compare: nothing to check.", data)
    order = {Status.FAIL: 3, Status.WARN: 2, Status.PASS: 1, Status.SKIP: 0}
    status = max((s for s, _ in parts), key=order.__getitem__)
    parts.sort(key=lambda p: -order[p[0]])
    msg = "; ".join(m for _, m in parts) + "."
    return Finding(CHECK, status, msg, data)


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, BalanceFacts)
    # vLLM deployments carry their own rule's margin; SGLang's is the 0.9-rule headroom
    margin = present(facts.vllm_min_margin_gib)
    if margin is not None:
        return f"{margin:+.2f} GiB"
    if facts.headroom_gib is not None:
        return f"{facts.headroom_gib:+.2f} GiB"
    return ""


BALANCE = Rule(CHECK, "SGLang's TP memory-balance rule and its headroom; vLLM's free-memory-at-startup rule; "
               "lopsided DP pools.", BalanceFacts, check_balance, _number)
