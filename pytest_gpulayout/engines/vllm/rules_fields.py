"""pydantic's field constraints on vLLM's config classes (0.11+): ``check(args, version) -> Judged``.

From 0.11 the config classes (``vllm/config/*.py``) are pydantic dataclasses: building one validates every
keyword against its field's annotation before ``__post_init__`` runs, so a value out of a ``Field(ge=, gt=, le=,
lt=, multiple_of=, min_length=, max_length=)`` bound, off a ``Literal[...]``, or a key the class does not have
where it forbids extra keys (``ConfigDict(extra="forbid")``; every ``@config`` class from 0.16,
``vllm/config/utils.py``) is refused in pydantic's words::

    1 validation error for SchedulerConfig
    max_num_seqs
      Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]

(pydantic 2's templates, ``pydantic_core`` ``ErrorType``; the "For further information visit" line that follows
each error is pydantic's own and not repeated). The table is ``fields/config_fields.json``, written from each
release's sources by ``tools/config_fields.py``: per class its fields' constraints and line, and which
``EngineArgs`` destination ``create_engine_config`` passes by keyword to which field, and which JSON flag builds
which class.

What is judged, on the line's own values only (a destination the line sets, a key of a JSON config it gives):

- a destination passed as ``self.<dest>`` to a field (``SchedulerConfig(max_num_seqs=self.max_num_seqs, ...)``,
  engine/arg_utils.py:2617 in 0.32.0): argparse types the value but does not check the range
  (``--max-num-seqs 0``);
- a key of a JSON flag whose ``EngineArgs`` field is annotated with the class (``--compilation-config``,
  ``--kv-transfer-config``, ``--eplb-config``, ``--attention-config``, ...: ``parse_dataclass`` validates the
  JSON with ``TypeAdapter(cls).validate_json`` while the line is parsed, and argparse reports it as ``argument
  --x: <the same text>``), nested config classes included (``pass_config.<key>``), and of
  ``--speculative-config``, a dict built into ``SpeculativeConfig(**...)`` by ``create_speculative_config``
  (the keys as ``rules_speculative.speculative`` assembles them).

Not judged, nothing guessed: a type error (pydantic's lax coercions are not reproduced: only ints and floats
against bounds, strings and ints against Literal choices of their own type), a field rewritten first by a
``field_validator(mode="before"/"wrap"/"plain")`` or a class with a ``model_validator(mode="before"/"wrap")``,
a destination ``EngineArgs`` assigns again before the constructor (other than its ``is None`` defaults), a union
of other types, ``SkipValidation``. Where such a value would fail the bound as written, the note says so.
Before 0.11 (plain dataclasses) nothing is validated: the rule is not in force.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.refusals import Judged, MissingValue, Refusal, evaluate

RULE = "vllm.fields.constraint"
#: rule id -> what it refuses (judged here, not over the ledger: pydantic's checks are no raise of the release)
FIELD_RULES: Mapping[str, str] = {
    RULE: "a value the line sets (a flag's destination, a key of a JSON config) outside its config class "
          "field's pydantic constraint (a bound, a Literal), or a key the class does not have where it forbids "
          "extra keys (0.11+)",
}
TABLE = Path(__file__).with_name("fields") / "config_fields.json"
#: the config classes are pydantic dataclasses from 0.11.0 (``from pydantic.dataclasses import dataclass``)
PYDANTIC_SINCE = Version("0.11.0")
SPECULATIVE = "speculative_config"
#: what ``EngineArgs`` derives from the line where it does not set it, judged at the value the release resolves
#: (``config_checks.scheduler``): from 0.11.1 ``max_num_batched_tokens = min(max_num_seqs * max_model_len, ...)``
#: (engine/arg_utils.py:3167-3176 in 0.32.0), so ``--max-num-seqs 0`` makes it 0 too and pydantic names both
DERIVED = ("max_num_batched_tokens", "max_num_seqs")
EXCEPTION = "ValidationError"
#: pydantic-core's order of the numeric checks (``ConstrainedIntValidator`` / ``ConstrainedFloatValidator``)
_NUMERIC = ("multiple_of", "le", "lt", "ge", "gt")


@dataclass(frozen=True)
class FieldError:
    """One of pydantic's line-errors: where (``loc``), its message and type, the input as pydantic shows it."""

    loc: str
    message: str
    kind: str
    value: object
    line: int
    member: str = ""     # the file of the class the field is of (``_at`` fills it in)

    def text(self) -> str:
        return (f"{self.loc}\n  {self.message} [type={self.kind}, input_value={self.value!r}, "
                f"input_type={type(self.value).__name__}]")


