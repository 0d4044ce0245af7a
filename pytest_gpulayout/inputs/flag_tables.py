"""Each engine release's command-line options, as ``tools/engine_flags.py`` extracted them from its wheel (or
source): one packed file per engine (``engines/<engine>/flags/releases.json``), the first release in full and
every later one as its difference from the one before, so 50 releases of an engine cost little more than one.

A table is unpacked on first use, only up to the release asked for, and kept (``load`` / ``ReleaseTables``):
importing this module reads nothing. ``nearest`` picks the release a version is judged by (the newest shipped
at or below it) and ``history`` says when a flag the release refuses was last accepted.

Pure data: nothing here parses a command line (``release_parser.py`` does).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

#: the keys of a release record that are inherited from the release before when a packed record omits them
_SCALARS = ("wheel", "source", "read", "prog", "top_prog", "parser", "human_readable_int", "type_variants",
            "allow_abbrev", "env_prefix", "platform")


class Action(Enum):
    """What argparse (or click, or llama.cpp) does with an option (``action=``)."""

    STORE = "store"
    STORE_TRUE = "store_true"
    STORE_FALSE = "store_false"
    STORE_CONST = "store_const"
    BOOLEAN_OPTIONAL = "BooleanOptionalAction"
    ENABLE_DISABLE = "EnableDisableAction"   # vLLM 0.33: BooleanOptionalAction that pairs --enable-x / --disable-x
    APPEND = "append"
    EXTEND = "extend"
    COUNT = "count"
    HELP = "help"
    VERSION = "version"
    CUSTOM = "custom"          # a class of the engine's own (LoRAParserAction...): stores its values
    NEGATABLE = "negatable"    # llama.cpp: a switch with its own negated spellings (-kvu / -no-kvu)

    @classmethod
    def of(cls, text: str) -> Action:
        if text.startswith("class:"):
            return cls.CUSTOM
        try:
            return cls(text)
        except ValueError:
            return cls.CUSTOM

    @property
    def takes_value(self) -> bool:
        return self in (Action.STORE, Action.APPEND, Action.EXTEND, Action.CUSTOM)

    @property
    def boolean(self) -> bool:
        """``--x`` / ``--no-x`` (and vLLM 0.33's ``--enable-x`` / ``--disable-x``)."""
        return self in (Action.BOOLEAN_OPTIONAL, Action.ENABLE_DISABLE)


@dataclass(frozen=True)
class OptionSpec:
    """One option (or positional) of a release's parser, as its source declares it."""

    key: str                          # the first spelling (a positional: its dest)
    flags: tuple[str, ...]            # every spelling as declared (BooleanOptionalAction adds its --no- forms)
    dest: str
    negated: tuple[str, ...] = ()     # llama.cpp: the spellings that turn it off
    action: Action = Action.STORE
    action_name: str = "store"        # as declared (``class:LoRAParserAction``)
    type: str | None = None           # the release's type function (``int``, ``human_readable_int``...)
    nargs: str | int | None = None
    const: Any = None
    choices: tuple[Any, ...] | None = None
    choices_unknown: bool = False     # computed when the engine starts (not checked here)
    has_default: bool = False
    default: Any = None
    default_src: str = ""             # a default that is not a literal (a config object), as written
    required: bool = False
    deprecated: Any = False           # True, or the release's deprecation text
    env: str = ""                     # llama.cpp: the LLAMA_ARG_* variable that sets it
    aliases: tuple[tuple[str, str], ...] = ()  # click's ChoiceWithAlias (TensorRT-LLM): value -> the choice
    does: str = ""                    # an engine's own Action: store | const | nothing | error | raise | bool_str
    does_value: Any = None            # ``const``: the value it stores
    does_message: str = ""            # ``error`` / ``raise``: what it says
    at: str = ""                      # the wheel member and line it was declared at

    @property
    def positional(self) -> bool:
        return not self.flags

    @property
    def switch(self) -> bool:
        """Takes no value (``store_true``, ``BooleanOptionalAction``...)."""
        return not self.action.takes_value or self.nargs == 0

    @property
    def inverses(self) -> tuple[str, ...]:
        """vLLM 0.33's ``EnableDisableAction``: ``--disable-x`` for ``--enable-x`` and the other way round."""
        if self.action is not Action.ENABLE_DISABLE:
            return ()
        pairs = {"--enable-": "--disable-", "--disable-": "--enable-"}
        return tuple(inv + f[len(p):] for f in self.flags for p, inv in pairs.items() if f.startswith(p))

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every spelling argparse accepts for it, ``--no-`` forms of BooleanOptionalAction included."""
        if self.action is Action.NEGATABLE:
            return (*self.flags, *self.negated)
        if not self.action.boolean:
            return self.flags
        out: list[str] = []
        for f in self.flags:
            out.append(f)
            if f.startswith("--"):
                out.append("--no-" + f[2:])
        return (*out, *self.inverses)


def _spec(key: str, e: Mapping[str, Any]) -> OptionSpec:
    choices = e.get("choices")
    return OptionSpec(
        key=key, flags=tuple(e.get("flags", ())), negated=tuple(e.get("negated", ())), dest=e["dest"],
        action=Action.of(e.get("action", "store")),
        action_name=e.get("action", "store"), type=e.get("type"), nargs=e.get("nargs"), const=e.get("const"),
        choices=None if choices is None else tuple(choices), choices_unknown=bool(e.get("choices_unknown")),
        has_default="default" in e or e.get("action") in ("store_true", "store_false"),
        default=e.get("default", {"store_true": False, "store_false": True}.get(e.get("action", ""))),
        default_src=e.get("default_src", ""), required=bool(e.get("required")), deprecated=e.get("deprecated", False),
        env=e.get("env", ""), aliases=tuple(sorted(dict(e.get("aliases") or {}).items())),
        does=str(e.get("custom", {}).get("does", "")),
        does_value=e.get("custom", {}).get("value"), does_message=str(e.get("custom", {}).get("message", "")),
        at=e.get("at", ""))


@dataclass(frozen=True, eq=False)
class ReleaseTable:
    """One release's parser: its options in the order the parser holds them, and how its front end rewrites
    the command line first (``parser``: vLLM's ``FlexibleArgumentParser`` features)."""

    engine: str
    release: str
    options: tuple[OptionSpec, ...]
    prog: str = ""
    top_prog: str = ""
    allow_abbrev: bool = True
    parser: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    human_readable_int: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    type_variants: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    json_types: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    wheel: str = ""
    source: str = ""
    read: tuple[str, ...] = ()
    env_prefix: str = ""

    @cached_property
    def by_spelling(self) -> Mapping[str, OptionSpec]:
        out: dict[str, OptionSpec] = {}
        for o in self.options:
            for s in o.spellings:
                out.setdefault(s, o)
        return MappingProxyType(out)

    @cached_property
    def dest_by_spelling(self) -> Mapping[str, str]:
        """Every spelling's destination (``--tp`` -> ``tensor_parallel_size``)."""
        return MappingProxyType({s: o.dest for s, o in self.by_spelling.items()})

    @cached_property
    def by_dest(self) -> Mapping[str, tuple[OptionSpec, ...]]:
        out: dict[str, list[OptionSpec]] = {}
        for o in self.options:
            out.setdefault(o.dest, []).append(o)
        return MappingProxyType({k: tuple(v) for k, v in out.items()})

    def option(self, spelling: str) -> OptionSpec | None:
        return self.by_spelling.get(spelling)


# -- packing (tools/engine_flags.py writes, the package reads) ------------------------------------------------
def _order_diff(prev: Sequence[str], cur: Sequence[str]) -> list[Any]:
    out: list[Any] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, list(prev), list(cur), autojunk=False).get_opcodes():
        if tag == "equal":
            out.append([i1, i2])
        elif tag in ("replace", "insert"):
            out.extend(cur[j1:j2])
    return out


def _order_apply(prev: Sequence[str], segments: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for seg in segments:
        if isinstance(seg, list):
            out.extend(prev[seg[0]:seg[1]])
        else:
            out.append(seg)
    return out


def _key(e: Mapping[str, Any]) -> str:
    flags = e.get("flags") or ()
    return str(flags[0]) if flags else str(e["dest"])


def _split_at(entries: Sequence[Mapping[str, Any]]) -> tuple[list[str], str, dict[str, dict[str, Any]]]:
    files: list[str] = []
    at: list[str] = []
    body: dict[str, dict[str, Any]] = {}
    for e in entries:
        member, _, line = str(e.get("at", "")).rpartition(":")
        if member not in files:
            files.append(member)
        at.append(f"{files.index(member)}:{line}")
        body[_key(e)] = {k: v for k, v in e.items() if k != "at"}
    return files, " ".join(at), body


def pack(engine: str, releases: Sequence[Mapping[str, Any]], extracted_by: str) -> dict[str, Any]:
    """Full release records (``tools/engine_flags.py``'s output, each with ``options``) into one packed file."""
    ordered = sorted(releases, key=lambda r: Version(str(r["version"])))
    out: list[dict[str, Any]] = []
    prev: dict[str, Any] = {}
    prev_body: dict[str, dict[str, Any]] = {}
    prev_order: list[str] = []
    prev_json: dict[str, Any] = {}
    for rel in ordered:
        files, at, body = _split_at(rel["options"])
        order = list(body)
        rec: dict[str, Any] = {"version": rel["version"]}
        for k in _SCALARS:
            if k in rel and (not prev or prev.get(k) != rel[k]):
                rec[k] = rel[k]
        rec["set"] = {k: v for k, v in body.items() if prev_body.get(k) != v}
        rec["order"] = order if not prev else _order_diff(prev_order, order)
        rec["files"], rec["at"] = files, at
        json_types = dict(rel.get("json_types", {}))
        changed = {k: v for k, v in json_types.items() if prev_json.get(k) != v}
        if changed:
            rec["json_types"] = changed
        dropped = [k for k in prev_json if k not in json_types]
        if dropped:
            rec["json_types_drop"] = dropped
        out.append(rec)
        prev, prev_body, prev_order, prev_json = dict(rel), body, order, json_types
    return {"engine": engine, "extracted_by": extracted_by, "schema": 2, "releases": out}


def unpack(data: Mapping[str, Any], upto: str | None = None) -> list[dict[str, Any]]:
    """The full records of a packed file, oldest first (stopping at release ``upto`` when given)."""
    out: list[dict[str, Any]] = []
    scalars: dict[str, Any] = {}
    body: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    json_types: dict[str, Any] = {}
    for rec in data["releases"]:
        for k in _SCALARS:
            if k in rec:
                scalars[k] = rec[k]
        body = {**body, **rec.get("set", {})}
        order = list(rec["order"]) if not out else _order_apply(order, rec["order"])
        json_types = {k: v for k, v in {**json_types, **rec.get("json_types", {})}.items()
                      if k not in rec.get("json_types_drop", ())}
        files = rec.get("files", [])
        ats = rec.get("at", "").split()
        options = []
        for i, k in enumerate(order):
            e = dict(body[k])
            if i < len(ats):
                fi, _, line = ats[i].partition(":")
                e["at"] = f"{files[int(fi)]}:{line}" if fi.isdigit() and int(fi) < len(files) else ""
            options.append(e)
        out.append({"version": rec["version"], **scalars, "options": options, "json_types": dict(json_types)})
        if upto is not None and rec["version"] == upto:
            break
    return out


def table_of(engine: str, record: Mapping[str, Any]) -> ReleaseTable:
    return ReleaseTable(
        engine=engine, release=str(record["version"]),
        options=tuple(_spec(_key(e), e) for e in record["options"]),
        prog=str(record.get("prog", "")), top_prog=str(record.get("top_prog", "")),
        allow_abbrev=bool(record.get("allow_abbrev", True)),
        parser=MappingProxyType(dict(record.get("parser", {}))),
        human_readable_int=MappingProxyType(dict(record.get("human_readable_int", {}))),
        type_variants=MappingProxyType(dict(record.get("type_variants", {}))),
        json_types=MappingProxyType(dict(record.get("json_types", {}))),
        wheel=str(record.get("wheel", "")), source=str(record.get("source", "")),
        read=tuple(record.get("read", ())), env_prefix=str(record.get("env_prefix", "")))


@dataclass(frozen=True)
class FlagHistory:
    """A flag's life around one release: dropped by ``removed_in`` (``last_accepted`` the last release that
    took it), or first taken by ``added_in``; "" where it does not apply."""

    removed_in: str = ""
    last_accepted: str = ""
    added_in: str = ""


@dataclass(frozen=True)
class Chosen:
    """The table a version is judged by, and the note when it is not that version's own."""

    table: ReleaseTable
    note: str = ""


class ReleaseTables:
    """An engine's packed tables, read on first use and unpacked release by release as asked."""

    def __init__(self, engine: str, display: str, path: Path) -> None:
        self.engine = engine
        self.display = display
        self.path = path
        self._data: dict[str, Any] | None = None
        self._tables: dict[str, ReleaseTable] = {}
        self._records: list[dict[str, Any]] | None = None
        self._spellings: dict[str, frozenset[str]] = {}

    @property
    def data(self) -> Mapping[str, Any]:
        if self._data is None:
            self._data = json.loads(self.path.read_text()) if self.path.exists() else {"releases": []}
        return self._data

    @cached_property
    def versions(self) -> tuple[str, ...]:
        return tuple(str(r["version"]) for r in self.data["releases"])

    def records(self) -> list[dict[str, Any]]:
        """Every release in full (for ``history``)."""
        if self._records is None:
            self._records = unpack(self.data)
        return self._records

    def table(self, release: str) -> ReleaseTable:
        if release not in self._tables:
            recs = self._records if self._records is not None else unpack(self.data, upto=release)
            rec = next(r for r in recs if r["version"] == release)
            self._tables[release] = table_of(self.engine, rec)
        return self._tables[release]

    @cached_property
    def _parsed(self) -> tuple[tuple[Version, str], ...]:
        parsed: list[tuple[Version, str]] = []
        for v in self.versions:
            try:
                parsed.append((Version(v), v))
            except InvalidVersion:
                continue
        return tuple(sorted(parsed))

    def nearest(self, version: Version | None) -> Chosen | None:
        """The release ``version`` is judged by: its own, else the newest shipped below it (else the oldest),
        with a note saying which; the newest when no version is known."""
        parsed = self._parsed
        if not parsed:
            return None
        if version is None:
            return Chosen(self.table(parsed[-1][1]),
                          f"no {self.display} version known: judged by the newest table, {parsed[-1][1]}")
        below = [v for pv, v in parsed if pv <= version]
        if below:
            chosen = below[-1]
            note = "" if Version(chosen) == version else (
                f"{self.display} {version} has no table of its own: judged by {chosen}, the nearest release below")
        else:
            chosen = parsed[0][1]
            note = f"{self.display} {version} is older than every table: judged by {chosen}, the oldest"
        return Chosen(self.table(chosen), note)

    def spellings(self, release: str) -> frozenset[str]:
        if release not in self._spellings:
            rec = next(r for r in self.records() if r["version"] == release)
            names: set[str] = set()
            for e in rec["options"]:
                names.update(_spec(_key(e), e).spellings)
            self._spellings[release] = frozenset(names)
        return self._spellings[release]

    def history(self, spelling: str, release: str) -> FlagHistory:
        """When ``spelling``, which ``release`` refuses, was last accepted before it (and by which release it
        was dropped), or first accepted after it."""
        last = removed = added = ""
        after = False
        for v in self.versions:
            has = spelling in self.spellings(v)
            if v == release:
                after = True
                continue
            if not after:
                if has:
                    last, removed = v, ""
                elif last and not removed:
                    removed = v
            elif has and not added:
                added = v
        if last and not removed:
            removed = release
        return FlagHistory(removed_in=removed if last else "", last_accepted=last, added_in=added)
