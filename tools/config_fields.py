#!/usr/bin/env python3
"""Extract, per vLLM release from 0.11, the constraints pydantic holds the config classes' fields to
(``vllm/config/*.py``), and which ``EngineArgs`` destination and JSON flag feeds which class, into
``pytest_gpulayout/engines/vllm/fields/config_fields.json`` (read by ``engines/vllm/rules_fields.py``).

From 0.11 the config classes are pydantic dataclasses (``from pydantic.dataclasses import dataclass``; from 0.16
``vllm/config/utils.py``'s ``config`` decorator makes one itself, with ``ConfigDict(extra="forbid")`` merged in).
pydantic refuses a value when the object is built: a field's ``Field(ge=, gt=, le=, lt=, multiple_of=,
min_length=, max_length=)``, a ``Literal[...]`` type, a constrained alias (``PositiveInt``, ``Annotated[int,
Field(gt=0)]``), and an unknown keyword where the class forbids extra keys.

    python tools/config_fields.py --src /work/wheels/src        # every DIR/vllm-<version>/ from 0.11.0
    python tools/config_fields.py --wheel vllm-0.32.0-...whl [--wheel ...]

Parsed with ``ast``; nothing is imported. Per release:

- ``classes``: ``{Class: {"at": file:line, "forbid": bool, "before": [...], "fields": {name: constraint}}}``; a
  constraint holds ``line``, the bounds given, ``literal`` (the choices), ``none`` (None is taken), ``class`` (a
  nested config class), and ``open`` where pydantic's verdict is not read here (a union of other types, a
  ``SkipValidation``, a bound that is not a literal, ``init=False``); ``before`` lists the fields a
  ``field_validator(mode="before"/"wrap"/"plain")`` rewrites first (``*``: a ``model_validator(mode="before"/
  "wrap")`` rewrites the input)
  (a field held to none of these is ``{}``: its name is what the extra-keys check reads); a class seen in the
  release before is written as what changed of it (``"diff": true``, its changed fields, ``fields_drop``)
- ``flags``: ``{destination: [[Class, field(, [conditions])], ...]}``: ``EngineArgs`` passes ``self.<destination>``
  by keyword to the class (``create_engine_config`` and the ``create_*_config`` it calls), under the ``if``
  conditions written (``self.enable_lora`` for ``LoRAConfig``; an early ``return`` counts, a ``raise`` does not)
- ``reassigned``: the destinations ``EngineArgs`` assigns again before it builds the configs (other than the
  ``if self.x is None`` default), whose value at the constructor is not the line's
- ``json``: ``{destination: {"class": Class, "at": "parse" | "create"}}``: a JSON flag parsed into the class by
  ``parse_dataclass`` (``TypeAdapter(cls).validate_json``, the field annotated with the class) or built later by
  ``Class(**self.<destination>)``

The file keeps the first release in full and every later one as what changed (``classes`` / ``flags`` /
``json`` entries replaced whole, ``*_drop`` the names gone, ``reassigned`` whole when it changed).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

TOOLS = Path(__file__).resolve().parent
REPO_ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(REPO_ROOT))

from flags_source import Sources  # noqa: E402

from pytest_gpulayout.engines.vllm.rules_fields import unpack  # noqa: E402

OUT = REPO_ROOT / "pytest_gpulayout" / "engines" / "vllm" / "fields" / "config_fields.json"
FIRST = Version("0.11.0")
ARG_UTILS = "vllm/engine/arg_utils.py"
BOUNDS = ("ge", "gt", "le", "lt", "multiple_of", "min_length", "max_length")
#: pydantic's constrained types (``pydantic/types.py``)
PYDANTIC_ALIASES: dict[str, dict[str, Any]] = {
    "PositiveInt": {"type": "int", "gt": 0}, "NegativeInt": {"type": "int", "lt": 0},
    "NonNegativeInt": {"type": "int", "ge": 0}, "NonPositiveInt": {"type": "int", "le": 0},
    "PositiveFloat": {"type": "float", "gt": 0}, "NegativeFloat": {"type": "float", "lt": 0},
    "NonNegativeFloat": {"type": "float", "ge": 0}, "NonPositiveFloat": {"type": "float", "le": 0},
}
#: ``annotated_types`` markers inside ``Annotated[...]``
MARKERS = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le", "MultipleOf": "multiple_of", "MinLen": "min_length",
           "MaxLen": "max_length"}
SIMPLE = {"int", "float", "str", "bool"}


class Module:
    """One module's top-level names: its aliases and constants, and where its imports come from."""

    def __init__(self, src: Sources, member: str) -> None:
        self.src, self.member = src, member
        self.tree = src.tree(member)
        self.assigns: dict[str, ast.expr] = {}
        self.imports: dict[str, tuple[str, str]] = {}
        #: the module's ``IntEnum`` classes and their members' values (pydantic takes a member's value, or its
        #: digits as a string in lax mode, and refuses anything else with ``enum``)
        self.int_enums: dict[str, list[int]] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigns[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.ClassDef) and any(_name(b) == "IntEnum" for b in node.bases):
                values = [stmt.value.value for stmt in node.body if isinstance(stmt, ast.Assign)
                          and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, int)]
                if values:
                    self.int_enums[node.name] = values


