"""Where a command line's ``--config FILE`` is read from: the file a deployment's engine will read, or none.

A manifest's line runs where the manifest is: a relative path is resolved against its folder
(``Deployment.base_dir``), as its model path is. A bare command line (``--cmd``, a shell script) runs on a host:
against the folder of the file it came from (``--cmd``: the working directory). An artifact's container reads its
own file system, which is not here: its path is never read on this machine (a file of the same name here is not
the one the engine reads), and ``NotHere`` says so, so the line is judged without the file's keys and says what
was not judged.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_gpulayout.inputs.engine_args import ResolvedArgs


class NotHere(OSError):
    """The file exists only where the engine runs (a container's path): it cannot be read here."""


def reader(base: Path) -> Callable[[str], str]:
    """Files read from this machine, a relative path against ``base``."""
    def read(path: str) -> str:
        p = Path(path).expanduser()
        p = p if p.is_absolute() else base / p
        mode = p.stat().st_mode  # FileNotFoundError: the engine's "not found"
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if not stat.S_ISREG(mode):  # a FIFO or a device would block the read
            raise OSError(f"not a regular file: '{path}'")
        return p.read_text(encoding="utf-8")
    return read


def in_container(where: str) -> Callable[[str], str]:
    """No file read: each is in the file system of the container ``where`` names."""
    def read(path: str) -> str:
        raise NotHere(f"{path} is read inside {where}'s container, not among the files checked here")
    return read


def unmerged(words: Sequence[str], result: ResolvedArgs, display: str, where: str) -> tuple[str, ...]:
    """The file a line names as ``--config=FILE`` (or an abbreviation, ``--conf FILE``), which the release's
    parser takes but never reads: both engines merge a config file only where the word ``--config`` stands
    alone in the line (``where``: vLLM's ``FlexibleArgumentParser.parse_args``, SGLang's
    ``prepare_server_args``: ``if "--config" in args``), so argparse stores the path in ``config`` and the
    engine starts without the file's keys. Empty where the line has no such file."""
    if "--config" in words or not result.is_set("config"):
        return ()
    path = result.get("config")
    return (f"{display} {result.release} does not read the file {path!r}: {where} merges a config file only "
            f"where the word --config stands alone, so this spelling is parsed and ignored and the engine starts "
            f"without the file's keys (judged so here); write --config {path}",)
