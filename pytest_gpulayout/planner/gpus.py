"""Which GPUs each layout runs on: the link-aware choice the planner makes per layout.

Kept apart from the ranking because it is the hot path (the planner scores GPU subsets thousands of
times per plan, so the pairwise link costs are computed once in ``LinkCosts``) and because it only
needs the machine, not the model or the checks. The rule it applies is described in ``planner``'s
module docstring.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pytest_gpulayout.machine.facts import LINK_KINDS, Machine, link_rank

#: Above this many GPU subsets, pick groups greedily instead of trying every subset.
_EXACT_LIMIT = 4000


def _cost(kind: str | None) -> int:
    """Scalar link cost, fastest lowest: NV by descending count, PIX ... SYS, unknown, NET."""
    if kind is None:
        return LINK_KINDS.index("SYS") * 100 + 50
    fam, neg_count = link_rank(kind)
    return fam * 100 + neg_count


class LinkCosts:
    """Pairwise link costs, computed once per plan (the planner asks for them thousands of times)."""

    def __init__(self, machine: Machine):
        self.machine = machine
        idx = machine.indices
        self.cost = {(a, b): _cost(machine.effective_link(a, b)) for a in idx for b in idx if a != b}
        self.free = {g.index: (g.memory_free_mib or 0) for g in machine.gpus}
        self.name = {g.index: g.name for g in machine.gpus}

    def score(self, group: Sequence[int]) -> tuple[int, int, int, int, tuple[int, ...]]:
        """Lower is better: slowest internal link, total link cost, mixed GPU models, least free memory."""
        pairs = [self.cost[a, b] for a, b in itertools.combinations(group, 2)]
        return (
            max(pairs, default=0),
            sum(pairs),
            len({self.name[g] for g in group}),
            -min(self.free[g] for g in group),
            tuple(group),
        )

    def best_group(self, avail: Sequence[int], k: int) -> tuple[int, ...]:
        """The ``k`` GPUs of ``avail`` with the best score (every subset when few, else grown greedily)."""
        if k >= len(avail):
            return tuple(avail)
        if math.comb(len(avail), k) <= _EXACT_LIMIT:
            return min((tuple(c) for c in itertools.combinations(avail, k)), key=self.score)
        best: tuple[int, ...] | None = None
        for seed in avail:
            group = [seed]
            while len(group) < k:
                rest = [g for g in avail if g not in group]
                group.append(min(rest, key=lambda g: self.score(sorted([*group, g]))))
            cand = tuple(sorted(group))
            if best is None or self.score(cand) < self.score(best):
                best = cand
        assert best is not None
        return best

    def between(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Cost of a stage boundary: same TP rank talks to same TP rank."""
        return max(self.cost[x, y] for x, y in zip(a, b, strict=True))


def choose_gpus(machine: Machine, tp: int, pp: int, dp: int, links: LinkCosts | None = None) -> tuple[int, ...] | None:
    """GPU indices for the layout in engine order (replica, stage, TP rank), or ``None`` if too few.

    Replica by replica: the ``tp x pp`` GPUs whose slowest link is fastest (then most free memory);
    inside it, TP groups by the same rule; stages chained so each boundary crosses the best link left.
    """
    links = links or LinkCosts(machine)
    avail = list(machine.indices)
    # idle GPUs first, so that a subset of equal links takes the GPUs other tenants leave alone
    avail.sort(key=lambda g: (-links.free[g], g))
    if tp * pp * dp > len(avail):
        return None
    order: list[int] = []
    for _ in range(dp):
        replica = list(links.best_group(sorted(avail), tp * pp))
        for g in replica:
            avail.remove(g)
        groups: list[tuple[int, ...]] = []
        left = sorted(replica)
        for _ in range(pp):
            grp = links.best_group(left, tp)
            groups.append(grp)
            left = [g for g in left if g not in grp]
        stages = [groups.pop(0)]
        while groups:
            nxt = min(groups, key=lambda grp: (links.between(stages[-1], grp), grp))
            groups.remove(nxt)
            stages.append(nxt)
        for stage in stages:
            order.extend(stage)
    return tuple(order)


def layouts(n: int) -> list[tuple[int, int, int]]:
    """Every (tp, pp, dp) with ``tp * pp * dp <= n``."""
    return [
        (tp, pp, dp) for tp in range(1, n + 1) for pp in range(1, n // tp + 1) for dp in range(1, n // (tp * pp) + 1)
    ]


__all__ = ["LinkCosts", "choose_gpus", "layouts"]
