"""Every kind of artifact the check reads, in the order their findings are listed (the one registry).

A new kind is a module of ``artifacts/`` with a ``READER`` (``artifacts/reader.Reader``) and one line here.
"""

from __future__ import annotations

from pytest_gpulayout.artifacts import (
    aibrix,
    compose,
    helm,
    kserve,
    kuberay,
    kubernetes,
    rayserve,
    shell,
    skypilot,
    slurm,
    triton,
)
from pytest_gpulayout.artifacts.reader import Reader

READERS: tuple[Reader, ...] = (kubernetes.READER, kuberay.READER, aibrix.READER, kserve.READER, compose.READER,
                               helm.READER, rayserve.READER, skypilot.READER, slurm.READER, triton.READER,
                               shell.READER)


def kinds() -> str:
    """What the readers read, for the line that says an artifact runs no engine they know."""
    return "; ".join(r.kind for r in READERS)
