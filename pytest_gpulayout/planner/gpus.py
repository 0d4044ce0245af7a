"""Which GPUs each layout runs on: the link-aware choice the planner makes per layout.

The rule (``planner.plan``'s module docstring): replica by replica, the ``tp x pp`` GPUs whose
slowest internal link is fastest, then the lowest total link cost, the fewest GPU models, the most
free memory, the lowest indices; inside a replica, TP groups by the same rule; stages chained so each
boundary crosses the best link left.

Kept polynomial by symmetry instead of trying every subset of the machine:

* GPUs alike (same model, memory, free memory, tenants, MIG, and the same link to every other GPU)
  are interchangeable: any two subsets with as many GPUs of each such class score the same, and
  the lowest indices of each class win the tie. So a group is chosen among *compositions* (how many
  of each class), not subsets: one per size on an NVSwitch box, 25 on a two-socket one.
* A group that fits one host never crosses to another (its slowest link would be the network), so
  the search runs inside each host, and hosts alike (same GPUs, same links, same GPUs left free)
  share one answer.

``choose_gpus_exhaustive`` keeps the subset-by-subset search the planner used to run; the tests
compare the two on every machine up to 16 GPUs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from pytest_gpulayout.machine.facts import LINK_KINDS, Gpu, Machine, link_rank

Score = tuple[int, int, int, int, tuple[int, ...]]


def _cost(kind: str | None) -> int:
    """Scalar link cost, fastest lowest: NV by descending count, PIX ... SYS, unknown, NET."""
    if kind is None:
        return LINK_KINDS.index("SYS") * 100 + 50
    fam, neg_count = link_rank(kind)
    return fam * 100 + neg_count


_NET = LINK_KINDS.index("NET") * 100 if "NET" in LINK_KINDS else 10_000


class LinkCosts:
    """Pairwise link costs, GPU classes and hosts, computed once per plan."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.free = {g.index: (g.memory_free_mib or 0) for g in machine.gpus}
        self.name = {g.index: g.name for g in machine.gpus}
        hosts: dict[str | None, list[int]] = {}
        for g in machine.gpus:
            hosts.setdefault(g.host, []).append(g.index)
        #: GPU indices per host, hosts in order of their first GPU
        self.hosts: tuple[tuple[int, ...], ...] = tuple(tuple(v) for v in hosts.values())
        self.host_of = {g: h for h, members in enumerate(self.hosts) for g in members}
        # pairs inside a host only: across hosts every pair is NET (n^2 pairs would not scale)
        self._cost = {
            (a, b): _cost(machine.effective_link(a, b)) for members in self.hosts for a in members for b in members
            if a != b
        }
        self.kind = {g.index: _attributes(g) for g in machine.gpus}
        self.klass = self._classes()
        self.signature = tuple(self._host_signature(h) for h in self.hosts)
        self.domain = self._domains()
        self._memo: dict[tuple[object, ...], tuple[int, ...]] = {}

    def cost(self, a: int, b: int) -> int:
        """Link cost between two GPUs (the network between hosts)."""
        c = self._cost.get((a, b))
        return _NET if c is None else c

    def _domains(self) -> dict[int, tuple[int, ...]]:
        """GPU -> its socket: the GPUs of its host it reaches over links faster than SYS."""
        limit = _cost("SYS")
        out: dict[int, tuple[int, ...]] = {}
        for members in self.hosts:
            left = list(members)
            while left:
                comp, todo = {left[0]}, [left[0]]
                while todo:
                    a = todo.pop()
                    for b in members:
                        if b not in comp and self.cost(a, b) < limit:
                            comp.add(b)
                            todo.append(b)
                group = tuple(sorted(comp))
                for g in group:
                    out[g] = group
                left = [g for g in left if g not in comp]
        return out

    # -- symmetry -------------------------------------------------------------------------------
    def _classes(self) -> dict[int, int]:
        """GPU -> class id: alike GPUs (attributes and every link the same) share one id."""
        klass: dict[int, int] = {}
        reps: list[int] = []
        for g in self.machine.indices:
            for r in reps:
                if self._alike(g, r):
                    klass[g] = klass[r]
                    break
            else:
                klass[g] = len(reps)
                reps.append(g)
        return klass

    def _alike(self, a: int, b: int) -> bool:
        if self.kind[a] != self.kind[b] or self.host_of[a] != self.host_of[b]:
            return False
        return all(self.cost(a, x) == self.cost(b, x) for x in self.hosts[self.host_of[a]] if x not in (a, b))

    def _host_signature(self, members: Sequence[int]) -> tuple[object, ...]:
        """What makes two hosts interchangeable: their GPUs' attributes and links, position by position."""
        attrs = tuple(self.kind[g] for g in members)
        links = tuple(self.cost(a, b) for a, b in itertools.combinations(members, 2))
        return (attrs, links)

    # -- scoring --------------------------------------------------------------------------------
    def score(self, group: Sequence[int]) -> Score:
        """Lower is better: slowest internal link, total link cost, mixed GPU models, least free memory."""
        pairs = [self.cost(a, b) for a, b in itertools.combinations(group, 2)]
        return (
            max(pairs, default=0),
            sum(pairs),
            len({self.name[g] for g in group}),
            -min(self.free[g] for g in group),
            tuple(group),
        )

    def _best_in(self, avail: Sequence[int], k: int) -> tuple[int, ...]:
        """The best ``k`` of ``avail`` (sorted), one candidate per composition of GPU classes."""
        by_class: dict[int, list[int]] = {}
        for g in avail:
            by_class.setdefault(self.klass[g], []).append(g)
        pools = list(by_class.values())
        best: tuple[Score, tuple[int, ...]] | None = None
        for counts in _compositions([len(p) for p in pools], k):
            group = tuple(sorted(g for pool, c in zip(pools, counts, strict=True) for g in pool[:c]))
            s = self.score(group)
            if best is None or s < best[0]:
                best = (s, group)
        assert best is not None
        return best[1]

    def best_group(self, avail: Sequence[int], k: int) -> tuple[int, ...]:
        """The ``k`` GPUs of ``avail`` with the best score; inside one host whenever one has ``k`` free."""
        avail = sorted(avail)
        if k >= len(avail):
            return tuple(avail)
        per_host: dict[int, list[int]] = {}
        for g in avail:
            per_host.setdefault(self.host_of[g], []).append(g)
        if len(per_host) == 1:
            return self._best_in(avail, k)
        # a group inside one host beats every group that crosses hosts (its slowest link is NET)
        best: tuple[Score, tuple[int, ...]] | None = None
        seen: dict[tuple[object, ...], None] = {}
        for h, members in per_host.items():
            if len(members) < k:
                continue
            local = self._local_key(h, members, k)
            if local in seen:  # an alike host with the same GPUs free: same score, higher indices
                continue
            seen[local] = None
            group = self._best_in_host(h, members, k, local)
            s = self.score(group)
            if best is None or s < best[0]:
                best = (s, group)
        if best is not None:
            return best[1]
        return self._across_hosts(per_host, k)

    def _local_key(self, h: int, members: Sequence[int], k: int) -> tuple[object, ...]:
        positions = {g: i for i, g in enumerate(self.hosts[h])}
        return (self.signature[h], tuple(positions[g] for g in members), k)

    def _best_in_host(self, h: int, members: Sequence[int], k: int, key: tuple[object, ...]) -> tuple[int, ...]:
        positions = self._memo.get(key)
        host = self.hosts[h]
        if positions is None:
            where = {g: i for i, g in enumerate(host)}
            positions = tuple(where[g] for g in self._best_in(members, k))
            self._memo[key] = positions
        return tuple(host[i] for i in positions)

    def _across_hosts(self, per_host: dict[int, list[int]], k: int) -> tuple[int, ...]:
        """No host has ``k`` GPUs free: whole hosts first (fewest pairs over the network), the one
        with the most GPUs free first, then the rest from the next host by the same rule."""
        order = sorted(per_host, key=lambda h: (-len(per_host[h]), -min(self.free[g] for g in per_host[h]), h))
        group: list[int] = []
        for h in order:
            need = k - len(group)
            if need <= 0:
                break
            members = per_host[h]
            group.extend(members if len(members) <= need else self._best_in(members, need))
        return tuple(sorted(group))

    def between(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Cost of a stage boundary: same TP rank talks to same TP rank."""
        return max(self.cost(x, y) for x, y in zip(a, b, strict=True))


def _compositions(sizes: Sequence[int], k: int) -> Iterable[tuple[int, ...]]:
    """Every way to take ``k`` items from pools of ``sizes`` (how many from each pool)."""
    if not sizes:
        if k == 0:
            yield ()
        return
    rest = sum(sizes[1:])
    for c in range(max(0, k - rest), min(sizes[0], k) + 1):
        for tail in _compositions(sizes[1:], k - c):
            yield (c, *tail)


def _attributes(g: object) -> tuple[object, ...]:
    assert isinstance(g, Gpu)
    tenants = tuple(sorted((p.name, p.used_mib or 0) for p in g.processes))
    return (g.name, g.memory_total_mib, g.memory_free_mib, g.mig, tenants)


def _arrange(links: LinkCosts, replica: Sequence[int], tp: int, pp: int,
             best_group: object = None) -> list[int]:
    """One replica's GPUs in engine order: TP groups by the group rule, stages chained by best boundary."""
    pick = links.best_group if best_group is None else best_group
    groups: list[tuple[int, ...]] = []
    left = sorted(replica)
    for _ in range(pp):
        grp = pick(left, tp)  # type: ignore[operator]
        groups.append(grp)
        left = [g for g in left if g not in grp]
    stages = [groups.pop(0)]
    while groups:
        nxt = min(groups, key=lambda grp: (links.between(stages[-1], grp), grp))
        groups.remove(nxt)
        stages.append(nxt)
    return [g for stage in stages for g in stage]


def choose_gpus(machine: Machine, tp: int, pp: int, dp: int, links: LinkCosts | None = None,
                among: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """GPU indices for the layout in engine order (replica, stage, TP rank), or ``None`` if too few
    (``among``: only these GPUs, e.g. one host's)."""
    links = links or LinkCosts(machine)
    pool = machine.indices if among is None else tuple(among)
    if tp * pp * dp > len(pool):
        return None
    avail = set(pool)
    order: list[int] = []
    for _ in range(dp):
        replica = links.best_group(sorted(avail), tp * pp)
        avail.difference_update(replica)
        order.extend(_arrange(links, replica, tp, pp))
    return tuple(order)


def choose_gpus_exhaustive(machine: Machine, tp: int, pp: int, dp: int, links: LinkCosts | None = None,
                           among: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """The same rule by brute force: every subset of the free GPUs, no symmetry, no host split
    (exponential: the reference the tests compare ``choose_gpus`` with)."""
    links = links or LinkCosts(machine)
    pool = machine.indices if among is None else tuple(among)
    if tp * pp * dp > len(pool):
        return None

    def every_subset(avail: Sequence[int], k: int) -> tuple[int, ...]:
        if k >= len(avail):
            return tuple(sorted(avail))
        return min((tuple(c) for c in itertools.combinations(sorted(avail), k)), key=links.score)

    avail = list(pool)
    order: list[int] = []
    for _ in range(dp):
        replica = every_subset(avail, tp * pp)
        avail = [g for g in avail if g not in replica]
        order.extend(_arrange(links, replica, tp, pp, every_subset))
    return tuple(order)


def layouts(n: int) -> list[tuple[int, int, int]]:
    """Every (tp, pp, dp) with ``tp * pp * dp <= n``."""
    return [
        (tp, pp, dp) for tp in range(1, n + 1) for pp in range(1, n // tp + 1) for dp in range(1, n // (tp * pp) + 1)
    ]


__all__ = ["LinkCosts", "choose_gpus", "choose_gpus_exhaustive", "layouts"]
