"""SGLang's server parser, read from an SGLang wheel's sources (``tools/engine_flags.py sglang``).

``prepare_server_args`` (``sglang/srt/server_args.py``) builds a plain ``argparse.ArgumentParser`` (``prog``
"sglang serve" from 0.5.10; before, the script's name: ``launch_server.py`` under ``python -m
sglang.launch_server``) and calls ``ServerArgs.add_cli_args``: explicit ``add_argument`` calls up to 0.5.13
(defaults read from ``ServerArgs``' fields), and from 0.5.14 ``add_cli_args_from_dataclass``
(``srt/arg_groups/arg_utils.py``) over the ``A[T, Arg(...)]`` / ``A[T, "help"]`` fields, replayed here the way
that function registers them: ``--<field>`` or ``cli_name``, ``aliases``, ``dest`` the field, a custom
``action``, ``Literal`` choices, ``list[X]`` as ``nargs="+"``, ``bool`` as ``store_true``, ``required`` when
there is no default. SGLang's argparse keeps ``allow_abbrev`` and rewrites no ``_``.
"""

from __future__ import annotations

import ast
from typing import Any

from flags_entry import MISSING, type_spec
from flags_entry import entry as entry
from flags_eval import ClassRef, Interpreter, Parser, Recorded, TypeSpec, Unknown, _known
from flags_hints import GENERIC_HOOKS, NONE, H, Hints
from flags_sglang_config import merger_facts
from flags_source import Sources
from flags_vllm import Kwargs

SERVER = "sglang/srt/server_args.py"


