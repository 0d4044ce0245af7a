"""Which ``/dev/shm`` names a process holds (``launch/watchdog.shm_names``): what the launcher may remove after
an engine's tree is gone is only what the tree was seen holding."""

from __future__ import annotations

import multiprocessing
import os

from pytest_gpulayout.launch.watchdog import shm_names


def test_a_named_semaphore_is_held_under_the_name_it_was_opened_by() -> None:
    """glibc's sem_open maps a temporary file and links it to ``sem.<name>``: the maps line names the deleted
    temporary file. A TP=2 or PP=2 CPU vLLM's multiprocessing locks (``sem.mp-*``) read as held by nobody and
    were left in /dev/shm after every launch, two at a time (86 of them on this machine)."""
    before = {n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")}
    lock = multiprocessing.get_context("spawn").Lock()   # a named semaphore, as vLLM's workers make them
    try:
        made = {n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")} - before
        assert len(made) == 1
        assert made <= shm_names(os.getpid())
    finally:
        del lock
