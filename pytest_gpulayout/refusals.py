"""Config-time refusals: what an engine release refuses about a command line, a model and a layout before it
sizes any memory, in the release's own words.

``tools/config_ledger.py`` lists every ``raise`` / ``assert`` / exit of each release's config classes and
argument post-processing (vLLM ``config/*.py`` and ``engine/arg_utils.py``, SGLang ``server_args.py`` and
``arg_groups/``) into ``engines/<engine>/config_ledger.json``: one entry per distinct refusal (file, function,
conditions, exception, message template) with the releases it appears in and its line in each. The hand-kept
``engines/<engine>/config_classes.yaml`` answers every entry: ``rule: <id>`` (a rule of
``engines/<engine>/config_checks.py`` decides it), ``unreachable: <why>`` or ``open: <why>``.

A rule never types the engine's message or its line: it asks ``RuleBook.refuse(rule, release, values)`` for
the entry classified under its id that the release (the nearest listed one at or below it) holds, and gets
back the message filled in with the values the release would print, the exception class and
``file:line`` of that release. A rule whose entries the release does not hold is not in force there and
refuses nothing, so a check added or removed by a release is followed by the data, not by a version test.

This module is engine-neutral: it reads the engine's data files by name (as ``generation.py`` does).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache, cached_property
from importlib import resources
from typing import Any

from packaging.version import Version

from pytest_gpulayout.deployment import ParallelShape
from pytest_gpulayout.machine.capability import Capability, lowest
from pytest_gpulayout.machine.facts import Gpu

LEDGER_FILE = "config_ledger.json"
CLASSES_FILE = "config_classes.yaml"


class Verdict(Enum):
    """How a listed refusal is answered."""

    RULE = "rule"                # a rule decides it (and has a test)
    UNREACHABLE = "unreachable"  # no deployment the checks judge reaches it (the why says what it needs)
    OPEN = "open"                # reachable, not modelled yet (the why says what is missing)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    detail: str                  # the rule id, or why


@dataclass(frozen=True)
class LedgerEntry:
    """One refusal of the ledger: where it is, what it says, and the releases (and lines) it appears in."""

    id: str
    file: str
    function: str
    kind: str                    # raise | assert | exit
    exception: str
    conditions: tuple[str, ...]
    template: str
    at: tuple[tuple[Version, Version, int], ...]   # runs of listed releases sharing a line

    def line_in(self, release: Version) -> int | None:
        """The entry's line in listed ``release``; None when that release does not hold it (a run covers
        every listed release between its ends)."""
        for first, last, line in self.at:
            if first <= release <= last:
                return line
        return None

    @property
    def first(self) -> Version:
        return self.at[0][0]

    @property
    def last(self) -> Version:
        return self.at[-1][1]

    def releases_in(self, releases: Sequence[Version]) -> tuple[Version, ...]:
        return tuple(r for r in releases if any(a <= r <= b for a, b, _ in self.at))


@dataclass(frozen=True)
class ClassPattern:
    """One item of the classification file: the entries it matches and how they are answered. Every key
    given must match: ``file`` and ``function`` are shell patterns (``|`` separates alternatives), ``text``
    and ``condition`` regular expressions searched in the template and in the joined conditions."""

    classification: Classification
    file: str = "*"
    function: str = "*"
    text: str | None = None
    condition: str | None = None
    exception: str | None = None
    index: int = 0               # its place in the file (first match wins)

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None,
                                 re.Pattern[str] | None]:
        """The globs and expressions compiled once: a check classifies every entry of the ledger against
        the patterns up to the last rule (about 19,000 matches), which glob by glob cost 0.2 s a run."""
        def globs(text: str) -> re.Pattern[str]:
            return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in text.split("|")))

        def optional(expr: str | None) -> re.Pattern[str] | None:
            return re.compile(expr) if expr is not None else None

        return (globs(self.file), globs(self.function), optional(self.text), optional(self.condition),
                optional(self.exception))

    def matches(self, e: LedgerEntry) -> bool:
        file, function, text, condition, exception = self._compiled
        if not file.match(e.file) or not function.match(e.function):
            return False
        if text is not None and not text.search(e.template):
            return False
        if condition is not None and not condition.search(" && ".join(e.conditions)):
            return False
        return exception is None or exception.fullmatch(e.exception) is not None


@dataclass(frozen=True)
class Ledger:
    engine: str
    releases: tuple[Version, ...]
    entries: tuple[LedgerEntry, ...]
    patterns: tuple[ClassPattern, ...]
    #: the entries classified ``rule: <id>``, by id
    by_rule: Mapping[str, tuple[LedgerEntry, ...]] = field(default_factory=dict, compare=False, hash=False)

    def listed(self, version: Version) -> Version | None:
        """The listed release that answers for ``version``: itself, else the nearest listed below it
        (None when it is older than every listed release)."""
        below = [r for r in self.releases if r <= version]
        return below[-1] if below else None

    def classify(self, entry: LedgerEntry) -> Classification | None:
        for p in self.patterns:
            if p.matches(entry):
                return p.classification
        return None

    def pattern_of(self, entry: LedgerEntry) -> ClassPattern | None:
        return next((p for p in self.patterns if p.matches(entry)), None)

    def rule_entries(self, rule: str) -> tuple[LedgerEntry, ...]:
        return self.by_rule.get(rule, ())

    def held(self, rule: str, release: Version) -> tuple[LedgerEntry, ...]:
        """The entries of ``rule`` that listed ``release`` holds."""
        return tuple(e for e in self.rule_entries(rule) if e.line_in(release) is not None)


def _engine_file(engine: str, name: str) -> str:
    return (resources.files(f"pytest_gpulayout.engines.{engine}") / name).read_text(encoding="utf-8")


def parse_classes(text: str, *, where: str = CLASSES_FILE) -> tuple[ClassPattern, ...]:
    """The classification file's items, in order (see ``ClassPattern``). A malformed item is a ValueError
    naming the file and the item."""
    import yaml  # here: importing the checks (manifest/, the engines) costs no YAML until a ledger is read

    items = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []  # noqa: S506 - a safe loader
    if not isinstance(items, list):
        raise ValueError(f"{where}: expected a list of items")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{where}: item {i + 1}: expected a mapping")
        verdicts = [v for v in Verdict if v.value in item]
        if len(verdicts) != 1:
            raise ValueError(f"{where}: item {i + 1}: give exactly one of rule / unreachable / open")
        match = item.get("match", {})
        unknown = set(item) - {"match", verdicts[0].value} or set(match) - {
            "file", "function", "text", "condition", "exception"}
        if unknown:
            raise ValueError(f"{where}: item {i + 1}: unknown key {sorted(unknown)[0]!r}")
        out.append(ClassPattern(Classification(verdicts[0], str(item[verdicts[0].value])),
                                file=str(match.get("file", "*")), function=str(match.get("function", "*")),
                                text=match.get("text"), condition=match.get("condition"),
                                exception=match.get("exception"), index=i))
    return tuple(out)


def parse_ledger(data: Mapping[str, Any], patterns: tuple[ClassPattern, ...]) -> Ledger:
    versions = {r: Version(r) for r in data["releases"]}
    entries = tuple(
        LedgerEntry(id=e["id"], file=e["file"], function=e["function"], kind=e["kind"], exception=e["exception"],
                    conditions=tuple(e["conditions"]), template=e["template"],
                    at=tuple((versions[a], versions[b], int(line)) for a, b, line in e["at"]))
        for e in data["entries"])
    by_rule: dict[str, list[LedgerEntry]] = {}
    # only the items up to the last rule can classify an entry as a rule (first match wins): the rest of the
    # classification is read by the completeness test, not at run time
    rules = [p for p in patterns if p.classification.verdict is Verdict.RULE]
    upto = patterns[: max(p.index for p in rules) + 1] if rules else ()
    for e in entries:
        c = next((p.classification for p in upto if p.matches(e)), None)
        if c is not None and c.verdict is Verdict.RULE:
            by_rule.setdefault(c.detail, []).append(e)
    return Ledger(str(data["engine"]), tuple(versions.values()), entries, patterns,
                  {k: tuple(v) for k, v in by_rule.items()})


@cache
def load_ledger(engine: str) -> Ledger:
    """The shipped ledger of ``engine`` with its classification."""
    patterns = parse_classes(_engine_file(engine, CLASSES_FILE), where=f"engines/{engine}/{CLASSES_FILE}")
    return parse_ledger(json.loads(_engine_file(engine, LEDGER_FILE)), patterns)


# -- the release's words ------------------------------------------------------------------------------------

class MissingValue(KeyError):
    """A template names an expression the rule gave no value for."""


def _split_field(inner: str) -> tuple[str, str, str]:
    """``expr!r:spec`` -> (expr, conversion, spec), splitting only outside brackets and quotes."""
    depth, quote, i = 0, "", 0
    conv_at = spec_at = -1
    while i < len(inner):
        ch = inner[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == "!" and i + 1 < len(inner) and inner[i + 1] in "rsa" and (
                i + 2 == len(inner) or inner[i + 2] == ":"):
            conv_at = i
        elif depth == 0 and ch == ":" and spec_at < 0 and (conv_at < 0 or i > conv_at):
            spec_at = i
            break
        i += 1
    end = conv_at if conv_at >= 0 else (spec_at if spec_at >= 0 else len(inner))
    conv = inner[conv_at + 1] if conv_at >= 0 else ""
    spec = inner[spec_at + 1:] if spec_at >= 0 else ""
    return inner[:end], conv, spec


def evaluate(expr: str, values: Mapping[str, object]) -> object:
    """The value of one expression of the engine's source (an interpolation or a condition) over ``values``:
    the release's state at that point as a rule knows it. ``MissingValue`` when it reads anything the rule
    did not give: the entry is then not judged (never guessed).

    A name is looked up by its full dotted text first, then by its last part (``self.scheduler_config.
    max_num_seqs``, ``cfg.max_num_seqs`` and ``resolved_view(server_args).max_num_seqs`` all answer by
    ``max_num_seqs``); a call likewise (``current_platform.is_cuda()`` by ``is_cuda``: a value, not a
    function, whatever its arguments), except ``len``, ``int``, ``str``, ``bool``, ``min``, ``max``, ``abs``, ``sorted``
    and a string's ``startswith`` / ``endswith`` / ``lower`` / ``upper`` / ``strip``, which are applied.
    Constants, tuples and lists, arithmetic, comparisons (``in``, ``is``), ``and`` / ``or`` / ``not`` and
    ``x if c else y`` are evaluated as Python does."""
    if expr in values:
        return values[expr]
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError as exc:
        raise MissingValue(expr) from exc
    return _node(node, values, expr)


_BINOPS: Mapping[type[ast.operator], Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_COMPARE: Mapping[type[ast.cmpop], Any] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_STR_METHODS = frozenset({"startswith", "endswith", "lower", "upper", "strip"})
_APPLIED: Mapping[str, Any] = {"len": len, "int": int, "str": str, "bool": bool, "min": min, "max": max, "abs": abs,
                               "sorted": sorted}


def _lookup(node: ast.expr, values: Mapping[str, object], expr: str) -> object:
    text = ast.unparse(node)
    if text in values:
        return values[text]
    last = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if last is not None and last in values:
        return values[last]
    raise MissingValue(expr)


def _node(node: ast.expr, values: Mapping[str, object], expr: str) -> object:  # noqa: C901 - one flat dispatch
    text = ast.unparse(node)
    if text in values:
        return values[text]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        if isinstance(node, ast.Name) and node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        return _lookup(node, values, expr)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_node(e, values, expr) for e in node.elts]
        return set(items) if isinstance(node, ast.Set) else tuple(items)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_node(node.left, values, expr), _node(node.right, values, expr))
    if isinstance(node, ast.UnaryOp):
        operand = _node(node.operand, values, expr)
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(node.op, ast.USub):
            return -operand  # type: ignore[operator]
        raise MissingValue(expr)
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        result: object = is_and
        for value in node.values:
            result = _node(value, values, expr)
            if bool(result) is not is_and:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _node(node.left, values, expr)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _node(comparator, values, expr)
            if type(op) not in _COMPARE or not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _node(node.body if _node(node.test, values, expr) else node.orelse, values, expr)
    if isinstance(node, ast.Call) and not node.keywords:
        if isinstance(node.func, ast.Name) and node.func.id in _APPLIED and node.func.id not in values:
            return _APPLIED[node.func.id](*(_node(a, values, expr) for a in node.args))
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            base = _node(node.func.value, values, expr)
            if isinstance(base, str):
                return getattr(base, node.func.attr)(*(_node(a, values, expr) for a in node.args))
        return _lookup(node.func, values, expr)
    raise MissingValue(expr)


def holds(entry: LedgerEntry, values: Mapping[str, object]) -> bool:
    """Whether every condition ``entry`` sits under holds over ``values`` (``MissingValue`` when one reads
    what ``values`` does not give)."""
    return all(bool(evaluate(c, values)) for c in entry.conditions)


def fill(template: str, values: Mapping[str, object]) -> str:
    """``template`` (the ledger's f-string text) with each ``{expression!conv:spec}`` formatted as Python
    formats it; ``MissingValue`` when an expression has no value."""
    out: list[str] = []
    i, n = 0, len(template)
    while i < n:
        ch = template[i]
        if ch in "{}" and i + 1 < n and template[i + 1] == ch:
            out.append(ch)
            i += 2
            continue
        if ch != "{":
            out.append(ch)
            i += 1
            continue
        depth, j = 1, i + 1
        while j < n and depth:
            depth += {"{": 1, "}": -1}.get(template[j], 0)
            j += 1
        expr, conv, spec = _split_field(template[i + 1:j - 1])
        value = evaluate(expr, values)
        shown: object = repr(value) if conv == "r" else ascii(value) if conv == "a" else value
        out.append(format(shown, spec) if not conv else format(str(shown), spec))
        i = j
    return "".join(out)


class Dtype:
    """A torch dtype as the engine prints it (``torch.float16``), for templates that interpolate one."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


# -- what a rule reads and what it returns -----------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """The parallel layout and the GPUs a deployment runs on, as the config-time rules read them.

    ``compute_capability``: the lowest among the deployment's GPUs (None: unknown, so no rule that needs it
    refuses); ``gpu_total_mib`` / ``gpu_name``: what the engine's size tiers read (vLLM's scheduler defaults,
    SGLang's memory defaults). ``nodes``: hosts the deployment spans."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    compute_capability: Capability | None = None
    gpu_name: str = ""
    gpu_total_mib: int | None = None
    nodes: int = 1
    #: the CUDA devices the engine sees on its node where the deployment says (an artifact's
    #: ``CUDA_VISIBLE_DEVICES``); None: not said (the placement check judges the machine's GPUs)
    devices: int | None = None
    #: each host's InfiniBand devices where the machine's snapshot holds node facts for every host of the
    #: deployment: (host, whether ``/sys/class/infiniband`` exists (None: not recorded), its device names);
    #: None: not probed (an NVML-only snapshot), so nothing is claimed about the hosts' devices
    ib_hosts: tuple[tuple[str, bool | None, frozenset[str]], ...] | None = None

    @classmethod
    def of(cls, shape: ParallelShape, gpus: Sequence[Gpu]) -> Layout:
        """A deployment's (or a planner row's) sizes on ``gpus``: the lowest compute capability (None when one
        GPU's is unknown: nothing is claimed for the group), the smallest GPU's name and total memory, and the
        hosts they are on."""
        cc, unknown = lowest(gpus)
        sized = [g for g in gpus if g.memory_total_mib is not None]
        small = min(sized, key=lambda g: g.memory_total_mib or 0) if sized else (gpus[0] if gpus else None)
        hosts = {g.host for g in gpus}
        return cls(shape.tensor_parallel_size, shape.pipeline_parallel_size, shape.data_parallel_size,
                   None if unknown else cc, small.name if small is not None else "",
                   small.memory_total_mib if small is not None else None, max(1, len(hosts)))


