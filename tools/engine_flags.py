#!/usr/bin/env python3
"""Extract the command-line flags of a released vLLM or SGLang server from its wheel, as
``pytest_gpulayout/engines/<engine>/flags/<version>.json``.

    python tools/engine_flags.py vllm 0.33.0 --wheel /tmp/whl/vllm-0.33.0-...whl
    python tools/engine_flags.py sglang 0.5.23 --wheel /tmp/whl/sglang-0.5.23-...whl

The wheel is never installed nor imported: its members are read with ``zipfile`` and parsed with ``ast``
(the same rule as ``tools/engine_facts.py``). What is read:

- vLLM: every ``add_argument`` call of ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``) and
  ``vllm/entrypoints/common/cli_args.py`` (``make_arg_parser``, the ``FrontendArgs`` fields registered as
  ``--<field>``); a call spread from ``get_kwargs(SomeConfig)["field"]`` takes its arity from the field's
  annotation the way ``_compute_kwargs`` does (``bool`` -> ``BooleanOptionalAction``, so ``--no-<name>`` too;
  ``bool | str | None`` -> an optional value; a list, tuple or set -> ``nargs="+"``; else one value).
- SGLang: every ``A[T, Arg(...)]`` / ``A[T, "help"]`` field of ``sglang/srt/arg_groups/fields/*.py`` as
  ``add_cli_args_from_dataclass`` registers it (``--<field>``, ``cli_name``, ``aliases``, ``no_cli``; ``bool``
  -> ``store_true``; ``list[X]`` -> ``nargs="+"``), and the ``add_argument`` calls of ``ServerArgs.add_cli_args``.

Each option records its spellings (``names``; the first long one is the canonical name) and ``nargs``:
``"0"`` a switch, ``"1"`` one value, ``"?"`` an optional value, ``"+"`` / ``"*"`` a list.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
EXTRACTED_BY = "tools/engine_flags.py"

VLLM_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/common/cli_args.py")
SWITCH_ACTIONS = ("store_true", "store_false", "count", "help", "version", "StoreTrue", "StoreFalse")


class Sources:
    def __init__(self, wheel: Path) -> None:
        self.zip = zipfile.ZipFile(wheel)
        self.names = set(self.zip.namelist())

    def tree(self, member: str) -> ast.Module:
        return ast.parse(self.zip.read(member).decode("utf-8"), filename=member)


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _arity_of_call(call: ast.Call) -> str | None:
    """``nargs`` from an explicit ``action=`` / ``nargs=`` (None: not decided by the call)."""
    action = _kw(call, "action")
    if action is not None:
        text = ast.unparse(action)
        if "BooleanOptional" in text:
            return "bool-optional"
        if any(a in text for a in SWITCH_ACTIONS):
            return "0"
        if isinstance(action, ast.Constant) and action.value in ("append", "store", "extend"):
            pass
        else:
            return "1"
    nargs = _kw(call, "nargs")
    if nargs is not None:
        value = nargs.value if isinstance(nargs, ast.Constant) else None
        return str(value) if value is not None else "+"
    return None


def _arity_of_annotation(text: str) -> str:
    """How vLLM's ``_compute_kwargs`` turns a config field's annotation into argparse kwargs."""
    compact = text.replace(" ", "")
    parts = set(compact.replace("Optional[", "").replace("]", "").split("|"))
    if "bool" in parts and "str" in parts:
        return "?"
    if "bool" in compact.split("[")[0].split("|") or compact in ("bool", "bool|None", "Optional[bool]"):
        return "bool-optional"
    head = compact.split("|")[0]
    if head.startswith(("list[", "tuple[", "set[", "List[", "Tuple[", "Set[")):
        return "+"
    return "1"


def _record(options: dict[str, dict[str, Any]], names: list[str], nargs: str, file: str) -> None:
    dashed = [n for n in names if n.startswith("-")]
    if not dashed:
        return
    if nargs == "bool-optional":  # argparse.BooleanOptionalAction: --x and --no-x, no value
        longs = [n for n in dashed if n.startswith("--")]
        dashed = dashed + [f"--no-{n[2:]}" for n in longs]
        nargs = "0"
    canonical = next((n for n in dashed if n.startswith("--")), dashed[0])
    entry = options.setdefault(canonical, {"names": [], "nargs": nargs, "file": file})
    for n in dashed:
        if n not in entry["names"]:
            entry["names"].append(n)


def _class_fields(trees: dict[str, ast.Module]) -> dict[str, tuple[dict[str, str], list[str]]]:
    """Every class of ``trees``: its annotated fields (name -> annotation text) and its bases."""
    out: dict[str, tuple[dict[str, str], list[str]]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {st.target.id: ast.unparse(st.annotation) for st in node.body
                          if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
                out.setdefault(node.name, (fields, [ast.unparse(b) for b in node.bases]))
    return out


def _field_type(classes: dict[str, tuple[dict[str, str], list[str]]], cls: str, field: str) -> str | None:
    seen = set()
    todo = [cls]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in classes:
            continue
        seen.add(name)
        fields, bases = classes[name]
        if field in fields:
            return fields[field]
        todo.extend(bases)
    return None


def vllm_flags(src: Sources) -> tuple[dict[str, dict[str, Any]], list[str]]:
    config_files = sorted(n for n in src.names if n.startswith("vllm/config/") and n.endswith(".py"))
    files = [f for f in VLLM_FILES if f in src.names]
    trees = {f: src.tree(f) for f in (*files, *config_files)}
    classes = _class_fields(trees)
    options: dict[str, dict[str, Any]] = {}
    for file in files:
        tree = trees[file]
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            kw_class: dict[str, str] = {}  # model_kwargs -> ModelConfig (get_kwargs(ModelConfig))
            for st in ast.walk(func):
                if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                        and isinstance(st.value, ast.Call) and ast.unparse(st.value.func).endswith("get_kwargs")
                        and st.value.args):
                    kw_class[st.targets[0].id] = ast.unparse(st.value.args[0])
            for call in ast.walk(func):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "add_argument"):
                    continue
                names = [s for s in (_const_str(a) for a in call.args) if s is not None]
                nargs = _arity_of_call(call)
                for k in call.keywords:
                    if k.arg is not None:
                        continue
                    for sub in ast.walk(k.value):  # **kw["field"], or **{**kw["field"], "default": None}
                        if not isinstance(sub, ast.Subscript):
                            continue
                        base = ast.unparse(sub.value)
                        key = _const_str(sub.slice)
                        if base in kw_class and key:
                            ann = _field_type(classes, kw_class[base], key)
                            if nargs is None and ann is not None:
                                nargs = _arity_of_annotation(ann)
                if any(isinstance(a, ast.Starred) for a in call.args) and "frontend_kwargs" in ast.unparse(func):
                    continue  # the FrontendArgs loop, read from the dataclass below
                _record(options, names, nargs or "1", file)
    # FrontendArgs.add_cli_args: every field as --<field>, arity by annotation
    frontend = "vllm/entrypoints/common/cli_args.py"
    if frontend in trees:
        for cls in ("FrontendArgs",):
            seen: set[str] = set()
            todo = [cls]
            while todo:
                name = todo.pop(0)
                if name in seen or name not in classes:
                    continue
                seen.add(name)
                fields, bases = classes[name]
                for field, ann in fields.items():
                    _record(options, [f"--{field.replace('_', '-')}"], _arity_of_annotation(ann), frontend)
                todo.extend(bases)
    return options, [*files, *config_files]


def sglang_flags(src: Sources) -> tuple[dict[str, dict[str, Any]], list[str]]:
    field_files = sorted(n for n in src.names if n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py"))
    options: dict[str, dict[str, Any]] = {}
    for file in field_files:
        for node in ast.walk(src.tree(file)):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(node.annotation, ast.Subscript) and ast.unparse(node.annotation.value) == "A"):
                continue
            sl = node.annotation.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            if len(elts) < 2:
                continue
            typ, meta = ast.unparse(elts[0]).replace(" ", ""), elts[1]
            arg = meta if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg" else None
            if arg is None and _const_str(meta) is None:
                continue
            no_cli = arg is not None and _kw(arg, "no_cli")
            if isinstance(no_cli, ast.Constant) and no_cli.value is True:
                continue
            cli_name = _const_str(_kw(arg, "cli_name")) if arg is not None and _kw(arg, "cli_name") else None  # type: ignore[arg-type]
            names = [cli_name or "--" + node.target.id.replace("_", "-")]
            aliases = _kw(arg, "aliases") if arg is not None else None
            if isinstance(aliases, ast.List):
                names += [s for s in (_const_str(e) for e in aliases.elts) if s]
            inner = typ
            for wrap in ("Optional[",):
                if inner.startswith(wrap):
                    inner = inner[len(wrap):-1]
            inner = inner.replace("|None", "")
            nargs = "1"
            if arg is not None and _kw(arg, "action") is not None:
                text = ast.unparse(_kw(arg, "action"))  # type: ignore[arg-type]
                nargs = "bool-optional" if "BooleanOptional" in text else (
                    "0" if any(a in text for a in SWITCH_ACTIONS) else "1")
            elif inner == "bool":
                nargs = "0"
            elif inner.startswith(("list[", "List[")):
                given = _kw(arg, "nargs") if arg is not None else None
                has_parser = arg is not None and _kw(arg, "type_parser") is not None
                nargs = "1" if has_parser else (str(given.value) if isinstance(given, ast.Constant) else "+")
            elif arg is not None and isinstance(_kw(arg, "nargs"), ast.Constant):
                nargs = str(_kw(arg, "nargs").value)  # type: ignore[union-attr]
            _record(options, names, nargs, file)
    server = "sglang/srt/server_args.py"
    for func in ast.walk(src.tree(server)):
        if isinstance(func, ast.FunctionDef) and func.name == "add_cli_args":
            for call in ast.walk(func):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "add_argument"):
                    names = [s for s in (_const_str(a) for a in call.args) if s is not None]
                    _record(options, names, _arity_of_call(call) or "1", server)
    return options, [*field_files, server]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("engine", choices=("vllm", "sglang"))
    p.add_argument("version")
    p.add_argument("--wheel", required=True, type=Path)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    src = Sources(a.wheel)
    options, files = vllm_flags(src) if a.engine == "vllm" else sglang_flags(src)
    data = {"engine": a.engine, "version": a.version, "extracted_by": EXTRACTED_BY, "wheel": a.wheel.name,
            "files": files if a.engine == "sglang" else [f for f in files if not f.startswith("vllm/config/")],
            "allow_abbrev": True, "underscores_as_dashes": a.engine == "vllm",
            "options": {k: {"names": v["names"], "nargs": v["nargs"]} for k, v in sorted(options.items())}}
    out = a.out or REPO_ROOT / "pytest_gpulayout" / "engines" / a.engine / "flags" / f"{a.version}.json"
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(options)} options", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
