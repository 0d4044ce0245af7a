"""The type functions an engine release hands argparse (``type=``), rebuilt from what its table records, so a
value converts, or is refused, as that release does it, in argparse's words: argparse names the function in
``invalid <name> value: 'x'``, so each one here carries the release's own ``__name__``.

- ``human_readable_int`` / ``human_readable_int_or_auto``: vLLM ``utils/argparse_utils.py`` (``engine/arg_utils.py``
  before 0.20) with the release's own suffix tables (``k`` 10**3 ... ``T`` 2**40: 0.8.4 - 0.12 had no ``t``/``T``
  in them, so ``1t`` was refused); ``auto`` / ``-1`` from 0.14. SGLang's (``srt/utils``) is the same shape.
- ``optional(X)`` (vLLM ``optional_type``: ``""`` and ``"None"`` are None), ``parse_type(X)`` (a ValueError
  becomes "Value v cannot be converted to ..."), ``json.loads``, ``union_dict_and_str`` (a JSON object or a
  string), ``nullable_str``, ``nullable_kvs`` (``a=1,b=2``).
- ``dataclass:<Config>``: a JSON object for a config class (vLLM ``parse_dataclass``): parsed as JSON (human
  readable numbers expanded from 0.20), its keys checked against the class's fields where the release's
  ``@config`` forbids others; pydantic's own wording of a failure is not reproduced, only the verdict.

A function the table does not know converts nothing (the value stays the string): never a refusal the release
would not make.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_gpulayout.inputs.flag_tables import ReleaseTable

TypeFunc = Callable[[str], Any]

_HRI = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DEFAULT_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_DEFAULT_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _named(name: str, fn: TypeFunc) -> TypeFunc:
    fn.__name__ = name
    fn.__qualname__ = name
    return fn


#: the mark of a function made for a type the release defines and this module does not rebuild: it keeps the word
#: as it is, so a value the release's own function refuses is not refused here (``passes_through``)
_PASSTHROUGH = "_gpulayout_passthrough"


def _passthrough(name: str) -> TypeFunc:
    fn = _named(name, lambda v: v)
    setattr(fn, _PASSTHROUGH, True)
    return fn


def passes_through(fn: TypeFunc | None) -> bool:
    """Whether ``fn`` is a release's own type function that is not rebuilt here (the word is kept unchecked)."""
    return bool(getattr(fn, _PASSTHROUGH, False))


def human_readable_int_of(tables: Mapping[str, Any]) -> TypeFunc:
    """The release's ``human_readable_int`` (its suffix tables as extracted)."""
    decimal: dict[str, int] = {str(k): int(v) for k, v in dict(tables.get("decimal") or _DEFAULT_DECIMAL).items()}
    binary: dict[str, int] = {str(k): int(v) for k, v in dict(tables.get("binary") or _DEFAULT_BINARY).items()}

    def human_readable_int(value: str) -> int:
        value = value.strip()
        match = _HRI.fullmatch(value)
        if match:
            number, suffix = match.groups()
            if suffix in decimal:
                return int(float(number) * decimal[suffix])
            if suffix in binary:
                try:
                    return int(number) * binary[suffix]
                except ValueError as e:
                    raise argparse.ArgumentTypeError(
                        f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                        f"{number}{suffix.lower()} instead?") from e
        return int(value)

    return human_readable_int


def _or_auto(hri: TypeFunc) -> TypeFunc:
    def human_readable_int_or_auto(value: str) -> int:
        value = value.strip()
        if value == "-1" or value.lower() == "auto":
            return -1
        return int(hri(value))

    return human_readable_int_or_auto


def nullable_kvs(val: str) -> dict[str, int] | None:
    """vLLM's ``a=1,b=2`` form of a dict of ints (``engine/arg_utils.py``, to 0.9.2)."""
    if len(val) == 0:
        return None
    out: dict[str, int] = {}
    for item in val.split(","):
        kv = [part.lower().strip() for part in item.split("=")]
        if len(kv) != 2:
            raise argparse.ArgumentTypeError("Each item should be in the form KEY=VALUE")
        key, value = kv
        try:
            parsed = int(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"Failed to parse value of item {key}={value}") from exc
        if key in out and out[key] != parsed:
            raise argparse.ArgumentTypeError(f"Conflicting values specified for key: {key}")
        out[key] = parsed
    return out


