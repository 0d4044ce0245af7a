"""Errors a user can act on.

Every error that reaches a user names where the bad input lives (file, deployment, key) in one line.
The CLI maps them to exit codes (2 bad input, 3 machine not probed); the plugin to a usage error.
"""

from __future__ import annotations

from pathlib import Path


class GpuLayoutError(Exception):
    """Base class: ``str(err)`` is the one line shown to the user."""

    exit_code = 2


class InputError(GpuLayoutError):
    """Bad manifest, snapshot, model config or command-line value (exit 2).

    ``where`` is the file (or other source) and ``key`` the dotted path inside it, e.g.
    ``deployments.qwen3-8b-tp2.tensor_parallel_size``.
    """

    exit_code = 2

    def __init__(self, message: str, *, where: str | Path | None = None, key: str | None = None):
        self.message = message
        self.where = str(where) if where is not None else None
        self.key = key
        super().__init__(self.format())

    def format(self) -> str:
        head = ""
        if self.where:
            head = f"{self.where}: "
        if self.key:
            head += f"{self.key}: "
        return head + self.message


class ProbeError(GpuLayoutError):
    """The machine could not be probed (no driver, NVML missing, no GPU visible): exit 3.

    A preflight that passes without having seen the GPUs is the worst bug this tool can have, so
    a probe failure is never turned into an empty machine.
    """

    exit_code = 3


class LaunchError(GpuLayoutError):
    """The engine could not be started at all (command not found, not executable)."""

    exit_code = 1