class Reader:
    """A release's sources, its modules read on demand."""

    def __init__(self, src: Sources) -> None:
        self.src = src
        self._mods: dict[str, Module] = {}

    def module(self, member: str) -> Module:
        if member not in self._mods:
            self._mods[member] = Module(self.src, member)
        return self._mods[member]

    def int_enum(self, mod: Module, name: str, depth: int = 0) -> list[int] | None:
        """The member values of the ``IntEnum`` ``name`` names in ``mod`` (or the vLLM module it imports it from)."""
        if name in mod.int_enums:
            return mod.int_enums[name]
        if name in mod.imports and depth < 4:
            module, orig = mod.imports[name]
            member = self.src.module_file(module) if module.startswith("vllm") else None
            if member:
                return self.int_enum(self.module(member), orig, depth + 1)
        return None

    def lookup(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, ast.expr] | None:
        """The expression ``name`` is bound to at the top of ``mod`` or of the vLLM module it imports it from."""
        if name in mod.assigns:
            return mod, mod.assigns[name]
        if name in mod.imports and depth < 4:
            module, orig = mod.imports[name]
            member = self.src.module_file(module) if module.startswith("vllm") else None
            if member:
                return self.lookup(self.module(member), orig, depth + 1)
        return None


def _const(r: Reader, mod: Module, node: ast.expr) -> Any:
    """A literal bound (``1``, ``-1``, ``0.5``, a module constant bound to one); raises ValueError otherwise."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name) and (hit := r.lookup(mod, node.id)) is not None:
            return _const(r, hit[0], hit[1])
        raise


def _field_bounds(r: Reader, mod: Module, call: ast.Call, out: dict[str, Any]) -> None:
    for kw in call.keywords:
        if kw.arg in BOUNDS:
            try:
                out[kw.arg] = _const(r, mod, kw.value)
            except ValueError:
                out["open"] = f"{kw.arg}={ast.unparse(kw.value)}"
        elif kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
            out["open"] = "init=False"


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def annotation(r: Reader, mod: Module, node: ast.expr, classes: set[str], depth: int = 0) -> dict[str, Any]:
    """The constraint part of an annotation: bounds, Literal choices, None taken, a nested config class."""
    out: dict[str, Any] = {}
    if depth > 8:
        return {"open": "alias too deep"}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return {"open": "annotation text"}
    if isinstance(node, ast.Constant) and node.value is None:
        return {"none": True}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(r, mod, [node.left, node.right], classes, depth)
    if isinstance(node, ast.Subscript):
        head = _name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _union(r, mod, [args[0], ast.Constant(None)], classes, depth)
        if head == "Union":
            return _union(r, mod, args, classes, depth)
        if head in ("InitVar", "Required", "NotRequired"):
            return annotation(r, mod, args[0], classes, depth + 1)
        if head == "Literal":  # a name inside is a Literal alias pydantic flattens in place
            values: list[Any] = []
            for a in args:
                try:
                    values.append(ast.literal_eval(a))
                    continue
                except ValueError:
                    pass
                inner = annotation(r, mod, a, classes, depth + 1) if isinstance(a, ast.Name) else {}
                if "literal" not in inner or "open" in inner or inner.get("none"):
                    return {"open": "Literal of names"}
                values += inner["literal"]
            return {"literal": values, "type": "Literal"}
        if head == "Annotated":
            out = annotation(r, mod, args[0], classes, depth + 1)
            for meta in args[1:]:
                if isinstance(meta, ast.Call) and _name(meta.func) == "Field":
                    _field_bounds(r, mod, meta, out)
                elif isinstance(meta, ast.Call) and _name(meta.func) in MARKERS and meta.args:
                    try:
                        out[MARKERS[_name(meta.func)]] = _const(r, mod, meta.args[0])
                    except ValueError:
                        out["open"] = ast.unparse(meta)
                elif _name(meta) == "SkipValidation" or (isinstance(meta, ast.Call)
                                                          and "Validator" in _name(meta.func)):
                    out["open"] = ast.unparse(meta)
            return out
        if head == "SkipValidation":
            return {"open": "SkipValidation"}
        return {"type": head}
    name = _name(node)
    if name == "SkipValidation":
        return {"open": "SkipValidation"}
    if name in PYDANTIC_ALIASES and not (isinstance(node, ast.Name) and name in mod.assigns):
        return dict(PYDANTIC_ALIASES[name])
    if name in SIMPLE:
        return {"type": name}
    if name in classes:
        return {"type": name, "class": name}
    if isinstance(node, ast.Name) and (members := r.int_enum(mod, node.id)) is not None:
        return {"type": "IntEnum", "enum": members}
    if isinstance(node, ast.Name) and (hit := r.lookup(mod, node.id)) is not None:
        value = hit[1]
        if isinstance(value, ast.Call) and _name(value.func) in ("TypeAliasType", "NewType") and len(value.args) > 1:
            value = value.args[1]
        if isinstance(value, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)):
            return annotation(r, hit[0], value, classes, depth + 1)
    return {"type": name or ast.unparse(node)}


def _union(r: Reader, mod: Module, members: list[ast.expr], classes: set[str], depth: int) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    none = False
    for m in members:
        got = annotation(r, mod, m, classes, depth + 1)
        if got.get("none") and len(got) == 1:
            none = True
            continue
        none = none or bool(got.pop("none", False))
        parts.append(got)
    if len(parts) == 1:
        out = parts[0]
    elif parts and all("literal" in p and "open" not in p for p in parts):
        out = {"type": "Literal", "literal": [v for p in parts for v in p["literal"]]}
    else:
        out = {"open": "union of " + ", ".join(str(p.get("type", "?")) for p in parts)}
    if none:
        out["none"] = True
    return out


def _decorator_names(cls: ast.ClassDef) -> list[tuple[str, ast.expr]]:
    out = []
    for d in cls.decorator_list:
        func = d.func if isinstance(d, ast.Call) else d
        out.append((_name(func), d))
    return out


def _config_decorator(r: Reader) -> tuple[bool, bool]:
    """``vllm/config/utils.py``'s ``config``: (it makes a pydantic dataclass itself, it forbids extra keys)."""
    member = "vllm/config/utils.py"
    if not r.src.has(member):
        return False, False
    # the last ``def config``: the ones before it are ``@overload`` stubs (0.19+)
    defs = [n for n in r.module(member).tree.body if isinstance(n, ast.FunctionDef) and n.name == "config"]
    text = ast.unparse(defs[-1]) if defs else ""
    return "dataclass(cls" in text, "extra='forbid'" in text


