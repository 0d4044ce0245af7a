"""One recorded ``add_argument`` as a table entry, with argparse's own defaults filled in (``dest`` from the
first long spelling, ``store_true``'s ``False``), and an engine's own ``argparse.Action`` classes read for
what they do when the line reaches them (``does``): store the values, store a constant, do nothing (a
deprecated no-op), refuse with ``parser.error(message)``, or raise ``ValueError``.
"""

from __future__ import annotations

import ast
from typing import Any

from flags_eval import (
    ActionSpec,
    ClassRef,
    External,
    FuncRef,
    Interpreter,
    Opaque,
    Recorded,
    TypeSpec,
    _known,
)

MISSING = Opaque("MISSING")


def _src(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def type_spec(value: Any) -> str:
    """A ``type=`` value as the table writes it."""
    if isinstance(value, TypeSpec):
        return value.spec
    if value in (int, float, str, bool):
        return value.__name__
    if isinstance(value, External):
        return f"{value.module.split('.')[-1]}.{value.name}" if value.module in ("json",) else value.name
    if isinstance(value, FuncRef):
        if value.name == "<lambda>":
            return f"lambda:{_src(value.node)}"
        return value.name
    if isinstance(value, ClassRef):
        return f"class:{value.name}"
    return "unknown"


def action_spec(value: Any) -> str:
    if value is None:
        return "store"
    if isinstance(value, str):
        return value
    if isinstance(value, ActionSpec):
        return value.name
    if isinstance(value, External):
        return value.name
    if isinstance(value, ClassRef):
        return f"class:{value.name}"
    return "unknown"


def _init_defaults(interp: Interpreter, cls: ClassRef) -> dict[str, Any]:
    """The keyword defaults of the action's ``__init__`` (``nargs=0``, ``const=True``...)."""
    init = interp.class_attr(cls, "__init__")
    if not isinstance(init, FuncRef) or isinstance(init.node, ast.Lambda):
        return {}
    args = init.node.args
    out: dict[str, Any] = {}
    pos = [*args.posonlyargs, *args.args]
    for p, d in zip(pos[len(pos) - len(args.defaults):], args.defaults, strict=True):
        out[p.arg] = interp.eval(d, {}, init.member)
    for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if d is not None:
            out[p.arg] = interp.eval(d, {}, init.member)
    return out


def custom_action(interp: Interpreter, cls: ClassRef, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What an engine's own Action class does, read from its ``__call__``."""
    call = interp.class_attr(cls, "__call__")
    init = _init_defaults(interp, cls)
    merged = {**init, **{k: v for k, v in kwargs.items() if k != "action"}}
    out: dict[str, Any] = {}
    for key in ("nargs", "const", "default"):
        if key in init and key not in kwargs and _known(init[key]):
            out[key] = init[key]
    if not isinstance(call, FuncRef) or isinstance(call.node, ast.Lambda):
        out["does"] = "store"
        return out
    text = _src(call.node)
    for st in ast.walk(call.node):
        if isinstance(st, ast.Call) and _src(st.func) == "parser.error" and st.args:
            arg = st.args[0]
            if isinstance(arg, ast.Attribute) and _src(arg.value) == "self":
                message = merged.get(arg.attr)
                if isinstance(message, str):
                    out.update(does="error", message=message)
                    return out
        if isinstance(st, ast.Raise) and isinstance(st.exc, ast.Call) and _src(st.exc.func) == "ValueError":
            arg = st.exc.args[0] if st.exc.args else None
            if isinstance(arg, ast.Attribute) and _src(arg) == "self.help":
                help_text = merged.get("help")
                out.update(does="raise", message=f"ValueError: {help_text if isinstance(help_text, str) else ''}")
                return out
    if "Invalid boolean value" in text:
        out["does"] = "bool_str"
        return out
    sets = [st for st in ast.walk(call.node) if isinstance(st, ast.Call) and _src(st.func) == "setattr"
            and len(st.args) == 3 and _src(st.args[1]) == "self.dest"]
    if not sets:
        out["does"] = "nothing"
        return out
    value = sets[-1].args[2]
    if isinstance(value, ast.Constant):
        out.update(does="const", value=value.value)
    elif isinstance(value, ast.Attribute) and _src(value.value) == "self" and value.attr != "dest":
        v = merged.get(value.attr)
        out.update(does="const", value=v if _known(v) else None)
    else:
        out["does"] = "store"
    return out


def entry(interp: Interpreter, rec: Recorded) -> dict[str, Any]:
    """One recorded ``add_argument`` as a table entry."""
    kw = dict(rec.kwargs)
    names = rec.names
    optional = bool(names) and names[0].startswith("-")
    action = action_spec(kw.get("action"))
    e: dict[str, Any] = {"flags": names} if optional else {"flags": []}
    dest = kw.get("dest")
    if not isinstance(dest, str):
        if optional:
            longs = [n for n in names if n.startswith("--")]
            dest = (longs[0] if longs else names[0]).lstrip("-").replace("-", "_")
        else:
            dest = names[0] if names else "?"
    e["dest"] = dest
    if action != "store":
        e["action"] = action
    if isinstance(kw.get("action"), ClassRef):
        custom = custom_action(interp, kw["action"], kw)
        if kw["action"].name.startswith("Deprecated") and not kw.get("deprecated"):
            kw["deprecated"] = True  # SGLang's Deprecated*Action, vLLM's DeprecatedLogConfigFileAction
        for key in ("nargs", "const", "default"):
            if key in custom and key not in kw:
                kw[key] = custom.pop(key)
        e["custom"] = custom
    if "type" in kw and kw["type"] is not None:
        e["type"] = type_spec(kw["type"])
    for key in ("nargs", "const", "required", "deprecated"):
        if key in kw and _known(kw[key]) and kw[key] is not None and kw[key] is not False:
            e[key] = kw[key]
    if "choices" in kw:
        ch = kw["choices"]
        if isinstance(ch, (list, tuple, set, frozenset)) and not ch:
            e["choices_unknown"] = True  # a registry filled at import time (no release ships empty choices)
        elif isinstance(ch, (list, tuple, set, frozenset)) and _known(list(ch)):
            e["choices"] = sorted(ch, key=repr) if isinstance(ch, (set, frozenset)) else list(ch)
        elif isinstance(ch, dict) and _known(ch):
            e["choices"] = list(ch)
        elif ch is not None:
            e["choices_unknown"] = True
    defaults = {"store_true": False, "store_false": True}
    default = kw.get("default", defaults.get(action))
    if isinstance(default, Opaque):
        if default is not MISSING and default.src != "MISSING":
            e["default_src"] = default.src
    elif _known(default):
        if isinstance(default, (set, frozenset, tuple)):
            default = sorted(default, key=repr) if isinstance(default, (set, frozenset)) else list(default)
        if default is not None:
            e["default"] = default
    else:
        e["default_src"] = "?"
    e["at"] = f"{rec.member}:{rec.line}"
    return e
