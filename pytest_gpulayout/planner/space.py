"""Which layouts a plan lists: every TP x PP x DP on one host, the shapes the field uses across hosts.

On one host the plan lists every ``(tp, pp, dp)`` with ``tp * pp * dp`` at most the GPUs planned on
(38 on 8 GPUs, 110 on 16). Across hosts that count grows as ``n log^2 n`` (12,599 on 512 GPUs) while
the field's rules settle most of it: TP stays inside a host (every layer's all-reduce would wait on
the network), PP does (it sends activations only at stage boundaries), and copies go per host. So
on several hosts the plan lists:

* every layout on one host (the picture of a single node, copies, splits and all);
* each shape that fits one host deployed on every host, one deployment per host behind a load
  balancer (the hosts alike are one evaluation);
* replicas spanning ``k`` whole hosts, TP inside each host and PP across them, for ``k = 2, 3, ...``
  until one meets the need with room (more hosts per replica only make fewer replicas; the
  caller stops the walk, ``cross_host``);
* one TP group across two hosts, which the engines start (the vendors' guides serve TP=16 on two
  nodes) and the plan ranks "starts, slow", after every layout that keeps TP inside a host.

The count is then bounded by the host size, not the cluster's: about 65 layouts on 8 x 8 GPUs
and as many on 64 x 8.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pytest_gpulayout.planner.gpus import layouts

Shape = tuple[int, int, int]


def single_host(n: int) -> list[Shape]:
    """Every layout on ``n`` GPUs (what a one-host machine lists)."""
    return layouts(n)


def multi_host(host_sizes: Sequence[int], n: int) -> tuple[list[Shape], list[Shape], list[Shape]]:
    """``(in one host, on every host, TP across hosts)``: every layout inside one host; each in-host
    shape that fills a host, deployed on every host (``(tp, pp, dp per host)``: one deployment per
    host behind a load balancer); one TP group across two hosts (it starts, slow: ranked last).
    The cross-host PP walk is ``cross_host``."""
    big = max(host_sizes)
    hosts = len(host_sizes)
    inside = layouts(min(big, n))
    every: list[Shape] = []
    for tp in range(1, big + 1):
        for pp in range(1, big // tp + 1):
            dp = big // (tp * pp)
            if hosts > 1 and tp * pp * dp * hosts <= n:
                every.append((tp, pp, dp))
    across = [(2 * big, 1, 1)] if 2 * big <= n else []
    return inside, every, across


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
