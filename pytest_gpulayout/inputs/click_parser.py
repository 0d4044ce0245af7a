"""A command line read the way click 8 reads it, for an engine whose CLI is a click command (``trtllm-serve
serve``, ``tensorrt_llm/commands/serve.py``), from the release's table (``flag_tables.ReleaseTable``).

click matches an option by its exact spelling (no prefixes, no ``_`` rewriting), takes ``--opt=value`` or the
next word as the value (whatever it looks like), refuses a value for a flag, then converts each value by its
type. Its words, as the line ``Error: ...`` it prints: ``No such option: --x``, ``Option '--x' requires an
argument.``, ``Option '--x' does not take a value.``, ``Invalid value for '--x': 'v' is not a valid integer.``
(``float``; ``'v' is not one of 'a', 'b'.`` for a choice), ``Missing argument 'MODEL'.``, ``Got unexpected
extra argument (v)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable
from pytest_gpulayout.inputs.release_parser import Outcome


class _Error(Exception):
    pass


def _convert(o: OptionSpec, name: str, value: str, aliases: dict[str, str]) -> Any:
    if o.type == "int":
        try:
            return int(value)
        except ValueError:
            raise _Error(f"Invalid value for '{name}': {value!r} is not a valid integer.") from None
    if o.type == "float":
        try:
            return float(value)
        except ValueError:
            raise _Error(f"Invalid value for '{name}': {value!r} is not a valid float.") from None
    value = aliases.get(value, value)
    if o.choices is not None and not o.choices_unknown and value not in o.choices:
        listed = ", ".join(repr(c) for c in o.choices)
        raise _Error(f"Invalid value for '{name}': {value!r} is not one of {listed}.")
    return value


def parse(table: ReleaseTable, args: Sequence[str]) -> Outcome:
    """``args`` (the words after the command) as click reads them with the release's options."""
    by: dict[str, OptionSpec] = {f: o for o in table.options for f in o.flags}
    positionals = [o for o in table.options if o.positional]
    values: dict[str, Any] = {o.dest: o.default for o in table.options if o.has_default}
    given: set[str] = set()
    loose: list[str] = []
    words = list(args)
    i = 0
    try:
        while i < len(words):
            word = words[i]
            i += 1
            if word == "--":
                loose.extend(words[i:])
                break
            if not word.startswith("-") or word == "-":
                loose.append(word)
                continue
            name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
            o = by.get(name)
            if o is None:
                raise _Error(f"No such option: {name}")
            if o.action is Action.STORE_TRUE:
                if eq:
                    raise _Error(f"Option '{name}' does not take a value.")
                values[o.dest] = True
            else:
                if not eq:
                    if i >= len(words):
                        raise _Error(f"Option '{name}' requires an argument.")
                    inline = words[i]
                    i += 1
                value = _convert(o, name, inline, dict(o.aliases))
                if o.action is Action.APPEND:
                    values[o.dest] = [*(values.get(o.dest) or ()), value] if o.dest in given else [value]
                else:
                    values[o.dest] = value
            given.add(o.dest)
        for o in positionals:
            if loose:
                values[o.dest] = loose.pop(0)
                given.add(o.dest)
            elif o.required:
                raise _Error(f"Missing argument '{o.dest.upper()}'.")
        if loose:
            raise _Error(f"Got unexpected extra argument{'s' if len(loose) > 1 else ''} ({' '.join(loose)})")
    except _Error as e:
        return Outcome(error=f"Error: {e}")
    return Outcome(values=MappingProxyType(values), given=frozenset(given))
