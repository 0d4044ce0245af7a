"""Which layouts a plan lists: every TP x PP x DP on one host, the shapes the field uses across hosts.

On one host the plan lists every ``(tp, pp, dp)`` with ``tp * pp * dp`` at most the GPUs planned on
(38 on 8 GPUs, 110 on 16). Across hosts that count grows as ``n log^2 n`` (12,599 on 512 GPUs) while
the field's rules settle most of it: TP never crosses hosts (every layer's all-reduce would wait on
the network), PP does (it sends activations only at stage boundaries), and copies go per host. So
on several hosts the plan lists:

* every layout on one host (the picture of a single node, copies, splits and all);
* each shape that fits one host copied onto every host (``dp`` = copies per host x hosts);
* replicas spanning ``k`` whole hosts, TP inside each host and PP across them, for ``k = 2, 3, ...``
  until one meets the need with room (more hosts per replica only make fewer replicas; the
  caller stops the walk, ``cross_host``);
* one TP group across two hosts, so that the refusal is on the table.

The count is then bounded by the host size, not the cluster's: 79 layouts on 8 x 8 GPUs, about
as many on 64 x 8.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pytest_gpulayout.planner.gpus import layouts

Shape = tuple[int, int, int]


def single_host(n: int) -> list[Shape]:
    """Every layout on ``n`` GPUs (what a one-host machine lists)."""
    return layouts(n)


def multi_host(host_sizes: Sequence[int], n: int) -> list[Shape]:
    """The layouts inside one host, then each in-host shape copied onto every host, then one TP group
    across two hosts (refused, so the table says why); the cross-host PP walk is ``cross_host``."""
    big = max(host_sizes)
    out = [s for s in layouts(min(big, n))]
    seen = set(out)
    for tp in range(1, big + 1):
        for pp in range(1, big // tp + 1):
            w = tp * pp
            dp = sum(h // w for h in host_sizes)
            while dp * w > n:
                dp -= 1
            if dp > big // w and (tp, pp, dp) not in seen:
                out.append((tp, pp, dp))
                seen.add((tp, pp, dp))
    if 2 * big <= n and (2 * big, 1, 1) not in seen:
        out.append((2 * big, 1, 1))
    return out


def cross_host(host_sizes: Sequence[int], n: int, layers: int) -> Iterator[tuple[int, list[Shape]]]:
    """Replicas over ``k`` whole hosts, ``k = 2, 3, ...``: for each TP size dividing the host, TP
    inside each host and PP over the rest (``pp = k x host / tp``), as many replicas as fit.

    Yields ``(k, shapes)``; the caller stops when a ``k`` meets the need with room. A PP deeper than
    the model's layers is not listed (the ``heads`` check refuses it).
    """
    big = min(host_sizes)
    hosts = len(host_sizes)
    for k in range(2, hosts + 1):
        shapes = []
        for tp in range(1, big + 1):
            if big % tp:
                continue
            pp = k * big // tp
            dp = hosts // k
            if pp > max(layers, 1) or tp * pp * dp > n:
                continue
            shapes.append((tp, pp, dp))
        if not shapes:
            return
        yield k, shapes


__all__ = ["Shape", "cross_host", "multi_host", "single_host"]
