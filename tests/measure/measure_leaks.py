"""What a real launch may leave in /dev/shm that is not its own."""

from __future__ import annotations

import re
from pathlib import Path


def launcher_named_shm(work: Path) -> set[str]:
    """The /dev/shm names the launches' closing log lines name as "left in place (appeared during the
    launch, held by no process, but not seen used by the engine)": a TP=2 or PP=2 server run to ready
    leaves two multiprocessing semaphores (/dev/shm/sem.mp-*) the launcher never saw mapped, and on a
    machine shared with other engine runs their files appear during a launch too. Known, not the
    measurement's: a test counts a leftover only if it is not named."""
    return {m for log in work.glob("engine-*.log")
            for m in re.findall(r"/dev/shm/[\w.-]+", (log.read_text(errors="replace").splitlines() or [""])[-1])}
