"""An engine's command line read the way its own parser reads it: ``Engine.parse_args`` (spellings only:
``ParsedArgs``) and each engine's ``cli.resolve`` (the release's whole parser: ``ResolvedArgs``).

vLLM and SGLang parse with ``argparse``: a long option may be shortened to any unambiguous prefix
(``allow_abbrev``, on in both: ``--tensor-para 2``), ``--flag=value`` and ``--flag value`` are the same,
and vLLM's ``FlexibleArgumentParser`` also turns ``_`` into ``-`` in the name of a long option
(``--tensor_parallel_size``). llama.cpp's ``common/arg.cpp`` matches spellings exactly. Each engine's
``cli.py`` holds its table of options (``FlagTable``: read from the release's
``flags/<version>.json``, which ``tools/engine_flags.py`` extracts from the wheel) and its
spelling rules; this module applies them: every flag comes back under its canonical name (the first
long spelling: ``--tensor-parallel-size``), with the value it takes and how it was written.

``ResolvedArgs`` is the one answer for a command line: each engine's ``cli.resolve(args, version)`` runs the
release's own parser, rebuilt from its extracted table (``flag_tables.py``, ``release_parser.py``), and fills it.
``FlagTable.from_release`` gives the spelling table of the same release for ``ParsedArgs``.

Pure text: nothing here runs or imports an engine.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.inputs.flag_tables import ReleaseTable

#: argparse's ``_negative_number_matcher``: such a token is a value, not an option
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
#: argparse's words when a flag needs a value it did not get
_EXPECTED = {"1": "expected one argument", "+": "expected at least one argument"}
#: flags that end the argument list's options (``--``) or print and exit
_HELP = ("-h", "--help")


@dataclass(frozen=True)
class Option:
    """One option of the engine's parser: its canonical spelling and how many values it takes
    (``"0"`` a switch, ``"1"`` one value, ``"?"`` an optional value, ``"+"`` / ``"*"`` a list)."""

    canonical: str
    nargs: str = "1"


@dataclass(frozen=True)
class FlagTable:
    """Every spelling of every option of one engine release, and that engine's spelling rules."""

    engine: str                                 # the engine's display name (messages)
    release: str                                # the release the table was read from ("" : hand-written)
    options: Mapping[str, Option]               # every spelling -> its option
    underscores_as_dashes: bool = False         # vLLM's FlexibleArgumentParser
    allow_abbrev: bool = True                   # argparse's default
    complete: bool = True                       # every flag of the release is listed (else unknown = not judged)
    prog: str = ""                              # the program name in its usage errors
    positionals: tuple[str, ...] = ()           # the destinations of its positional arguments (``model_tag``)

    @classmethod
    def from_json(cls, path: Path, *, engine: str, prog: str,
                  extra: Mapping[str, Option] | None = None) -> FlagTable:
        data = json.loads(path.read_text())
        options: dict[str, Option] = {}
        for canonical, entry in data["options"].items():
            opt = Option(canonical, str(entry.get("nargs", "1")))
            for name in entry["names"]:
                # BooleanOptionalAction's --no-<name> says the opposite: its own canonical name
                negated = name.startswith("--no-") and not canonical.startswith("--no-")
                options.setdefault(name, Option(name, opt.nargs) if negated else opt)
        for name, opt in (extra or {}).items():
            options.setdefault(name, opt)
        return cls(engine=engine, release=str(data.get("version", "")), options=MappingProxyType(options),
                   underscores_as_dashes=bool(data.get("underscores_as_dashes", False)),
                   allow_abbrev=bool(data.get("allow_abbrev", True)), prog=prog)

    @classmethod
    def from_release(cls, table: ReleaseTable, *, engine: str, prog: str, underscores_as_dashes: bool = False,
                     extra: Mapping[str, Option] | None = None) -> FlagTable:
        """The spellings of one release's parser (``ReleaseTable``), each under its first long spelling."""
        options: dict[str, Option] = {}
        for o in table.options:
            if o.positional:
                continue
            nargs = "0" if o.switch else ("1" if o.nargs is None else ("+" if isinstance(o.nargs, int)
                                                                       else str(o.nargs)))
            canonical = next((f for f in o.flags if f.startswith("--")), o.flags[0])
            opt = Option(canonical, nargs)
            off = Option(next((f for f in o.negated if f.startswith("--")), o.negated[0]), nargs) if o.negated else opt
            for name in o.spellings:
                if name in o.negated:
                    options.setdefault(name, off)
                    continue
                negated = name.startswith("--no-") and name not in o.flags
                options.setdefault(name, Option(name, nargs) if negated else opt)
        for name, opt in (extra or {}).items():
            options.setdefault(name, opt)
        return cls(engine=engine, release=table.release, options=MappingProxyType(options),
                   underscores_as_dashes=underscores_as_dashes, allow_abbrev=table.allow_abbrev, prog=prog,
                   positionals=tuple(o.dest for o in table.options if o.positional))

    def canonical(self, spelling: str) -> str | None:
        """The canonical name of ``spelling`` (exact or, by the engine's rules, its prefix or ``_``
        spelling); None when the engine does not know it or the prefix is ambiguous."""
        found = self.lookup(spelling)
        return found.canonical if isinstance(found, Option) else None

    def lookup(self, spelling: str) -> Option | list[str] | None:
        """The option ``spelling`` names, the canonical names it could mean (ambiguous prefix), or None."""
        name = self.normalize(spelling)
        if name in self.options:
            return self.options[name]
        if not (self.allow_abbrev and name.startswith("--") and len(name) > 2):
            return None
        matches = sorted({s for s in self.options if s.startswith(name) and s.startswith("--")})
        canon = sorted({self.options[s].canonical for s in matches})
        if len(canon) == 1:
            return self.options[matches[0]]
        return matches or None

    def normalize(self, spelling: str) -> str:
        """The spelling after the engine's own rewriting (vLLM: ``_`` to ``-`` in a long option's name,
        up to the first ``.``)."""
        if self.underscores_as_dashes and spelling.startswith("--"):
            head, dot, tail = spelling[2:].partition(".")
            return "--" + head.replace("_", "-") + dot + tail
        return spelling

    def suggest(self, spelling: str) -> str:
        """``; did you mean --x?`` for a flag the engine does not know ("" when nothing is close)."""
        name = self.normalize(spelling)
        close = difflib.get_close_matches(name, [s for s in self.options if s.startswith("--")], n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


def release_table(folder: Path, version: Version | None) -> Path | None:
    """The ``<release>.json`` in ``folder`` for ``version``: the newest at or before it, else the
    oldest (None: the folder has none)."""
    found: list[tuple[Version, Path]] = []
    for p in folder.glob("*.json"):
        try:
            found.append((Version(p.stem), p))
        except InvalidVersion:
            continue
    if not found:
        return None
    found.sort()
    if version is None:
        return found[-1][1]
    before = [p for v, p in found if v <= version]
    return before[-1] if before else found[0][1]


@dataclass(frozen=True)
class Given:
    """One flag as the engine reads it."""

    flag: str                 # canonical: --tensor-parallel-size
    written: str              # as written: --tensor_para
    value: str | None         # None for a switch; a list's values joined by spaces
    index: int                # position of the flag in the arguments

    def show(self) -> str:
        """``--tensor_para`` (= --tensor-parallel-size) for messages."""
        return self.flag if self.written == self.flag else f"{self.written} (= {self.flag})"


@dataclass(frozen=True)
class ParsedArgs:
    """What an engine's parser makes of an argument list."""

    table: FlagTable
    given: tuple[Given, ...] = ()
    positionals: tuple[str, ...] = ()
    #: flags the engine does not know, as written
    unknown: tuple[str, ...] = ()
    #: the engine's own usage errors other than unknown flags (ambiguous prefix, missing value)
    errors: tuple[str, ...] = ()
    #: what each unknown flag may have meant (did-you-mean), by the flag as written
    hints: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the unknown flags with the value taken as theirs, as written
    unknown_args: tuple[str, ...] = ()

    def value(self, flag: str) -> str | None:
        """The last value given for canonical ``flag`` (argparse: the last one wins)."""
        for g in reversed(self.given):
            if g.flag == flag:
                return g.value
        return None

    def has(self, flag: str) -> bool:
        return any(g.flag == flag for g in self.given)

    def find(self, flag: str) -> Given | None:
        for g in reversed(self.given):
            if g.flag == flag:
                return g
        return None

    def canonical_args(self) -> list[str]:
        """The arguments with every known flag in its canonical spelling and its value attached
        (``--flag=value``), unknown ones as written (for tables keyed by canonical names)."""
        out: list[str] = []
        for g in self.given:
            out.append(g.flag if g.value is None else f"{g.flag}={g.value}")
        out.extend(self.unknown_args)
        return out

    def usage_error(self) -> str | None:
        """The engine's own usage error for these arguments (argparse's words), or None."""
        if self.errors:
            return self.errors[0]
        if self.unknown and self.table.complete:
            first = self.unknown[0]
            return f"unrecognized arguments: {' '.join(self.unknown)}" + self.hints.get(first, "")
        return None


@dataclass(frozen=True)
class ResolvedArgs:
    """A command line as one release's parser and argument post-processing resolve it: every option's
    destination (``max_num_batched_tokens``) with its typed value, the release's own default where the
    line does not set it. What the config-time rules (each engine's refusals at config time) and the
    memory model read, so that one parse per deployment feeds every check.

    ``release``: the release whose table parsed the line (the nearest shipped at or below the one judged;
    ``release_note`` says so when they differ). ``errors``: the release's own refusal of the line, in its
    words: the line it prints before it exits (``vllm serve: error: argument --max-model-len: invalid
    human_readable_int value: 'x'``; argparse stops at the first), or the exception its front end raises
    (``ValueError: ...``). ``hints``: what this project adds about a refused flag (the release that removed
    it, the spelling it may have meant), never the engine's words. ``deprecated``: the flags given that the
    release marks deprecated. ``args``: the words its argparse received, after the release's own rewriting
    (vLLM's ``_`` to ``-``, dotted keys, ``-O``, ``--config FILE``)."""

    engine: str
    release: str
    values: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    given: frozenset[str] = frozenset()
    errors: tuple[str, ...] = ()
    release_note: str = ""
    hints: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    #: each spelling of the release's options -> its destination (empty: no table, argparse's own rule applies)
    dests: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: files the line has the release read (SGLang's ``--config FILE``) that cannot be read here (in a container),
    #: each with why: ``values`` are the line's without their keys, so what they set was not judged
    not_read: tuple[str, ...] = ()
    #: the words a ``--config FILE`` merged into the line (its keys as flags): what the knobs read besides
    #: ``launch.args``
    from_file: tuple[str, ...] = ()
    #: what the release parses but does not act on, each in words (``--config=FILE``, a file never merged)
    ignored: tuple[str, ...] = ()
    #: the flags given whose value the release converts with a function of its own that is not rebuilt here
    #: (``arg_types.passes_through``), each as ``flag (function)``: a value that function refuses is not refused
    unchecked: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The release accepts the line."""
        return not self.errors

    def refusal(self) -> str:
        """The release's refusal and this project's hints, one line (empty when accepted)."""
        if not self.errors:
            return ""
        # a multi-line refusal (pydantic's validation error, field by field) is one line, its lines joined
        first = " ".join(line.strip() for line in self.errors[0].splitlines() if line.strip()
                         and not line.strip().startswith("For further information visit"))
        return "; ".join([first, *self.hints])

    def get(self, dest: str, default: object = None) -> object:
        """The value of ``dest`` (its release default when not given; ``default`` when the release has none)."""
        return self.values.get(dest, default)

    def is_set(self, dest: str) -> bool:
        """Whether the command line itself sets ``dest``."""
        return dest in self.given

    def flag(self, dest: str) -> bool:
        """Whether ``dest`` is on (a switch given, or one whose release default is on)."""
        return bool(self.values.get(dest, False))

    def json_object(self, dest: str) -> Mapping[str, object] | None:
        """``dest`` as the JSON object it holds (a parsed mapping, or text that reads as one); None otherwise."""
        given = self.values.get(dest)
        if isinstance(given, str):
            try:
                given = json.loads(given)
            except ValueError:
                return None
        return given if isinstance(given, Mapping) else None

    def dest(self, spelling: str) -> str:
        """The destination of an option's spelling in this release (``--tp`` -> ``tensor_parallel_size``);
        without a table, argparse's own rule (the long name, ``-`` as ``_``)."""
        return self.dests.get(spelling) or spelling.lstrip("-").replace("-", "_")


def _looks_like_option(token: str, table: FlagTable) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE.match(token)


def parse_args(args: Sequence[str], table: FlagTable) -> ParsedArgs:
    """Read ``args`` as the engine's parser does (see the module's docstring)."""
    given: list[Given] = []
    positionals: list[str] = []
    unknown: list[str] = []
    unknown_args: list[str] = []
    errors: list[str] = []
    hints: dict[str, str] = {}
    i = 0
    n = len(args)
    while i < n:
        token = args[i]
        if token == "--":
            positionals.extend(args[i + 1:])
            break
        if not _looks_like_option(token, table):
            positionals.append(token)
            i += 1
            continue
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("--") and "=" in token and table.lookup(token.split("=", 1)[0]) is not None:
            name, eq, inline = token.partition("=")
        found = table.lookup(name)
        start = i
        i += 1
        if found is None or isinstance(found, list):
            if isinstance(found, list):
                errors.append(f"ambiguous option: {name} could match {', '.join(found)}")
            else:
                unknown.append(token)
                unknown_args.append(token)
                hints[token] = table.suggest(name)
                # a value after an unknown flag is taken as its value (not as the model)
                if not eq and i < n and not _looks_like_option(args[i], table):
                    unknown_args.append(args[i])
                    i += 1
            continue
        opt = found
        value: str | None = inline if eq else None
        if opt.nargs == "0":
            if eq:
                errors.append(f"argument {opt.canonical}: ignored explicit argument {inline!r}")
        elif value is None:
            values: list[str] = []
            while i < n and not _looks_like_option(args[i], table) and args[i] != "--":
                values.append(args[i])
                i += 1
                if opt.nargs in ("1", "?"):
                    break
            if not values and opt.nargs in _EXPECTED:
                errors.append(f"argument {opt.canonical}: {_EXPECTED[opt.nargs]}")
            value = " ".join(values) if values else None
        given.append(Given(opt.canonical, name, value, start))
    return ParsedArgs(table, tuple(given), tuple(positionals), tuple(unknown), tuple(errors),
                      MappingProxyType(hints), tuple(unknown_args))


def owned_flags(table: FlagTable, spellings: Mapping[str, str]) -> dict[str, str]:
    """``{canonical flag: manifest key}`` for the spellings a manifest key owns (``Flags`` and its
    aliases), each put through the engine's table (a spelling it does not know is kept as is)."""
    out: dict[str, str] = {}
    for spelling, key in spellings.items():
        out[table.canonical(spelling) or spelling] = key
    return out


def loopback(host: str) -> bool:
    """127.0.0.1, localhost, ::1 (and the rest of 127.0.0.0/8)."""
    h = host.strip().strip("[]").lower()
    return h in ("localhost", "::1", "0:0:0:0:0:0:0:1") or h.startswith("127.")


def hand_table(engine: str, spellings: Iterable[tuple[Sequence[str], str]], *, prog: str) -> FlagTable:
    """A table written by hand (llama.cpp): ``(spellings, nargs)`` pairs, exact matches only."""
    options: dict[str, Option] = {}
    for names, nargs in spellings:
        canonical = next((n for n in names if n.startswith("--")), names[0])
        for n in names:
            options.setdefault(n, Option(canonical, nargs))
    return FlagTable(engine=engine, release="", options=MappingProxyType(options), allow_abbrev=False,
                     complete=False, prog=prog)