@dataclass(frozen=True)
class Refusal:
    """One refusal in the release's words: ``message`` is the exception's text with its values filled in as
    the release formats it; ``source`` is ``file:line`` in that release (``release``: the listed release
    whose source it was read in; ``asked`` the release judged when they differ)."""

    rule: str
    exception: str
    message: str
    source: str
    release: str
    asked: str = ""
    entry: str = ""              # the ledger entry's id
    condition: str = ""          # the condition that failed, as written (what a bare ``assert`` prints nothing of)

    def text(self, display: str) -> str:
        """``vLLM 0.33.0 raises ValueError: "..." (vllm/config/scheduler.py:331)``; an ``assert`` without a
        message shows the condition it asserts."""
        read = f"{display} {self.release}" if not self.asked or self.asked == self.release else (
            f"{display} {self.asked} (read in {self.release}, the nearest listed release below it)")
        if self.message:
            return f"{read} raises {self.exception}: \"{self.message}\" ({self.source})"
        said = self.condition.removeprefix("not (").removesuffix(")") if self.exception == "AssertionError" \
            else self.condition
        return f"{read} raises {self.exception} with no message ({self.source}: {said})"


@dataclass(frozen=True)
class Judged:
    """What a rule book made of one deployment: the refusals, and the entries it could not judge (a
    condition read a value the rules do not know: said, never guessed)."""

    refusals: tuple[Refusal, ...] = ()
    not_judged: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleBook:
    """One engine's ledger as its rules use it: ``rules`` maps each rule id to what it refuses, in words."""

    ledger: Ledger
    display: str
    rules: Mapping[str, str]

    def in_force(self, rule: str, version: Version) -> bool:
        listed = self.ledger.listed(version)
        return listed is not None and bool(self.ledger.held(rule, listed))

    def judge(self, version: Version, values: Mapping[str, object], *,
              rules: Sequence[str] | None = None) -> Judged:
        """Every entry of ``rules`` (default: all) that the release holds, its conditions evaluated over
        ``values`` (the release's state as the rules resolved it): a ``Refusal`` where they all hold, with the
        message filled in. A release older than every listed one is judged by nothing."""
        listed = self.ledger.listed(version)
        if listed is None:
            return Judged()
        refusals: list[Refusal] = []
        not_judged: list[str] = []
        for rule in rules if rules is not None else self.rules:
            for e in self.ledger.held(rule, listed):
                try:
                    if not holds(e, values):
                        continue
                    message = fill(e.template, values)
                except MissingValue as missing:
                    not_judged.append(f"{e.file} {e.function} ({rule}): reads {missing.args[0]}")
                    continue
                except (TypeError, ZeroDivisionError) as wrong:
                    # a comparison the release does not make with these values (``None > 4``, ``tp % 0``): an
                    # earlier check (pydantic's field bounds from vLLM 0.11) refuses them first; said, never guessed
                    not_judged.append(f"{e.file} {e.function} ({rule}): cannot compare the values ({wrong})")
                    continue
                refusals.append(Refusal(rule=rule, exception=e.exception, message=message,
                                        source=f"{e.file}:{e.line_in(listed)}", release=str(listed),
                                        asked="" if listed == version else str(version), entry=e.id,
                                        condition=e.conditions[-1] if e.conditions else ""))
        return Judged(tuple(refusals), tuple(not_judged))