def nullable_str(val: str) -> str | None:
    if not val or val == "None":
        return None
    return val


def _json_loads(val: str) -> Any:
    return json.loads(val)


def _expand_hri(val: str, hri: TypeFunc) -> str:
    """vLLM 0.20's ``_expand_json_human_readable_numbers``: ``80g`` outside JSON strings becomes a number."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(hri(m.group())), parts[i])
    return "".join(parts)


class Types:
    """The type functions of one release (``table``), made on demand by their table spelling."""

    def __init__(self, table: ReleaseTable) -> None:
        self.table = table
        self.variants = table.type_variants
        self.hri = human_readable_int_of(table.human_readable_int)
        self._cache: dict[str, TypeFunc | None] = {}

    def get(self, spec: str | None) -> TypeFunc | None:
        if spec is None:
            return None
        if spec not in self._cache:
            self._cache[spec] = self._make(spec)
        return self._cache[spec]

    def _make(self, spec: str) -> TypeFunc | None:  # noqa: C901 - one dispatch over the table's spellings
        if spec in ("int", "float", "str"):
            return {"int": int, "float": float, "str": str}[spec]
        if spec == "bool":
            return bool
        if spec == "human_readable_int":
            return self.hri
        if spec == "human_readable_int_or_auto":
            return _or_auto(self.hri)
        if spec == "json.loads":
            return _named("loads", _json_loads)
        if spec == "nullable_str":
            return nullable_str
        if spec in _REBUILT:
            return _named(spec, _REBUILT[spec])
        if spec == "nullable_kvs":
            return nullable_kvs
        if spec.startswith("optional(") and spec.endswith(")"):
            return self._optional(self.get(spec[len("optional("):-1]) or str, spec[len("optional("):-1])
        if spec.startswith("parse_type(") and spec.endswith(")"):
            inner_spec = spec[len("parse_type("):-1]
            return self._parse_type(self.get(inner_spec) or str, inner_spec)
        if spec == "union_dict_and_str":
            return self._dict_or_str()
        if spec.startswith(("dataclass:", "dataclass_lambda:")):
            kind, _, name = spec.partition(":")
            return self._dataclass(name, lambda_rule=kind == "dataclass_lambda")
        if spec.startswith("lambda:"):
            return self._lambda(spec[len("lambda:"):])
        return _passthrough(spec.split(":", 1)[-1])

    def _parse_type(self, inner: TypeFunc, inner_spec: str) -> TypeFunc:
        kvs = bool(self.variants.get("json_kvs")) and inner_spec == "json.loads"
        # vLLM formats the function itself: "<function loads at 0x...>" (the address is this process's)
        shown = repr(json.loads) if inner_spec == "json.loads" else repr(inner)

        def _parse_type(val: str) -> Any:
            try:
                if kvs and not re.match(r"^{.*}$", val):
                    return nullable_kvs(val)
                return inner(val)
            except ValueError as e:
                raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {shown}.") from e

        return _parse_type

    def _optional(self, inner: TypeFunc, inner_spec: str) -> TypeFunc:
        parse = self._parse_type(inner, inner_spec)

        def _optional_type(val: str) -> Any:
            if val == "" or val == "None":
                return None
            return parse(val)

        return _optional_type

    def _dict_or_str(self) -> TypeFunc:
        pattern = str(self.variants.get("dict_or_str_re", r"(?s)^\s*{.*}\s*$"))
        optional_json = self._optional(_named("loads", _json_loads), "json.loads")

        def union_dict_and_str(val: str) -> Any:
            if not re.match(pattern, val):
                return str(val)
            return optional_json(val)

        return union_dict_and_str

    def _dataclass(self, name: str, *, lambda_rule: bool) -> TypeFunc:
        info = self.table.json_types.get(name, {})
        keys = tuple(info.get("keys", ()))
        forbid = bool(info.get("forbid"))
        from_cli = bool(info.get("from_cli"))
        expand = bool(self.variants.get("json_hri"))
        hri = self.hri

        def parse_dataclass(val: str) -> Any:
            if from_cli and val in ("0", "1", "2", "3"):
                return {"level": int(val)}
            text = _expand_hri(val, hri) if expand else val
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                if lambda_rule:
                    raise
                raise argparse.ArgumentTypeError(
                    f"1 validation error for {name}\n  Invalid JSON: {_jiter_words(e)} at line {e.lineno} column "
                    f"{e.colno} [type=json_invalid, input_value={_pydantic_repr(val)}, input_type=str]") from e
            if not isinstance(data, dict):
                if lambda_rule:
                    raise TypeError(f"{name}() argument after ** must be a mapping")
                raise argparse.ArgumentTypeError(
                    f"1 validation error for {name}: input should be an object (got {type(data).__name__})")
            extra = [k for k in data if keys and k not in keys]
            if extra and (forbid or lambda_rule):
                if lambda_rule:
                    raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{extra[0]}'")
                # pydantic 2's words for a dataclass given a key it does not declare (``TypeAdapter(cls).
                # validate_json`` in engine/arg_utils.py ``parse_dataclass``: ``repr(ValidationError)``)
                raise argparse.ArgumentTypeError(
                    f"{len(extra)} validation error{'s' if len(extra) > 1 else ''} for {name}\n"
                    + "\n".join(f"{k}\n  Unexpected keyword argument [type=unexpected_keyword_argument, "
                                f"input_value={_pydantic_repr(data[k])}, input_type={type(data[k]).__name__}]"
                                for k in extra))
            return data

        return _named("<lambda>", parse_dataclass) if lambda_rule else parse_dataclass

    @staticmethod
    def _lambda(src: str) -> TypeFunc:
        """The lambdas releases pass as types: the ones known are rebuilt, any other keeps the string."""
        body = src.split(":", 1)[-1].strip().replace('"', "'")
        if body == "s.lower().replace('-', '_')":
            return _named("<lambda>", lambda s: s.lower().replace("-", "_"))
        if "isdigit()" in body and "split(',')" in body:
            return _named("<lambda>", lambda s: [int(p) if p.isdigit() else p
                                                 for p in (x.strip() for x in s.split(","))])
        return _passthrough("<lambda>")


def _json_list(value: str) -> Any:
    """SGLang's ``json_list_type`` (``utils/common.py``, 0.5.10 l.3493-3499, 0.5.23 l.4818-4824): ``orjson.loads``,
    its JSON error refused in its words (orjson's ``JSONDecodeError`` is a ``json.JSONDecodeError``)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from e


def _cuda_graph_backend(raw: str) -> str:
    """SGLang 0.5.22+ ``parse_cuda_graph_backend_arg`` (``model_executor/cuda_graph_config.py`` l.237-243 in
    0.5.23): the retired backend refused before argparse checks the choices."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _reasoning_parser(val: str) -> str:
    """vLLM 0.33 ``parse_reasoning_parser`` (``engine/arg_utils.py`` l.188-190): ``none`` (any case) is unset."""
    return "" if val.lower() == "none" else val


#: the type functions of the releases rebuilt here by the name their tables give (the releases' own code)
_REBUILT: Mapping[str, TypeFunc] = {"json_list_type": _json_list, "parse_cuda_graph_backend_arg": _cuda_graph_backend,
                                    "parse_reasoning_parser": _reasoning_parser}


def _pydantic_repr(value: object) -> str:
    """An input value as pydantic 2 shows it in an error (Python's repr, cut to 50 characters with ``...``)."""
    text = repr(value)
    return text if len(text) <= 50 else f"{text[:24]}...{text[-23:]}"


#: Python's JSON errors in the words of pydantic's own JSON reader (jiter), which ``TypeAdapter.validate_json``
#: uses: ``{'a': 1}`` is "key must be a string" there, "Expecting property name enclosed in double quotes" here
_JITER = {
    "Expecting property name enclosed in double quotes": "key must be a string",
    "Expecting value": "expected value",
    "Expecting ':' delimiter": "expected `:`",
    "Extra data": "trailing characters",
    "Unterminated string starting at": "EOF while parsing a string",
}


def _jiter_words(e: json.JSONDecodeError) -> str:
    """``e`` as jiter words it where the two readers fail alike; else Python's own words (said as such)."""
    return _JITER.get(e.msg, f"{e.msg} (Python's words; vLLM's JSON reader words it otherwise)")