def _arg_meta(interp: Interpreter, member: str, node: ast.expr) -> dict[str, Any] | None:
    """``Arg(...)`` keywords, or ``{"help": text}`` for a bare string (None: no CLI metadata)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {"help": node.value}
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Arg":
        out: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is not None:
                out[k.arg] = interp.eval(k.value, {}, member)
        return out
    return None


class FromDataclass:
    """``add_cli_args_from_dataclass(parser, cls, *, fields=None)`` replayed (the interpreter's hook)."""

    def __init__(self, interp: Interpreter) -> None:
        self.interp = interp
        self.kwargs = Kwargs(interp)   # dataclass fields (MRO order) and defaults
        self.hints = Hints(interp)

    def __call__(self, interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any],
                 node: ast.Call) -> Any:
        parser = args[0] if args else kwargs.get("parser")
        cls = args[1] if len(args) > 1 else kwargs.get("cls")
        only = kwargs.get("fields")
        if not isinstance(parser, Parser) and not hasattr(parser, "parser"):
            interp.log.append(f"add_cli_args_from_dataclass at {interp.member}:{node.lineno}: parser unknown")
            return None
        target: Parser = parser if isinstance(parser, Parser) else parser.parser
        fields = self.record_fields(cls)
        if fields is None:
            interp.log.append(f"add_cli_args_from_dataclass at {interp.member}:{node.lineno}: class unknown")
            return None
        for name, ann, value, member in fields:
            if isinstance(only, list) and name not in only:
                continue
            rec = self.field(name, ann, value, member)
            if rec is not None:
                target.arguments.append(rec)
        return None

    def record_fields(self, cls: Any) -> list[tuple[str, ast.expr, ast.expr | None, str]] | None:
        """``record_fields(ServerArgs)``: the dataclass's fields, or (0.5.20 on, where ``ServerArgs`` is rebuilt
        by ``msgspec.defstruct``) ``collect_input_fields(_INPUT_NAMESPACES)``: each namespace's fields,
        ``POSITIONAL_FIELD_ORDER`` first, then ``ServerArgs``' own."""
        own = server_args_class(self.interp)
        sources = self.interp.lookup(SERVER, "_INPUT_NAMESPACES")
        if isinstance(sources, list) and all(isinstance(c, ClassRef) for c in sources) and own is not None and (
                not isinstance(cls, ClassRef) or cls.node is own.node):
            collected: dict[str, tuple[str, ast.expr, ast.expr | None, str]] = {}
            for c in sources:
                for f in self.kwargs.fields(c):
                    collected.setdefault(f[0], f)
            order = self.interp.lookup(SERVER, "POSITIONAL_FIELD_ORDER")
            if not isinstance(order, list):
                collect = self.interp.lookup(SERVER, "collect_input_fields")
                order = self.interp.lookup(collect.member, "POSITIONAL_FIELD_ORDER") if hasattr(
                    collect, "member") else []
            order = list(order) if isinstance(order, (list, tuple)) else []
            known = [n for n in order if n in collected]
            rest = [n for n in collected if n not in set(order)]
            out = {n: collected[n] for n in known + rest}
            for f in self.kwargs.fields(own):
                out.setdefault(f[0], f)
            return list(out.values())
        if isinstance(cls, ClassRef):
            return self.kwargs.fields(cls)
        return None

    def field(self, name: str, ann: ast.expr, value: ast.expr | None, member: str) -> Recorded | None:
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            ann = ast.parse(ann.value, mode="eval").body
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value).split(".")[-1] in ("A", "Annotated")):
            return None
        elts = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        meta: dict[str, Any] | None = None
        for m in elts[1:]:
            meta = _arg_meta(self.interp, member, m)
            if meta is not None:
                break
        if meta is None or meta.get("no_cli") is True:
            return None
        cli_name = meta.get("cli_name") if isinstance(meta.get("cli_name"), str) else "--" + name.replace("_", "-")
        aliases = meta.get("aliases") if isinstance(meta.get("aliases"), list) else []
        names = [cli_name, *aliases]
        default = self.kwargs.default(value, member)
        auto_dest = cli_name.lstrip("-").replace("-", "_")
        kw: dict[str, Any] = {} if name == auto_dest else {"dest": name}
        if default is not MISSING:
            kw["default"] = default
        line = getattr(ann, "lineno", 0)
        if meta.get("action") is not None:
            kw["action"] = meta["action"]
            if isinstance(meta.get("action_kwargs"), dict):
                kw.update(meta["action_kwargs"])
            kw["help"] = meta.get("help", "")
            return Recorded(names, kw, member, line)
        inner = self.hints.of(member, elts[0])
        if inner.kind == "union":
            non_none = [a for a in inner.args if a != NONE]
            if len(non_none) == 1:
                inner = non_none[0]
        parser_fn = meta.get("type_parser")
        if inner.kind == "lit":
            values = list(inner.values)
            kw["choices"] = meta.get("choices") or values
            kw["type"] = parser_fn if parser_fn is not None else self._infer(
                H("b", name=type(values[0]).__name__) if values else H("b", name="str"))
            if meta.get("const") is not None:
                kw["const"] = meta["const"]
            return Recorded(names, kw, member, line)
        if inner.kind == "gen" and inner.name == "list" and parser_fn is None:
            elem = inner.args[0] if inner.args else H("b", name="str")
            kw["type"] = self._infer(elem)
            kw["nargs"] = meta.get("nargs") or "+"
            if meta.get("choices"):
                kw["choices"] = meta["choices"]
            if meta.get("const") is not None:
                kw["const"] = meta["const"]
            return Recorded(names, kw, member, line)
        if inner == H("b", name="bool"):
            kw["action"] = "store_true"
            return Recorded(names, kw, member, line)
        kw["type"] = parser_fn if parser_fn is not None else self._infer(inner)
        if meta.get("choices"):
            kw["choices"] = meta["choices"]
        if meta.get("nargs"):
            kw["nargs"] = meta["nargs"]
        if meta.get("const") is not None:
            kw["const"] = meta["const"]
        required = meta.get("required")
        if required is True or (required is None and default is MISSING):
            kw["required"] = True
        return Recorded(names, kw, member, line)

    @staticmethod
    def _infer(h: H) -> TypeSpec:
        """``_infer_type_func``: str, int, float; anything else str."""
        if h.kind == "b" and h.name in ("str", "int", "float"):
            return TypeSpec(h.name)
        return TypeSpec("str")


