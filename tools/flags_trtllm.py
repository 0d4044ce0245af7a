"""``trtllm-serve``'s options, read from ``tensorrt_llm/commands/serve.py`` of one TensorRT-LLM snapshot
(``tools/engine_flags.py trtllm --serve-py FILE --version X --source URL``): the click decorators of the
command that serves a model, in the order click lists them (top to bottom), parsed with ``ast``.

The command is ``@click.command("serve")`` (``trtllm-serve serve MODEL``; the ``DefaultGroup`` of 1.x also
takes ``trtllm-serve MODEL``) or, in the first files (0.15-0.17 development snapshots of the main branch),
``@click.command("trtllm-serve")``: then ``trtllm-serve`` is that one command (``prog`` says which).

Per option: its spellings (the strings that start with ``-``), its name (a bare string, else the first long
spelling without dashes, as click's ``Option._parse_decls`` derives it), ``is_flag``, ``multiple``,
``required``, the literal ``default`` (``default_src`` when it is an expression, e.g. a ``BuildConfig``
field), and its type: ``int``, ``float``, ``str``, ``click.Choice([...])`` (and the release's own
``ChoiceWithAlias`` with its aliases), a ``click.Path`` (a string). A choice over ``NAME.keys()`` is resolved
when ``NAME`` is a top-level dict literal of a module given with ``--module`` (``severity_map`` of
``tensorrt_llm/logger.py`` for ``--log_level``); a choice filled at import time (``ReasoningParserFactory.
parsers``: a registry) is marked ``choices_unknown`` and not checked. ``@click.argument`` gives the
positional model.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SERVE_MEMBER = "tensorrt_llm/commands/serve.py"
COMMAND_NAMES = ("serve", "trtllm-serve")


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def dict_keys(text: str) -> dict[str, list[str]]:
    """The keys of each top-level ``NAME = {...}`` of a module whose keys are all string literals."""
    out: dict[str, list[str]] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Dict):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(keys) == len(node.value.keys):
                out[node.targets[0].id] = keys
    return out


def _type(node: ast.expr | None, known: Mapping[str, list[str]]) -> dict[str, Any]:
    if node is None:
        return {"type": "str"}
    text = ast.unparse(node)
    if text in ("int", "click.INT"):
        return {"type": "int"}
    if text in ("float", "click.FLOAT"):
        return {"type": "float"}
    if isinstance(node, ast.Call) and text.split("(")[0].split(".")[-1] in ("Choice", "ChoiceWithAlias"):
        out: dict[str, Any] = {"type": "str"}
        arg = node.args[0] if node.args else None
        choices = _literal(arg) if arg is not None else None
        if isinstance(choices, (list, tuple)):
            out["choices"] = list(choices)
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "keys" \
                and isinstance(arg.func.value, ast.Name) and arg.func.value.id in known:
            out["choices"] = list(known[arg.func.value.id])
        else:
            out["choices_unknown"] = True
            out["choices_src"] = ast.unparse(arg) if arg is not None else ""
        aliases = _literal(node.args[1]) if len(node.args) > 1 else None
        if aliases:
            out["aliases"] = aliases
        return out
    return {"type": "str"}


def _command(tree: ast.Module) -> tuple[ast.FunctionDef, str] | None:
    for name in COMMAND_NAMES:  # the 1.x file also declares other commands: "serve" is the one that serves
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("command") and d.args and \
                            _literal(d.args[0]) == name:
                        return node, name
    return None


def command_name(text: str) -> str:
    found = _command(ast.parse(text))
    return found[1] if found else ""


def options(text: str, member: str = SERVE_MEMBER, known: Mapping[str, list[str]] | None = None) \
        -> list[dict[str, Any]]:
    found = _command(ast.parse(text))
    if found is None:
        raise SystemExit(f"{member}: no click command named serve")
    func = found[0]
    out: list[dict[str, Any]] = []
    for d in func.decorator_list:
        if not isinstance(d, ast.Call):
            continue
        kind = ast.unparse(d.func).split(".")[-1]
        names = [v for v in (_literal(a) for a in d.args) if isinstance(v, str)]
        kw = {k.arg: k.value for k in d.keywords if k.arg}
        if kind == "argument":
            out.append({"flags": [], "dest": names[0], "required": True, "at": f"{member}:{d.lineno}"})
            continue
        if kind != "option":
            continue
        flags = [n for n in names if n.startswith("-")]
        bare = [n for n in names if not n.startswith("-")]
        longs = [f for f in flags if f.startswith("--")]
        dest = bare[0] if bare else (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_").lower()
        e: dict[str, Any] = {"flags": flags, "dest": dest}
        multiple = "multiple" in kw and _literal(kw["multiple"]) is True
        if "is_flag" in kw and _literal(kw["is_flag"]) is True:
            e["action"] = "store_true"
        else:
            e.update(_type(kw.get("type"), known or {}))
            if multiple:
                e["action"] = "append"
        if "default" in kw:
            value = _literal(kw["default"])
            if value is not None or ast.unparse(kw["default"]) == "None":
                e["default"] = [] if multiple and value is None else value  # click: () for multiple
            else:
                e["default_src"] = ast.unparse(kw["default"])
        if "required" in kw and _literal(kw["required"]) is True:
            e["required"] = True
        e["at"] = f"{member}:{d.lineno}"
        out.append(e)
    return out


def extract(serve_py: Path, version: str, source: str, modules: Sequence[Path] = (),
            read_as: Sequence[str] = ()) -> dict[str, Any]:
    """One release record. ``modules``: other files of the same snapshot (``tensorrt_llm/logger.py``) whose
    dict literals resolve ``click.Choice(NAME.keys())``; ``read_as``: the paths of the files read, as the
    snapshot names them (default: ``tensorrt_llm/commands/serve.py`` and the module file names)."""
    text = serve_py.read_text()
    known: dict[str, list[str]] = {}
    for m in modules:
        known.update(dict_keys(m.read_text()))
    name = command_name(text)
    prog = "trtllm-serve serve" if name == "serve" else "trtllm-serve"
    read = list(read_as) or [SERVE_MEMBER, *(f"tensorrt_llm/{m.name}" for m in modules)]
    return {"version": version, "wheel": "", "source": source or str(serve_py), "read": read,
            "options": options(text, known=known), "prog": prog, "top_prog": "", "allow_abbrev": False,
            "parser": {"file": SERVE_MEMBER, "click": True, "command": name}}