def _pydantic_dataclass_names(mod: Module) -> set[str]:
    return {local for local, (module, orig) in mod.imports.items()
            if module == "pydantic.dataclasses" and orig == "dataclass"}


def _validators(cls: ast.ClassDef) -> list[str]:
    out: list[str] = []
    for stmt in cls.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in stmt.decorator_list:
            if not isinstance(d, ast.Call):
                continue
            mode = next((kw.value.value for kw in d.keywords if kw.arg == "mode"
                         and isinstance(kw.value, ast.Constant)), "after")
            if _name(d.func) == "field_validator" and mode in ("before", "wrap", "plain"):
                out += [a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            elif _name(d.func) == "model_validator" and mode in ("before", "wrap"):
                out.append("*")
    return sorted(set(out))


def classes_of(r: Reader) -> dict[str, dict[str, Any]]:
    makes, forbids = _config_decorator(r)
    found: dict[str, tuple[Module, ast.ClassDef, bool]] = {}
    members = sorted(m for m in r.src.names if m.startswith("vllm/config/") and m.count("/") == 2)
    for member in members:
        mod = r.module(member)
        pyd = _pydantic_dataclass_names(mod)
        for node in mod.tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            decos = _decorator_names(node)
            is_pyd = any(n in pyd for n, _ in decos) or (makes and any(n == "config" for n, _ in decos))
            if not is_pyd:
                continue
            said = " ".join(ast.unparse(d) for _, d in decos)
            forbid = "extra='forbid'" in said or (forbids and any(n == "config" for n, _ in decos)
                                                   and "extra='allow'" not in said and "extra='ignore'" not in said)
            found.setdefault(node.name, (mod, node, forbid))
    names = set(found)
    out: dict[str, dict[str, Any]] = {}

    def fields_of(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        mod, node, _ = found[name]
        fields: dict[str, Any] = {}
        for base in node.bases:
            b = _name(base)
            if b in found and b not in seen:
                fields.update(fields_of(b, seen + (name,)))
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            c = annotation(r, mod, stmt.annotation, names)
            if isinstance(stmt.value, ast.Call) and _name(stmt.value.func) == "Field":
                _field_bounds(r, mod, stmt.value, c)
            c["line"] = stmt.lineno
            # a field pydantic holds to nothing this table reads: its name only (the extra-keys check needs it)
            fields[stmt.target.id] = c if any(k in c for k in (*BOUNDS, "literal", "enum", "class", "open")) else {}
        return fields

    for name, (mod, node, forbid) in sorted(found.items()):
        before = _validators(node)
        for base in node.bases:
            if _name(base) in found:
                before = sorted(set(before) | set(_validators(found[_name(base)][1])))
        out[name] = {"at": f"{mod.member}:{node.lineno}", "forbid": forbid, "before": before,
                     "fields": fields_of(name)}
    return out


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _guarded_default(guards: tuple[ast.expr, ...], attr: str) -> bool:
    """Under ``if self.<attr> is None`` (or ``orig_<attr> is None``, ``not self.<attr>``): the release filling in
    what the line left out (``_set_default_max_num_seqs_and_batched_tokens_args``)."""
    return any(f"{attr} is None" in (t := ast.unparse(g)) or t == f"not self.{attr}" for g in guards)


def _not(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.Not(), operand=test)


def _exits(body: list[ast.stmt]) -> bool:
    """A block that leaves early without building (a ``raise`` is a refusal of its own: what follows it is
    reached once that is fixed, so it is no condition of the construction)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def engine_args(r: Reader, classes: set[str]) -> tuple[dict[str, list[list[Any]]], list[str], dict[str, Any]]:
    """``EngineArgs``' keyword mappings (each ``[Class, field]``, with the ``if`` conditions it is built under
    as a third item where there are any: ``LoRAConfig(...) if self.enable_lora else None``), the destinations it
    assigns again, and its JSON flags."""
    mod = r.module(ARG_UTILS)
    cls = next(n for n in mod.tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs")
    flags: dict[str, list[list[Any]]] = {}
    reassigned: set[str] = set()
    json_flags: dict[str, Any] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            hint = annotation(r, mod, stmt.annotation, classes)
            if hint.get("class") and "open" not in hint:
                json_flags[stmt.target.id] = {"class": hint["class"], "at": "parse"}

    def body(stmts: list[ast.stmt], guards: tuple[ast.expr, ...], fn_name: str) -> None:
        for stmt in stmts:
            walk(stmt, guards, fn_name)
            if isinstance(stmt, ast.If) and _exits(stmt.body) and not stmt.orelse:
                guards = guards + (_not(stmt.test),)   # what follows an early ``return`` runs only without it

    def walk(node: ast.AST, guards: tuple[ast.expr, ...], fn_name: str) -> None:
        if isinstance(node, ast.If):
            walk(node.test, guards, fn_name)
            body(node.body, guards + (node.test,), fn_name)
            body(node.orelse, guards + (_not(node.test),), fn_name)
            return
        if isinstance(node, ast.IfExp):
            walk(node.test, guards, fn_name)
            walk(node.body, guards + (node.test,), fn_name)
            walk(node.orelse, guards + (_not(node.test),), fn_name)
            return
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and fn_name != "__init__":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                attr = _self_attr(t)
                if attr and not _guarded_default(guards, attr):
                    reassigned.add(attr)
        if isinstance(node, ast.Call) and _name(node.func) in classes:
            c = _name(node.func)
            for kw in node.keywords:
                attr = _self_attr(kw.value)
                if kw.arg is None and attr and attr not in json_flags:
                    json_flags[attr] = {"class": c, "at": "create"}
                elif kw.arg and attr:
                    item: list[Any] = [c, kw.arg]
                    if guards:
                        item.append([ast.unparse(g) for g in guards])
                    if item not in flags.setdefault(attr, []):
                        flags[attr].append(item)
        blocks = [b for name in ("body", "orelse", "finalbody")
                  if isinstance(b := getattr(node, name, None), list) and b and isinstance(b[0], ast.stmt)]
        in_blocks = {id(s) for b in blocks for s in b}
        for child in ast.iter_child_nodes(node):
            if id(child) not in in_blocks:
                walk(child, guards, fn_name)
        for block in blocks:
            body(block, guards, fn_name)

    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef):
            body(fn.body, (), fn.name)
    # a dict-typed JSON flag rewritten before ``Class(**self.x)`` (``self.speculative_config = {...}``) is
    # still that flag's keys: its assignments are the release's own assembling of them
    return flags, sorted(reassigned - set(json_flags)), json_flags


def extract(src: Sources) -> dict[str, Any]:
    r = Reader(src)
    classes = classes_of(r)
    flags, reassigned, json_flags = engine_args(r, set(classes))
    return {"classes": classes, "flags": flags, "reassigned": reassigned, "json": json_flags}


def _version_of(name: str) -> str:
    m = re.search(r"vllm-(\d[^-/]*?)(?:-cp|-py|$)", name)
    if not m:
        raise SystemExit(f"{name}: not a vllm wheel or unpacked vllm-<version> folder")
    return m.group(1)


def pack(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    prev: dict[str, Any] = {}
    for version in sorted(records, key=Version):
        rec = records[version]
        entry: dict[str, Any] = {"version": version}
        if not out:
            entry.update(rec)
        else:
            for key in ("classes", "flags", "json"):
                changed = {k: v for k, v in rec[key].items() if prev[key].get(k) != v}
                if key == "classes":  # a class seen before: what of it changed, its fields one by one
                    changed = {k: _class_diff(prev[key][k], v) if k in prev[key] else v for k, v in changed.items()}
                dropped = sorted(k for k in prev[key] if k not in rec[key])
                if changed:
                    entry[key] = changed
                if dropped:
                    entry[f"{key}_drop"] = dropped
            if rec["reassigned"] != prev["reassigned"]:
                entry["reassigned"] = rec["reassigned"]
        out.append(entry)
        prev = rec
    return {"engine": "vllm", "extracted_by": "tools/config_fields.py", "releases": out}


def _class_diff(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"diff": True, **{k: now[k] for k in ("at", "forbid", "before") if before[k] != now[k]}}
    fields = {k: v for k, v in now["fields"].items() if before["fields"].get(k) != v}
    dropped = sorted(k for k in before["fields"] if k not in now["fields"])
    if fields:
        out["fields"] = fields
    if dropped:
        out["fields_drop"] = dropped
    return out


def constrained(record: dict[str, Any]) -> int:
    """How many fields of a release's classes pydantic holds to a bound or a Literal."""
    return sum(1 for c in record["classes"].values() for f in c["fields"].values()
               if "open" not in f and ("literal" in f or "enum" in f or any(b in f for b in BOUNDS)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, help="a folder of unpacked vllm-<version>/ wheels")
    ap.add_argument("--wheel", type=Path, action="append", default=[], help="a vllm wheel file (repeatable)")
    args = ap.parse_args(argv)
    paths: list[Path] = list(args.wheel)
    if args.src:
        paths += sorted(p for p in args.src.iterdir() if p.is_dir() and re.fullmatch(r"vllm-[0-9.]+(post\d+)?", p.name)
                        and (p / ARG_UTILS).is_file() and (p / "vllm" / "config" / "utils.py").is_file())
    paths = [p for p in paths if Version(_version_of(p.name)) >= FIRST]
    if not paths:
        ap.error("give --src or --wheel (vLLM 0.11.0 or later)")
    records = {_version_of(p.name): extract(Sources(p)) for p in paths}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    packed = pack(records)
    if unpack(json.loads(json.dumps(packed))) != records:  # pragma: no cover - pack and unpack disagree
        raise SystemExit("the packed table does not unpack to what was read")
    OUT.write_text(json.dumps(packed, indent=1, sort_keys=True) + "\n")
    for version in sorted(records, key=Version):
        print(f"{version}: {len(records[version]['classes'])} classes, {constrained(records[version])} constrained "
              f"fields, {len(records[version]['flags'])} flags mapped, {len(records[version]['json'])} JSON flags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