def server_args_class(interp: Interpreter) -> ClassRef | None:
    """The ``class ServerArgs`` statement itself (0.5.20 rebinds the name to a ``defstruct``)."""
    for node in interp.src.tree(SERVER).body:
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            return ClassRef(SERVER, node)
    return None


def declared_default(hook: FromDataclass) -> Any:
    """``_declared_default(name)`` (0.5.20 on): the default of ``ServerArgs``' field ``name``."""

    def run(interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
        fields = hook.record_fields(server_args_class(interp))
        name = args[0] if args else None
        for f in fields or []:
            if f[0] == name:
                d = hook.kwargs.default(f[2], f[3])
                return None if d is MISSING else d
        return Unknown(f"_declared_default({name!r})")

    return run


def _abbrev(src: Sources) -> bool:
    """``allow_abbrev`` of ``prepare_server_args``' parser (argparse's default: on)."""
    for node in src.tree(SERVER).body:
        if isinstance(node, ast.FunctionDef) and node.name == "prepare_server_args":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and ast.unparse(sub.func).endswith("ArgumentParser"):
                    for k in sub.keywords:
                        if k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant):
                            return bool(k.value.value)
    return True


def _prog(src: Sources) -> str:
    """The ``prog`` of ``prepare_server_args``' parser (argparse's default: the script's name)."""
    for node in src.tree(SERVER).body:
        if isinstance(node, ast.FunctionDef) and node.name == "prepare_server_args":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and ast.unparse(sub.func).endswith("ArgumentParser"):
                    for k in sub.keywords:
                        if k.arg == "prog" and isinstance(k.value, ast.Constant):
                            return str(k.value.value)
                    return "launch_server.py"
    return "launch_server.py"


def human_readable(src: Sources) -> dict[str, Any]:
    """SGLang's ``human_readable_int`` suffix tables, where it has one (``srt/utils``)."""
    interp = Interpreter(src, "sglang")
    for member in sorted(src.names):
        if not member.startswith("sglang/srt/") or "def human_readable_int" not in src.text(member):
            continue
        for node in src.tree(member).body:
            if isinstance(node, ast.FunctionDef) and node.name == "human_readable_int":
                tables: dict[str, Any] = {}
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Name) and isinstance(
                            sub.value, ast.Dict):
                        value = interp.eval(sub.value, {}, member)
                        if isinstance(value, dict):
                            tables[sub.targets[0].id] = value
                return {"at": f"{member}:{node.lineno}", "decimal": tables.get("decimal_multiplier", {}),
                        "binary": tables.get("binary_multiplier", {}), "source": ast.unparse(node)[:0]}
    return {}


def extract(src: Sources) -> dict[str, Any]:
    """The server parser of one SGLang release, in the order argparse holds its options."""
    interp = Interpreter(src, "sglang", argv=["sglang", "serve"])
    interp.hooks.update(GENERIC_HOOKS)
    from_dataclass = FromDataclass(interp)
    interp.hooks["add_cli_args_from_dataclass"] = from_dataclass
    interp.hooks["_declared_default"] = declared_default(from_dataclass)
    server_args = server_args_class(interp)
    if server_args is None:
        raise SystemExit(f"{src.wheel}: no ServerArgs in {SERVER}")
    add = interp.class_attr(server_args, "add_cli_args")
    parser = Parser({"prog": _prog(src)})
    if isinstance(add, Unknown):
        raise SystemExit(f"{src.wheel}: no ServerArgs.add_cli_args")
    interp.run(add, [parser], {})
    entries = [entry(interp, r) for r in parser.arguments]
    unknown = [e["flags"][0] for e in entries if e.get("type") == "unknown"]
    if unknown:
        interp.log.append(f"type functions not read: {unknown}")
    return {"options": entries, "log": interp.log, "prog": _prog(src), "top_prog": "",
            "human_readable_int": human_readable(src), "platform": "cuda", "allow_abbrev": _abbrev(src),
            "parser": {"file": SERVER, "config": "--config" in src.text(SERVER), **merger_facts(src)}}


__all__ = ["extract", "entry", "type_spec", "_known"]
