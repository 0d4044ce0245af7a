"""A command line read the way click 8 reads it, for an engine whose CLI is a click command (``trtllm-serve
serve``, ``tensorrt_llm/commands/serve.py``), from the release's table (``flag_tables.ReleaseTable``).

click (``parser.py`` ``_OptionParser``, ``core.py`` ``Command.parse_args``) reads a line in three steps, and
this module keeps them, so the first refusal is the one click prints:

1. it parses the words: an option is matched by one of its exact spellings (no prefixes, no ``_`` / ``-``
   rewriting), ``--opt=value`` or the next word is the value (whatever it looks like), a flag given a value
   is refused; a word that is not an option is a positional (``--`` ends the options). A long spelling it
   does not know is ``NoSuchOption`` with the long spellings ``difflib.get_close_matches`` finds
   (``--help`` among them); a single-dash word is matched letter by letter as short options, so ``-tp``
   fails on ``-t``.
2. it processes the parameters in the order they were first given, then the others as declared (``core.py
   iter_params_for_processing``): each value converted by its type (``int``, ``float``, a ``Choice``), the
   positional ``MODEL`` required. ``--help`` is eager: given on a line that parses, it prints the help and
   exits before anything else is processed.
3. words left over are ``Got unexpected extra argument(s) (...)``.

Its words, as the line ``Error: ...`` it prints, are those of ``click/exceptions.py``, ``parser.py``,
``types.py`` and ``core.py``. ``No such option`` changed in click 8.4: up to 8.3 (8.1.8, 8.2.0, 8.3.0 read)
``No such option: --x Did you mean --y?`` (several: ``(Possible options: --a, --b)``), from 8.4 (8.4.0,
8.5.1 read) ``No such option '--x'. Did you mean '--y'?`` (several: ``(Did you mean one of: '--a',
'--b'?)``). ``CLICK_8_4`` picks the later words. The others are the same in every 8.x read: ``Option '--x'
requires an argument.``, ``Option '--x' does not take a value.``, ``Invalid value for '--x' / '--y': 'v' is
not a valid integer.`` (every spelling of the option, as declared: ``Parameter.get_error_hint``; ``float``
likewise; ``'v' is not one of 'a', 'b'.`` for a choice, ``'v' is not 'a'.`` for a single one), ``Missing
argument 'MODEL'.``, ``Got unexpected extra argument (v)``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from packaging.version import Version

from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable
from pytest_gpulayout.inputs.release_parser import Outcome

#: the first click whose ``NoSuchOption`` quotes the name (``No such option '--x'.``)
CLICK_8_4 = Version("8.4")
#: click adds ``--help`` to every command (``Command.get_help_option``)
HELP = "--help"


class _Error(Exception):
    pass


def _quoted(items: Sequence[str]) -> str:
    return ", ".join(repr(p) for p in items)


def no_such_option(name: str, long_spellings: Sequence[str], click: Version | None = None) -> str:
    """click's ``NoSuchOption`` for ``name``, with its close matches among the long spellings (a short option
    gets none: ``_match_short_opt`` passes no possibilities)."""
    close = sorted(difflib.get_close_matches(name, list(long_spellings))) if name.startswith("--") else []
    if click is not None and click >= CLICK_8_4:
        text = f"No such option {name!r}."
        if close:
            text += f" Did you mean {close[0]!r}?" if len(close) == 1 else f" (Did you mean one of: {_quoted(close)}?)"
        return text
    text = f"No such option: {name}"
    if close:
        text += f" Did you mean {close[0]}?" if len(close) == 1 else f" (Possible options: {', '.join(close)})"
    return text


def _hint(o: OptionSpec) -> str:
    return " / ".join(f"'{f}'" for f in o.flags) if o.flags else f"'{o.dest.upper()}'"


def _convert(o: OptionSpec, value: str) -> Any:
    if o.type == "int":
        try:
            return int(value)
        except ValueError:
            raise _Error(f"Invalid value for {_hint(o)}: {value!r} is not a valid integer.") from None
    if o.type == "float":
        try:
            return float(value)
        except ValueError:
            raise _Error(f"Invalid value for {_hint(o)}: {value!r} is not a valid float.") from None
    value = dict(o.aliases).get(value, value)  # ChoiceWithAlias.convert: the alias first
    if o.choices is not None and not o.choices_unknown and value not in o.choices:
        listed = _quoted([str(c) for c in o.choices])
        said = f"is not {listed}" if len(o.choices) == 1 else f"is not one of {listed}"
        raise _Error(f"Invalid value for {_hint(o)}: {value!r} {said}.")
    return value


def _click_version(table: ReleaseTable) -> Version | None:
    text = table.parser.get("click_version")
    return Version(str(text)) if text else None


def parse(table: ReleaseTable, args: Sequence[str], *, click: Version | None = None) -> Outcome:
    """``args`` (the words after the command) as click reads them with the release's options; ``click``: the
    click whose words are used (default: the table's ``parser.click_version``, else click 8.3's)."""
    words_of = click if click is not None else _click_version(table)
    by: dict[str, OptionSpec] = {f: o for o in table.options for f in o.flags}
    longs = [f for o in table.options for f in o.flags if f.startswith("--")] + [HELP]
    raw: dict[str, list[str]] = {}      # dest -> the words given, in order
    invoked: list[OptionSpec] = []      # first invocation order
    switches: set[str] = set()
    loose: list[str] = []
    helped = False
    words = list(args)
    i = 0
    try:
        while i < len(words):  # step 1: the parser
            word = words[i]
            i += 1
            if word == "--":
                loose.extend(words[i:])
                break
            if not word.startswith("-") or word == "-":
                loose.append(word)
                continue
            name, eq, inline = word.partition("=")
            o = by.get(name)
            if o is None and name == HELP:
                if eq:
                    raise _Error(f"Option {name!r} does not take a value.")
                helped = True
                continue
            if o is None:
                if word[:2] != "--":  # _match_short_opt: the first letter that is no short option
                    first = word[:2]
                    if first not in by:
                        raise _Error(no_such_option(first, longs, words_of))
                    o, name, eq, inline = by[first], first, ("=" if len(word) > 2 else ""), word[2:]
                else:
                    raise _Error(no_such_option(name, longs, words_of))
            if o not in invoked:
                invoked.append(o)
            if o.switch:
                if eq:
                    raise _Error(f"Option {name!r} does not take a value.")
                switches.add(o.dest)
                continue
            if not eq:
                if i >= len(words):
                    raise _Error(f"Option {name!r} requires an argument.")
                inline = words[i]
                i += 1
            raw.setdefault(o.dest, []).append(inline)
        if helped:
            return Outcome(help=True, error=f"{table.prog or 'trtllm-serve'}: --help prints the help and exits "
                                            "without serving")
        positionals = [o for o in table.options if o.positional]
        values: dict[str, Any] = {o.dest: o.default for o in table.options if o.has_default}
        given: set[str] = set()
        given_pos = dict(zip((o.dest for o in positionals), loose, strict=False))
        extra = loose[len(positionals):]
        order = [*invoked, *positionals, *(o for o in table.options if o not in invoked and not o.positional)]
        for o in order:  # step 2: each parameter processed (converted, required), first given first
            if o.positional:
                if o.dest in given_pos:
                    values[o.dest] = given_pos[o.dest]
                    given.add(o.dest)
                elif o.required:
                    raise _Error(f"Missing argument {_hint(o)}.")
                continue
            if o.dest in switches:
                values[o.dest] = True
                given.add(o.dest)
            elif o.dest in raw:
                if o.action is Action.APPEND:  # multiple=True: every value; else the last one given wins
                    values[o.dest] = [_convert(o, v) for v in raw[o.dest]]
                else:
                    values[o.dest] = _convert(o, raw[o.dest][-1])
                given.add(o.dest)
        if extra:  # step 3
            raise _Error(f"Got unexpected extra argument{'s' if len(extra) > 1 else ''} ({' '.join(extra)})")
    except _Error as e:
        return Outcome(error=f"Error: {e}")
    return Outcome(values=MappingProxyType(values), given=frozenset(given))
