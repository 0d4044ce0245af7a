"""Validating values users write (manifests, snapshots): one line naming the file and the key,
with the value's YAML kind and the fix, and a "did you mean" where a close choice exists.

A ``Ctx`` knows the file; each validator takes the value and its dotted key and returns the value in
its Python type or raises the ``InputError`` (``ctx.fail``).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import NoReturn

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.suggest import close_matches

INT_TEXT_RE = re.compile(r"[+-]?\d+")
FLOAT_TEXT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


class Ctx:
    def __init__(self, where: str):
        self.where = where

    def fail(self, key: str, message: str) -> NoReturn:
        raise InputError(one_line(message), where=self.where, key=key or None)


def one_line(text: str) -> str:
    return " ".join(text.split())


def show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(value: object) -> str:
    """How a wrong value is named in a message: by its YAML kind, so the fix is obvious."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {show(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def did_you_mean(word: object, choices: Sequence[str]) -> str:
    if not isinstance(word, str):
        return ""
    close = close_matches(word, choices)
    return f": did you mean {close[0]!r}?" if close else ""


def int_value(ctx: Ctx, value: object, key: str, *, minimum: int) -> int:
    want = f"an integer >= {minimum}"
    if isinstance(value, bool):
        return ctx.fail(key, f"must be {want}, not {describe(value)} "
                             "(YAML reads true/false/yes/no/on/off as booleans)")
    if isinstance(value, int):
        if value < minimum:
            return ctx.fail(key, f"must be {want}, not {value}")
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return ctx.fail(key, f"must be {want}, not the decimal number {value!r}: write {int(value)}")
        return ctx.fail(key, f"must be {want}, not {describe(value)}")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if INT_TEXT_RE.fullmatch(text):
            return ctx.fail(key, f"must be {want}, not the string {show(value)}: "
                                 f"write {int(text)} without quotes")
        if re.fullmatch(r"\d+(\.\d+)?\s*[kKmM]", text):
            return ctx.fail(key, f"must be {want}, not the string {show(value)}: write the plain number "
                                 "(e.g. 8192, not 8k)")
    return ctx.fail(key, f"must be {want}, not {describe(value)}")


def number_value(ctx: Ctx, value: object, key: str, *, what: str) -> float:
    """A finite int or float (YAML ``.inf``/``.nan`` never make sense here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str) and FLOAT_TEXT_RE.fullmatch(value.strip()):
            return ctx.fail(key, f"must be {what}, not the string {show(value)}: write {value.strip()} "
                                 "without quotes")
        return ctx.fail(key, f"must be {what}, not {describe(value)}")
    if not math.isfinite(value):
        return ctx.fail(key, f"must be {what}, not {value!r}")
    return float(value)


def bool_value(ctx: Ctx, value: object, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return ctx.fail(key, f"must be true or false, not the string {show(value)}: write it without quotes")
    if isinstance(value, int) and value in (0, 1):
        word = "true" if value else "false"
        return ctx.fail(key, f"must be true or false, not the number {value}: write {word}")
    return ctx.fail(key, f"must be true or false, not {describe(value)}")


def string_value(ctx: Ctx, value: object, key: str, *, what: str = "a string") -> str:
    if not isinstance(value, str):
        return ctx.fail(key, f"must be {what}, not {describe(value)}")
    if not value.strip():
        return ctx.fail(key, f"must be {what}, not an empty string")
    return value


def choice_value(ctx: Ctx, value: object, key: str, choices: Sequence[str], what: str) -> str:
    if not isinstance(value, str):
        return ctx.fail(key, f"must be one of {', '.join(choices)}, not {describe(value)}")
    if value in choices:
        return value
    return ctx.fail(key, f"unknown {what} {show(value)}{did_you_mean(value, choices)} "
                         f"(expected one of: {', '.join(choices)})")


def string_list_value(ctx: Ctx, value: object, key: str, *, example: str, allow_empty: bool) -> tuple[str, ...]:
    """A YAML list of strings, never a string split by us: splitting would need shell rules, and
    manifest values never pass through a shell."""
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        shown = ", ".join(words) if words else example
        return ctx.fail(key, f"must be a list of strings, not the string {show(value)}: write it as a list: "
                             f"[{shown}] (it is never run through a shell)")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of strings such as [{example}], not {describe(value)}")
    if not value and not allow_empty:
        return ctx.fail(key, f"must not be empty: write e.g. [{example}], or leave it out for the default")
    out = []
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if isinstance(item, str):
            if not item:
                ctx.fail(item_key, "is an empty string")
            out.append(item)
        elif isinstance(item, (bool, int, float)):
            text = str(item).lower() if isinstance(item, bool) else str(item)
            ctx.fail(item_key, f"must be a string, not {describe(item)}: quote it: \"{text}\"")
        else:
            ctx.fail(item_key, f"must be a string, not {describe(item)}")
    return tuple(out)


