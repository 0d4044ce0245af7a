"""``trtllm-serve serve``'s options, read from ``tensorrt_llm/commands/serve.py`` of one TensorRT-LLM release
(``tools/engine_flags.py trtllm --serve-py FILE --version X``): the click decorators of the ``serve`` command,
in the order click lists them (top to bottom), parsed with ``ast``.

Per option: its spellings (the strings that start with ``-``), its name (a bare string, else the first long
spelling without dashes, as click derives it), ``is_flag``, ``multiple``, ``required``, the literal
``default``, and its type: ``int``, ``float``, ``str``, ``click.Choice([...])`` (and the release's own
``ChoiceWithAlias`` with its aliases), a ``click.Path`` (a string). ``@click.argument`` gives the positional
model.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _type(node: ast.expr | None) -> tuple[str, list[Any] | None, dict[str, str] | None]:
    if node is None:
        return "str", None, None
    text = ast.unparse(node)
    if text in ("int", "click.INT"):
        return "int", None, None
    if text in ("float", "click.FLOAT"):
        return "float", None, None
    if isinstance(node, ast.Call) and text.split("(")[0].split(".")[-1] in ("Choice", "ChoiceWithAlias"):
        choices = _literal(node.args[0]) if node.args else None
        aliases = _literal(node.args[1]) if len(node.args) > 1 else None
        return "str", list(choices) if isinstance(choices, (list, tuple)) else None, aliases
    return "str", None, None


def _command(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("command") and d.args and \
                        _literal(d.args[0]) in ("serve", "trtllm-serve"):
                    return node
    return None


def options(text: str, member: str = "tensorrt_llm/commands/serve.py") -> list[dict[str, Any]]:
    func = _command(ast.parse(text))
    if func is None:
        raise SystemExit(f"{member}: no click command named serve")
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
        if "is_flag" in kw and _literal(kw["is_flag"]) is True:
            e["action"] = "store_true"
        else:
            typ, choices, aliases = _type(kw.get("type"))
            e["type"] = typ
            if choices is not None:
                e["choices"] = choices
            if aliases:
                e["aliases"] = aliases
            if "multiple" in kw and _literal(kw["multiple"]) is True:
                e["action"] = "append"
        if "default" in kw:
            value = _literal(kw["default"])
            if value is not None or ast.unparse(kw["default"]) == "None":
                e["default"] = value
            else:
                e["default_src"] = ast.unparse(kw["default"])
        if "required" in kw and _literal(kw["required"]) is True:
            e["required"] = True
        e["at"] = f"{member}:{d.lineno}"
        out.append(e)
    return out


def extract(serve_py: Path, version: str, source: str) -> dict[str, Any]:
    text = serve_py.read_text()
    return {"version": version, "wheel": "", "source": source or str(serve_py),
            "read": ["tensorrt_llm/commands/serve.py"], "options": options(text), "prog": "trtllm-serve serve",
            "top_prog": "", "allow_abbrev": False, "parser": {"file": "tensorrt_llm/commands/serve.py",
                                                              "click": True}}
