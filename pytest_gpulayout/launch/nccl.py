"""Which transport NCCL picked, read from its own ``NCCL_DEBUG=INFO`` lines in an engine's log.

NCCL prints one line per channel and peer when it connects (``src/transport/*.cc`` in NVIDIA/nccl,
``"Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s"``), e.g.::

    node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
    10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 0[87000] -> 2[c7000] [send] via NET/IB/5/GDRDMA
    host:774:774 [0] NCCL INFO Channel 01/0 : 0[0] -> 3[3] via P2P/IPC
    node0:13572:13572 [1] NCCL INFO Channel 00 : 2[1] -> 0[0] via SHM/direct/direct

``NET/IB`` (and plugins' ``NET/IBext``, ``NET/IBext_v8``) is InfiniBand or RoCE, with ``/GDRDMA`` when
GPUDirect RDMA is on; ``NET/Socket`` is plain TCP, too slow for tensor parallel across hosts (the vLLM
docs' ``docs/serving/parallelism_scaling.md`` say the same). ``P2P`` and ``SHM`` stay inside a host.
Pure text in, frozen data out: the startup check and the tests feed it log lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_CHANNEL = re.compile(r"NCCL INFO Channel \d+(?:/\d+)?\s*:\s*\d+\[[0-9a-fA-Fx]+\]\s*->\s*\d+\[[0-9a-fA-Fx]+\]"
                      r"(?:\s*\[(?:send|receive)\])?\s*via\s+(\S+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")

IB_FIX = ("bring an InfiniBand/RoCE port up on every node and point NCCL at it (NCCL_IB_HCA=mlx5_0, see ibstat); "
          "without one set NCCL_SOCKET_IFNAME to the fastest interface and keep tensor parallel inside a host")


def transport_kind(via: str) -> str:
    """``NET/IB/5/GDRDMA`` -> ``ib``; ``NET/Socket/0`` -> ``socket``; ``P2P/IPC`` -> ``p2p``; ``SHM/...`` -> ``shm``."""
    v = via.upper()
    if v.startswith("NET/IB"):
        return "ib"
    if v.startswith("NET/SOCKET"):
        return "socket"
    if v.startswith("NET/"):
        return "net"  # another network plugin (AWS OFI, ...)
    if v.startswith("P2P") or v.startswith("NVLS"):
        return "p2p"
    if v.startswith("SHM"):
        return "shm"
    if v.startswith("COLLNET"):
        return "collnet"
    return "other"


@dataclass(frozen=True)
class NcclTransports:
    """How many channel connections went over each transport, and what NCCL said it uses."""

    counts: dict[str, int] = field(default_factory=dict)
    gdrdma: bool = False
    networks: tuple[str, ...] = ()          # "Using network IB" / "Socket" / "IBext_v8"
    examples: tuple[str, ...] = ()          # one line per transport kind, as NCCL printed it

    @property
    def seen(self) -> bool:
        return bool(self.counts or self.networks)

    @property
    def cross_host(self) -> str | None:
        """``ib`` | ``socket`` | ``net`` for the traffic between hosts, ``None`` when none was seen."""
        for kind in ("socket", "net", "ib"):  # the slowest one seen decides
            if self.counts.get(kind):
                return kind
        return None

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "gdrdma": self.gdrdma, "networks": list(self.networks),
                "cross_host": self.cross_host, "examples": list(self.examples)}


def parse_transports(lines: Iterable[str]) -> NcclTransports:
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    networks: dict[str, None] = {}
    gdr = False
    for line in lines:
        m = _CHANNEL.search(line)
        if m:
            kind = transport_kind(m.group(1))
            counts[kind] = counts.get(kind, 0) + 1
            examples.setdefault(kind, line[m.start():].strip())
            gdr = gdr or m.group(1).upper().endswith("/GDRDMA")
            continue
        n = _NETWORK.search(line)
        if n:
            networks[n.group(1)] = None
    return NcclTransports(counts=counts, gdrdma=gdr, networks=tuple(networks), examples=tuple(examples.values()))


def transport_verdict(t: NcclTransports, crosses_hosts: bool) -> tuple[str, str]:
    """(``pass`` | ``warn``, one sentence) for what NCCL used; Socket between hosts warns with the fix."""
    if not crosses_hosts:
        return "pass", ""
    if not t.seen:
        return "warn", ("no NCCL transport lines in the log (launch with NCCL_DEBUG=INFO to see whether NCCL "
                        "uses InfiniBand or sockets between the hosts)")
    kind = t.cross_host
    if kind == "socket" or (kind is None and any(n.lower() == "socket" for n in t.networks)):
        return "warn", f"NCCL uses TCP sockets between the hosts ({t.counts.get('socket', 0)} channels via " \
                       f"NET/Socket): not efficient for cross-node tensor parallel; {IB_FIX}"
    if kind == "ib":
        return "pass", f"NCCL uses InfiniBand between the hosts ({t.counts['ib']} channels via NET/IB" \
                       + ("/GDRDMA, GPUDirect RDMA on" if t.gdrdma else ", without GPUDirect RDMA") + ")"
    if kind == "net":
        return "pass", "NCCL uses a network plugin between the hosts (" + ", ".join(t.networks) + ")"
    return "warn", "NCCL printed no channel between the hosts; cannot tell its transport"
