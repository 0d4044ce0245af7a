"""``gpulayout``: the checks outside pytest.

A thin shell: each verb lives in ``pytest_gpulayout/commands/<verb>.py`` with ``add_arguments(parser)``
and ``run(args) -> int``. Errors the user can act on become one line on stderr and the exit code of
README.md (2 bad input, 3 machine not probed); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from pytest_gpulayout.errors import GpuLayoutError

VERBS = {
    "check": "the static checks (and startup with --launch) for a manifest",
    "snapshot": "probe the live GPUs through NVML and write a machine snapshot",
    "topo": "the link matrix, like nvidia-smi topo -m, for any machine source",
    "parse-log": "what an engine's startup log says: KV pool, concurrency, error kind",
    "plan": "candidate TP/PP/DP layouts for a model on a machine, ranked",
    "measure": "launch each deployment, drive a real load against it, and say which layout to choose",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors: one line, exit 2
        self.exit(2, f"gpulayout: error: {message}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or, with ``only`` (a verb), of that verb alone: a verb's module is
    imported only when it is run (or ``--help`` lists them), so ``gpulayout topo`` does not pay for the
    engines, the memory model and the launcher that ``check`` needs."""
    parser = _Parser(prog="gpulayout", description="Preflight checks for multi-GPU LLM serving layouts.")
    from pytest_gpulayout import __version__

    parser.add_argument("--version", action="version", version=f"gpulayout {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for verb, help_text in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if only is not None and verb != only:
            continue  # listed for the usage line; its arguments are read only when it runs
        module = importlib.import_module(f".commands.{verb.replace('-', '_')}", __package__)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


#: exit status when the reader of stdout went away (``gpulayout check | head -1``): 128 + SIGPIPE, what
#: a shell reports for ``cat``/``grep`` in the same place; not 1, which means "a check failed"
EXIT_STDOUT_CLOSED = 141


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports POLLERR on the write end)."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not print a second
    "Exception ignored ... BrokenPipeError" (the recipe of Python's ``signal`` documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            code = _main(argv)
        except SystemExit:  # --help, --version, usage errors: their text may sit in the buffer too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # output that fit in the buffer meets the closed pipe here, not at exit
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # a pipe of our own (an engine's), not stdout: a bug, keep the traceback
        _silence_stdout()
        return EXIT_STDOUT_CLOSED


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    verb = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(verb if verb in VERBS and "-h" not in words and "--help" not in words else None)
    args = parser.parse_args(words)
    try:
        return int(args._run(args))
    except GpuLayoutError as err:
        print(f"gpulayout: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:  # a path the user gave that cannot be read or written (--html, -o, --log-dir)
        if err.filename is None or isinstance(err, BrokenPipeError):
            raise
        print(f"gpulayout: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpulayout: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