def _class_apply(before: Mapping[str, Any], diff: Mapping[str, Any]) -> Mapping[str, Any]:
    """A class as a later release has it: the record whole, or (``diff``) what changed of it, field by field."""
    if not diff.get("diff"):
        return diff
    fields = {**before["fields"], **diff.get("fields", {})}
    return {**{k: diff.get(k, before[k]) for k in ("at", "forbid", "before")},
            "fields": {k: v for k, v in fields.items() if k not in diff.get("fields_drop", ())}}


def unpack(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The packed table as one full record per release (the inverse of ``tools/config_fields.py pack``, which
    checks its output with this)."""
    out: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] = {}
    for entry in data["releases"]:
        if not cur:
            cur = {k: entry[k] for k in ("classes", "flags", "reassigned", "json")}
        else:
            cur = dict(cur)
            for key in ("classes", "flags", "json"):
                given = entry.get(key, {})
                if key == "classes":
                    given = {k: _class_apply(cur[key][k], v) if k in cur[key] else v for k, v in given.items()}
                merged = {**cur[key], **given}
                cur[key] = {k: v for k, v in merged.items() if k not in entry.get(f"{key}_drop", ())}
            cur["reassigned"] = entry.get("reassigned", cur["reassigned"])
        out[entry["version"]] = cur
    return out


@cache
def releases() -> dict[str, dict[str, Any]]:
    return unpack(json.loads(TABLE.read_text()))


def listed(version: Version) -> str | None:
    """The listed release that answers for ``version`` (itself, else the nearest below); None before 0.11."""
    if version < PYDANTIC_SINCE:
        return None
    below = [v for v in releases() if Version(v) <= version]
    return max(below, key=Version) if below else None


def _num(bound: float) -> str:
    """A bound as pydantic prints it (Rust's ``Display``: ``0.0`` is ``0``, ``0.5`` is ``0.5``)."""
    if isinstance(bound, float) and bound.is_integer():
        return str(int(bound))
    return str(bound)


def _literal_words(choices: list[object]) -> str:
    """``'a', 'b' or 'c'`` (pydantic's ``expected`` of ``literal_error``)."""
    shown = [repr(c) for c in choices]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def field_error(loc: str, spec: Mapping[str, Any], value: object) -> FieldError | None:
    """What pydantic says of ``value`` for a field of constraint ``spec``; None where it takes it or where the
    verdict is not read here (a type error, an open constraint)."""
    line = int(spec.get("line", 0))
    if value is None or "open" in spec:
        return None
    if "enum" in spec:  # an IntEnum (``OptimizationLevel``): a member's value, or its digits as a string (lax)
        members = [int(m) for m in spec["enum"]]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        if isinstance(value, int) and value in members:
            return None
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value) and int(value) in members:
            return None
        shown = [str(m) for m in members]
        words = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
        return FieldError(loc, f"Input should be {words}", "enum", value, line)
    if "literal" in spec:
        choices = list(spec["literal"])
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return None
        if not all(type(c) is type(value) for c in choices):
            return None
        if value in choices:
            return None
        return FieldError(loc, f"Input should be {_literal_words(choices)}", "literal_error", value, line)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec.get("type") in ("int", "float"):
        if spec.get("type") == "int" and isinstance(value, float) and not value.is_integer():
            return None  # int_from_float: a type error, not read here (``2.0`` is taken as 2, its bounds apply)
        for bound in _NUMERIC:
            if bound not in spec:
                continue
            b = spec[bound]
            if bound == "multiple_of" and b and value % b != 0:
                return FieldError(loc, f"Input should be a multiple of {_num(b)}", "multiple_of", value, line)
            if bound == "le" and not value <= b:
                return FieldError(loc, f"Input should be less than or equal to {_num(b)}", "less_than_equal",
                                  value, line)
            if bound == "lt" and not value < b:
                return FieldError(loc, f"Input should be less than {_num(b)}", "less_than", value, line)
            if bound == "ge" and not value >= b:
                return FieldError(loc, f"Input should be greater than or equal to {_num(b)}",
                                  "greater_than_equal", value, line)
            if bound == "gt" and not value > b:
                return FieldError(loc, f"Input should be greater than {_num(b)}", "greater_than", value, line)
        return None
    if isinstance(value, list) and spec.get("type") in ("list", "tuple", "set"):
        n = len(value)
        if "min_length" in spec and n < spec["min_length"]:
            return FieldError(loc, f"List should have at least {_plural(spec['min_length'], 'item')} after "
                                   f"validation, not {n}", "too_short", value, line)
        if "max_length" in spec and n > spec["max_length"]:
            return FieldError(loc, f"List should have at most {_plural(spec['max_length'], 'item')} after "
                                   f"validation, not {n}", "too_long", value, line)
    return None


def _at(err: FieldError | None, info: Mapping[str, Any]) -> FieldError | None:
    """The error with the file of the class whose field it is."""
    return None if err is None else replace(err, member=str(info["at"]).rsplit(":", 1)[0])


@dataclass(frozen=True)
class _Found:
    errors: tuple[FieldError, ...] = ()
    unread: tuple[str, ...] = ()      # values that would fail a bound a before-validator may rewrite first


def keys_check(record: Mapping[str, Any], cls: str, given: Mapping[str, object], prefix: str = "") -> _Found:
    """pydantic's errors for the keys ``given`` to ``cls`` (fields in their order, then the unknown keys);
    nested config classes are checked under ``<field>.``."""
    info = record["classes"].get(cls)
    if info is None:
        return _Found()
    fields: Mapping[str, Mapping[str, Any]] = info["fields"]
    if "*" in info["before"]:
        return _Found()
    errors: list[FieldError] = []
    unread: list[str] = []
    for name in sorted(fields, key=lambda f: int(fields[f].get("line", 0))):
        if name not in given:
            continue
        spec, value = fields[name], given[name]
        nested = spec.get("class")
        if nested and isinstance(value, Mapping) and "open" not in spec and name not in info["before"]:
            inner = keys_check(record, str(nested), value, f"{prefix}{name}.")
            errors += inner.errors
            unread += inner.unread
            continue
        err = _at(field_error(f"{prefix}{name}", spec, value), info)
        if err is None:
            continue
        if name in info["before"]:
            unread.append(f"{cls}.{name}={value!r} (a field_validator rewrites it first)")
        else:
            errors.append(err)
    if info["forbid"]:
        member, line = str(info["at"]).rsplit(":", 1)
        errors += [FieldError(f"{prefix}{k}", "Unexpected keyword argument", "unexpected_keyword_argument", v,
                              int(line), member) for k, v in given.items() if k not in fields]
    return _Found(tuple(errors), tuple(unread))


def _refusal(record: Mapping[str, Any], cls: str, errors: tuple[FieldError, ...], listed_at: str,
             version: Version) -> Refusal:
    n = len(errors)
    title = f"{n} validation error{'s' if n > 1 else ''} for {cls}"
    return Refusal(RULE, EXCEPTION, "\n".join([title] + [e.text() for e in errors]),
                   f"{errors[0].member}:{errors[0].line}", listed_at, str(version) if str(version) != listed_at else "")


def _built(conditions: list[str], state: Mapping[str, object]) -> bool | None:
    """Whether ``create_engine_config`` builds the class (the ``if`` conditions it is built under, over the line's
    destinations as ``self.<dest>``: ``LoRAConfig(...) if self.enable_lora else None``); None where a condition
    reads anything else."""
    try:
        return all(bool(evaluate(c, state)) for c in conditions)
    except MissingValue:
        return None


def beside(ledger_judged: Judged, fields: Judged, functions: Mapping[str, str]) -> Judged:
    """The ledger's verdict with this rule's added (``config_check``): a refusal of the ledger raised in a method
    of a class pydantic refuses to build (``SchedulerConfig.__post_init__`` / ``_verify_args`` under
    ``--max-num-partial-prefills 0`` from 0.11.1) is not reached, so it is said as such, not given as the
    release's words. ``functions``: each ledger entry's id -> its function (``Class.method``)."""
    refused = {r.message.split("\n", 1)[0].rsplit(" for ", 1)[1] for r in fields.refusals}
    kept: list[Refusal] = []
    unreached: list[str] = []
    for r in ledger_judged.refusals:
        owner = functions.get(r.entry, "").split(".", 1)[0]
        if owner in refused and "." in functions.get(r.entry, ""):
            unreached.append(f"{RULE}: {r.rule} ({r.source}) is not reached: pydantic refuses to build {owner} "
                             f"before {functions[r.entry]} runs")
        else:
            kept.append(r)
    return Judged(tuple(kept) + fields.refusals, ledger_judged.not_judged + fields.not_judged + tuple(unreached))


def _json_given(args: ResolvedArgs, dest: str, version: Version) -> Mapping[str, object] | None:
    if dest == SPECULATIVE:
        from pytest_gpulayout.engines.vllm import rules_speculative  # the keys as the release assembles them
        spec = rules_speculative.speculative(args, version)
        return spec.given if spec.twice is None and not spec.why else None
    if not args.is_set(dest):
        return None
    raw = args.get(dest)
    return raw if isinstance(raw, Mapping) else None


def check(args: ResolvedArgs, version: Version, resolved: Mapping[str, object] | None = None) -> Judged:
    """pydantic's refusals of the values the line sets, one per config class (vLLM stops at the first class it
    builds; the others follow once it is fixed), and the values that would fail a constraint this rule cannot
    hold them to as the release does. ``resolved``: ``config_checks.namespace``'s values, for what the release
    derives from the line (``DERIVED``)."""
    at = listed(version)
    if at is None:
        return Judged()
    record = releases()[at]
    by_class: dict[str, list[FieldError]] = {}
    notes: list[str] = []
    reassigned = set(record["reassigned"])
    state = {f"self.{d}": v for d, v in args.values.items()}
    derived = {d: (resolved or {})[d] for d in DERIVED if not args.is_set(d) and d in (resolved or {})}
    for dest in sorted(args.given | set(derived)):
        value = derived[dest] if dest in derived else args.get(dest)
        for cls, name, *under in record["flags"].get(dest, ()):
            info = record["classes"].get(cls)
            if info is None or name not in info["fields"] or "*" in info["before"]:
                continue
            err = _at(field_error(name, info["fields"][name], value), info)
            if err is None:
                continue
            flag = f"--{dest.replace('_', '-')} {value!r}"
            if dest in derived:
                by_class.setdefault(cls, []).append(err)
                continue
            if dest in reassigned or name in info["before"]:
                notes.append(f"{RULE}: {flag} against {cls}.{name} (EngineArgs or a field_validator rewrites it "
                             "before pydantic checks it)")
                continue
            built = _built(under[0] if under else [], state)
            if built is None:
                notes.append(f"{RULE}: {flag} against {cls}.{name}: {cls} is built only if "
                             f"{' and '.join(under[0])}, which this rule does not know")
            elif built:
                by_class.setdefault(cls, []).append(err)
    for errs in by_class.values():   # pydantic reports the fields in their order
        errs.sort(key=lambda e: e.line)
    if any(e.loc == "max_num_seqs" for e in by_class.get("SchedulerConfig", ())) and not args.is_set(
            "max_num_batched_tokens") and "max_num_batched_tokens" not in derived:
        notes.append(f"{RULE}: the default max_num_batched_tokens is not resolved, so whether SchedulerConfig "
                     "refuses it too (it is derived from max_num_seqs from 0.11.1) is not said")
    for dest, how in sorted(record["json"].items()):
        given = _json_given(args, dest, version)
        if not given:
            continue
        found = keys_check(record, str(how["class"]), given)
        by_class.setdefault(str(how["class"]), []).extend(found.errors)
        notes += [f"{RULE}: {u}" for u in found.unread]
    refusals = tuple(_refusal(record, cls, tuple(errs), at, version) for cls, errs in by_class.items() if errs)
    return Judged(refusals, tuple(notes))
