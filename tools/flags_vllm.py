"""``vllm serve``'s parser, read from a vLLM wheel's sources (``tools/engine_flags.py vllm``).

The interpreter (``flags_eval.py``) runs ``ServeSubcommand.subparser_init`` (``vllm/entrypoints/cli/serve.py``)
into ``make_arg_parser`` and ``EngineArgs.add_cli_args``; ``get_kwargs(SomeConfig)`` is replayed here the way
the release's own ``get_kwargs`` / ``_compute_kwargs`` (``vllm/engine/arg_utils.py``) turns each config field
into argparse keywords: its shape is read from that function's source (which ints take ``human_readable_int``,
whether a dataclass field parses JSON, whether ``bool | str | None`` takes an optional value, whether a Literal
alongside ``str`` is a metavar), so a release that changes it is read as it is. ``FlexibleArgumentParser``'s
own rewriting of the command line (``_`` to ``-``, dotted JSON keys, ``-O``, ``--config FILE``) is read from
its ``parse_args`` as a set of features (``parser_features``), each the one variant of that release.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Any

from flags_entry import MISSING, type_spec
from flags_entry import entry as entry
from flags_eval import (
    ActionSpec,
    ClassRef,
    FuncRef,
    Instance,
    Interpreter,
    Namespace,
    Opaque,
    Parser,
    Subparsers,
    TypeSpec,
    Unknown,
    _known,
)
from flags_hints import GENERIC_HOOKS, NONE, H, Hints
from flags_source import Sources


@dataclass
class KwargsShape:
    """How the release's ``get_kwargs`` maps a field's type hints to argparse keywords."""

    variant: str                  # "0.8.4" (nested, nullable_str) or "compute" (0.8.5 and later)
    hints_mode: str               # "union" | "union_annotated" | "recursive"
    uniontype: bool               # get_type_hints unpacks ``X | Y`` too
    dataclass_rule: str | None    # None | "lambda" | "parse_dataclass"
    bool_str_none: bool           # ``bool | str | None``: an optional value
    metavar_if_str: bool          # Literal beside str: any string (metavar, not choices)
    set_rule: bool                # ``set[X]`` as a list
    hri: tuple[str, ...]          # fields that take human_readable_int
    hri_or_auto: tuple[str, ...]  # fields that take human_readable_int_or_auto
    union_dict_and_str: bool
    dict_type: str                # "optional(json.loads)" | "parse_type(json.loads)"
    none_choice: Any              # what is added to the choices of an Optional Literal: "None" or None
    dict_subclass: bool           # dict subclasses count as dict
    literal_fix: bool             # a Literal element type becomes its choices
    list_union_str: bool          # ``list[int | str]`` elements are str


def _src(node: ast.AST | None) -> str:
    return ast.unparse(node) if node is not None else ""


def kwargs_shape(interp: Interpreter, func: FuncRef) -> KwargsShape:
    """Read the shape of ``get_kwargs`` from the release's own functions (see the module docstring)."""
    member = func.member
    text = _src(func.node)
    compute = interp.lookup(member, "_compute_kwargs")
    if isinstance(compute, FuncRef) and "_compute_kwargs" in text:
        text = _src(compute.node)

    def fn(name: str) -> str:
        v = interp.lookup(member, name)
        return _src(v.node) if isinstance(v, FuncRef) else ""

    if "is_optional(field.type)" in text:
        return KwargsShape("0.8.4", "union", False, None, False, False, False, (), (), False, "", "None", False,
                           False, False)
    hri: list[str] = []
    hri_auto: list[str] = []
    node = compute.node if isinstance(compute, FuncRef) and "_compute_kwargs" in _src(func.node) else func.node
    for sub in ast.walk(node):
        if isinstance(sub, ast.If) and "contains_type(type_hints, int)" in _src(sub.test):
            branch = ast.Module(body=sub.body, type_ignores=[])
            for inner in ast.walk(branch):
                if isinstance(inner, ast.If):
                    names = [c.value for c in ast.walk(inner.test) if isinstance(c, ast.Constant)
                             and isinstance(c.value, str)]
                    body = _src(ast.Module(body=inner.body, type_ignores=[]))
                    if "human_readable_int_or_auto" in body:
                        hri_auto += names
                    elif "human_readable_int" in body:
                        hri += names
                elif isinstance(inner, ast.Assign) and isinstance(inner.value, (ast.Set, ast.Tuple, ast.List)):
                    if any(isinstance(t, ast.Name) and "human_readable" in t.id for t in inner.targets):
                        hri += [c.value for c in inner.value.elts if isinstance(c, ast.Constant)]
    gth = fn("get_type_hints")
    if "get_type_hints(field.type)" in text:
        mode = "recursive"
    elif "Annotated}" in text:
        mode = "union_annotated"
    else:
        mode = "union"
    return KwargsShape(
        variant="compute",
        hints_mode=mode,
        uniontype="UnionType" in gth,
        dataclass_rule="parse_dataclass" if "def parse_dataclass" in text else (
            "lambda" if "dataclass_init" in text else None),
        bool_str_none="type_hints == {bool, str, type(None)}" in text,
        metavar_if_str="metavar" in fn("literal_to_kwargs"),
        set_rule="collection_to_kwargs(type_hints, set)" in text,
        hri=tuple(dict.fromkeys(n for n in hri if n not in hri_auto)),
        hri_or_auto=tuple(dict.fromkeys(hri_auto)),
        union_dict_and_str="union_dict_and_str" in text,
        dict_type="parse_type(json.loads)" if "parse_type(json.loads)" in text else "optional(json.loads)",
        none_choice=None if "append(None)" in text else "None",
        dict_subclass="is_dict_subclass" in text,
        literal_fix="get_origin(kwargs[name].get('type')) is Literal" in text,
        list_union_str="List type must contain str" in text or "If element can have multiple types" in (
            fn("collection_to_kwargs")),
    )


class Kwargs:
    """``get_kwargs(cls)`` replayed (the hook the interpreter calls)."""

    def __init__(self, interp: Interpreter) -> None:
        self.interp = interp
        self.hints = Hints(interp)
        self.dataclasses: dict[str, dict[str, Any]] = {}   # the JSON-typed config classes: their keys

    # -- dataclass fields ------------------------------------------------------------------------------------
    def fields(self, cls: ClassRef) -> list[tuple[str, ast.expr, ast.expr | None, str]]:
        order: dict[str, tuple[str, ast.expr, ast.expr | None, str]] = {}
        for c in reversed(self.interp.mro(cls)):
            if not self.hints.class_flags(c)[0] and c is not cls:
                continue
            for st in c.node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    ann = _src(st.annotation)
                    if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar", "KW_ONLY")) or ann == "KW_ONLY":
                        continue
                    order[st.target.id] = (st.target.id, st.annotation, st.value, c.member)
        return list(order.values())

    def default(self, value: ast.expr | None, member: str) -> Any:
        if value is None:
            return MISSING
        if isinstance(value, ast.Call) and _src(value.func).split(".")[-1] in ("field", "Field", "PydanticField"):
            kws = {k.arg: k.value for k in value.keywords}
            if "default" in kws:
                return self._literal(kws["default"], member)
            if value.args and _src(value.func).split(".")[-1] in ("Field", "PydanticField"):
                return self._literal(value.args[0], member)
            if "default_factory" in kws:
                return self._factory(kws["default_factory"], member)
            return MISSING
        return self._literal(value, member)

    def _literal(self, node: ast.expr, member: str) -> Any:
        v = self.interp.eval(node, {}, member)
        return v if _known(v) else Opaque(_src(node))

    def _factory(self, node: ast.expr, member: str) -> Any:
        if isinstance(node, ast.Lambda):
            return self._literal(node.body, member)
        v = self.interp.eval(node, {}, member)
        if v in (list, dict, set, tuple):
            return v()
        return Opaque(f"{_src(node)}()")

    # -- get_type_hints --------------------------------------------------------------------------------------
    def type_hints(self, h: H, shape: KwargsShape) -> list[H]:
        out: list[H] = []

        def add(x: H) -> None:
            if x not in out:
                out.append(x)

        def rec(x: H) -> None:
            if x.kind == "ann":
                rec(x.args[0])
            elif x.kind == "union" and (not x.pep604 or shape.uniontype):
                for a in x.args:
                    rec(a)
            else:
                add(x)

        if shape.hints_mode == "recursive":
            rec(h)
        elif shape.hints_mode == "union_annotated" and h.kind in ("union", "ann") and not h.pep604:
            for a in (h.args if h.kind == "union" else (h.args[0], *(H("other", name=m) for m in h.values))):
                add(a)
        elif h.kind == "union" and not h.pep604:
            for a in h.args:
                add(a)
        else:
            add(h)
        return out

    @staticmethod
    def is_type(th: H, name: str) -> bool:
        if name == "Literal":
            return th.kind == "lit"
        return (th.kind == "b" and th.name == name) or (th.kind == "gen" and th.name == name)

    def contains(self, hints: list[H], name: str) -> bool:
        return any(self.is_type(th, name) for th in hints)

    def get(self, hints: list[H], name: str) -> H:
        return next(th for th in hints if self.is_type(th, name))

    @staticmethod
    def not_builtin(th: H) -> bool:
        if th.kind in ("b", "none", "ellipsis"):
            return False
        if th.kind == "gen":
            return th.typing
        return True

    def type_of(self, th: H) -> Any:
        """A hint used as a ``type=``: what argparse will call."""
        if th.kind == "b":
            return TypeSpec(th.name)
        if th.kind == "lit":
            return ("literal", th)
        if th.kind == "cls":
            return TypeSpec(f"class:{th.name}")
        return TypeSpec(f"other:{th.show()}")

    def literal_kwargs(self, hints: list[H], shape: KwargsShape) -> dict[str, Any]:
        lit = self.get(hints, "Literal")
        options = list(lit.values)
        option_type = type(options[0]).__name__ if options else "str"
        kwarg = "metavar" if shape.metavar_if_str and self.contains(hints, "str") else "choices"
        return {"type": TypeSpec(option_type), kwarg: sorted(options)}

    def collection_kwargs(self, hints: list[H], name: str, shape: KwargsShape) -> dict[str, Any]:
        th = self.get(hints, name)
        types = list(th.args)
        elem = types[0] if types else H("b", name="str")
        if elem.kind == "union" and shape.list_union_str and (not elem.pep604 or shape.uniontype):
            elem = H("b", name="str")
        nargs: Any = "+"
        if name == "tuple" and not any(t.kind == "ellipsis" for t in types):
            nargs = len(types)
        return {"type": self.type_of(elem), "nargs": nargs}

    # -- the replay --------------------------------------------------------------------------------------------
    def __call__(self, interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any],
                 node: ast.Call) -> Any:
        cls = args[0] if args else kwargs.get("cls")
        if not isinstance(cls, ClassRef):
            interp.log.append(f"get_kwargs({cls!r}) at {getattr(func, 'member', '?')}:{node.lineno}: not a class")
            return Unknown("get_kwargs")
        shape = kwargs_shape(interp, func)
        return copy.deepcopy(self.compute(cls, shape))

    def compute(self, cls: ClassRef, shape: KwargsShape) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name, ann, value, member in self.fields(cls):
            h = self.hints.of(member, ann)
            default = self.default(value, member)
            if shape.variant == "0.8.4":
                out[name] = self._kwargs_084(name, h, value, member, default)
                continue
            hints = self.type_hints(h, shape)
            if shape.dict_subclass:
                hints = [H("b", name="dict") if th.kind == "cls" and th.dictsub else th for th in hints]
            dc = next((th for th in hints if th.kind == "cls" and th.dataclass), None)
            kw: dict[str, Any] = {"default": default, "help": ""}
            if dc is not None and shape.dataclass_rule:
                kw["type"] = TypeSpec(f"dataclass:{dc.name}" if shape.dataclass_rule == "parse_dataclass"
                                      else f"dataclass_lambda:{dc.name}")
                if dc.ref is not None:
                    self.note_dataclass(dc.ref)
            elif shape.bool_str_none and set(hints) == {H("b", name="bool"), H("b", name="str"), NONE}:
                kw.update(type=TypeSpec("str"), nargs="?", const=True)
            elif self.contains(hints, "bool"):
                kw["action"] = ActionSpec("BooleanOptionalAction")
            elif self.contains(hints, "Literal"):
                kw.update(self.literal_kwargs(hints, shape))
            elif self.contains(hints, "tuple"):
                kw.update(self.collection_kwargs(hints, "tuple", shape))
            elif self.contains(hints, "list"):
                kw.update(self.collection_kwargs(hints, "list", shape))
            elif shape.set_rule and self.contains(hints, "set"):
                kw.update(self.collection_kwargs(hints, "set", shape))
            elif self.contains(hints, "int"):
                kw["type"] = TypeSpec("human_readable_int_or_auto" if name in shape.hri_or_auto else (
                    "human_readable_int" if name in shape.hri else "int"))
            elif self.contains(hints, "float"):
                kw["type"] = TypeSpec("float")
            elif shape.union_dict_and_str and self.contains(hints, "dict") and (
                    self.contains(hints, "str") or any(self.not_builtin(th) for th in hints)):
                kw["type"] = TypeSpec("union_dict_and_str")
            elif self.contains(hints, "dict"):
                kw["type"] = TypeSpec(shape.dict_type)
            elif self.contains(hints, "str") or any(self.not_builtin(th) for th in hints):
                kw["type"] = TypeSpec("str")
            else:
                kw["type"] = TypeSpec(f"unsupported:{h.show()}")
                self.interp.log.append(f"{member}: {cls.name}.{name}: unsupported type {h.show()}")
            if isinstance(kw.get("type"), tuple):  # a Literal element type
                lit = kw["type"][1]
                if shape.literal_fix:
                    kw.update(self.literal_kwargs([lit], shape))
                else:
                    kw["type"] = TypeSpec("other:Literal")
            if NONE in hints and not self.contains(hints, "bool"):
                kw["type"] = TypeSpec(f"optional({kw['type'].spec})")
                if kw.get("choices"):
                    kw["choices"].append(shape.none_choice)
            out[name] = kw
        return out

    def _kwargs_084(self, name: str, h: H, value: ast.expr | None, member: str, default: Any) -> dict[str, Any]:
        """vLLM 0.8.4's nested ``get_kwargs``: ``default_factory`` itself as the default (when there is no
        default), no type for ``bool``, ``nullable_str`` for Optional, ``str`` in a Union, else the annotation."""
        if isinstance(value, ast.Call) and _src(value.func).split(".")[-1] == "field" and not any(
                k.arg == "default" for k in value.keywords):
            default = Opaque(_src(next((k.value for k in value.keywords if k.arg == "default_factory"), value)))
        kw: dict[str, Any] = {"default": default, "help": ""}
        if h.kind == "b" and h.name == "bool":
            return kw
        if h.kind == "union" and not h.pep604 and NONE in h.args:
            kw["type"] = TypeSpec("nullable_str")
        elif h.kind == "union" and not h.pep604 and H("b", name="str") in h.args:
            kw["type"] = TypeSpec("str")
        else:
            kw["type"] = self.type_of(h) if h.kind != "lit" else TypeSpec("other:Literal")
        return kw

    def note_dataclass(self, cls: ClassRef) -> None:
        """The keys a JSON-typed config class takes, and whether it refuses others (``@config`` with
        ``extra="forbid"``) or builds itself ``from_cli``."""
        if cls.name in self.dataclasses:
            return
        keys = [f[0] for f in self.fields(cls)]
        forbid = False
        for d in cls.node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            value = self.interp.eval(target, {}, cls.member)
            if isinstance(value, FuncRef) and "forbid" in _src(value.node):
                forbid = True
            if "forbid" in _src(d):
                forbid = True
        from_cli = isinstance(self.interp.class_attr(cls, "from_cli"), FuncRef)
        self.dataclasses[cls.name] = {"keys": keys, "forbid": forbid, "from_cli": from_cli}


def _optional_type(interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
    return TypeSpec(f"optional({type_spec(args[0]) if args else 'str'})")


def _parse_type(interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
    return TypeSpec(f"parse_type({type_spec(args[0]) if args else 'str'})")


def flexible_parser(src: Sources) -> tuple[str, ast.ClassDef] | None:
    for member in ("vllm/utils/argparse_utils.py", "vllm/utils/__init__.py", "vllm/utils.py"):
        if src.has(member):
            for node in ast.walk(src.tree(member)):
                if isinstance(node, ast.ClassDef) and node.name == "FlexibleArgumentParser":
                    return member, node
    return None


def parser_features(src: Sources) -> dict[str, Any]:
    """What ``FlexibleArgumentParser.parse_args`` (and its config-file reading) does to the command line
    before argparse sees it, each the variant this release's source shows."""
    found = flexible_parser(src)
    if found is None:
        return {"flexible": False}
    member, cls = found
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    pa = _src(methods.get("parse_args"))
    pull = _src(methods.get("_pull_args_from_config"))
    load = _src(methods.get("load_config_file") or methods.get("_load_config_file"))
    o_flag = "none"
    if "'--optimization-level'" in pa:
        o_flag = "optimization_level"
    elif "-O.mode" in pa:
        o_flag = "mode_dotted"
    elif "-O.level" in pa:
        o_flag = "level_dotted"
    dotted = "none"
    if "create_nested_dict" in pa:
        dotted = "json" if "json.loads(value_str)" in pa else "basic"
    feats: dict[str, Any] = {
        "flexible": True,
        "file": member,
        "line": methods["parse_args"].lineno if "parse_args" in methods else cls.lineno,
        "underscore": "before_dot" if "(?<=--)[^\\\\.]*" in pa or "(?<=--)[^\\.]*" in pa else "all",
        "model_flag": "move" if "model_tag = " in pa else ("refuse" if "'--model'" in pa else "none"),
        "model_match": "regex" if "^--model(=.+|$)" in pa else "exact",
        "served_name_check": "served[-_]model[-_]name" in pa,
        "o_flag": o_flag,
        "o_dotted_to_cc": "replace('-O', '-cc', 1)" in pa,
        "o_skip_dot": "arg[2] != '.'" in pa,
        "dotted": dotted,
        "dotted_dash": "processed_arg.startswith('-') and '.' in processed_arg" in pa,
        "dotted_plus": "endswith('+')" in pa,
        "dotted_hri": "human_readable_int(value_str)" in pa,
        "help_keyword": "'--help='" in pa,
        "config": "'--config' in args" in pa,
        "config_model_check": "model_in_config" in pull,
        "config_no_model_error": "No model_tag specified" in pull,
        "config_lists": "isinstance(value, list)" in load,
        "config_dicts": "isinstance(value, dict)" in load,
        "config_no_key": "--no-" in load,
    }
    feats["messages"] = _messages(cls)
    init = _src(methods.get("__init__"))
    if "register('action', BooleanOptionalAction" in init or 'register("action", BooleanOptionalAction' in init:
        feats["boolean_optional"] = init.split("BooleanOptionalAction,", 1)[1].split(")")[0].strip()
    error = methods.get("error")
    if error is not None:
        for sub in ast.walk(error):
            if isinstance(sub, ast.AugAssign) and isinstance(sub.value, ast.Constant) and "--task" in str(
                    sub.value.value):
                feats["task_hint"] = sub.value.value
    return feats


#: the ValueErrors FlexibleArgumentParser raises, by a phrase of their text
_MESSAGE_KEYS = {"No config file specified": "config_no_file", "Config file must be": "config_ext",
                 "`--model` option": "model_refuse", "first positional argument": "served_name",
                 "No model specified": "config_no_model", "No model_tag specified": "config_no_model_tag"}


def _messages(cls: ast.ClassDef) -> dict[str, str]:
    """The text of each ``raise ValueError(...)`` of the class: a template with ``{name}`` for an f-string's
    fields; ``%s`` kept where the release passes its arguments beside the text (which ValueError shows as a
    tuple: ``('... %s supplied', 'json')``)."""
    out: dict[str, str] = {}
    for r in ast.walk(cls):
        if not (isinstance(r, ast.Raise) and isinstance(r.exc, ast.Call) and _src(r.exc.func) == "ValueError"):
            continue
        args = r.exc.args
        if not args:
            continue
        first = args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            text = first.value
            if len(args) > 1:
                text = "tuple:" + text
        elif isinstance(first, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{" + _src(v.value) + "}"
                           for v in first.values)
        else:
            continue
        for phrase, key in _MESSAGE_KEYS.items():
            if phrase in text:
                out[key] = text
    return out


def human_readable(src: Sources) -> dict[str, Any]:
    """``human_readable_int``'s suffix tables, read from the release (``utils/argparse_utils.py`` from 0.20,
    ``engine/arg_utils.py`` before)."""
    for member in ("vllm/utils/argparse_utils.py", "vllm/engine/arg_utils.py"):
        if not src.has(member):
            continue
        for node in src.tree(member).body:
            if isinstance(node, ast.FunctionDef) and node.name == "human_readable_int":
                tables: dict[str, dict[str, int]] = {}
                interp = Interpreter(src, "vllm")
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Name) and isinstance(
                            sub.value, ast.Dict):
                        value = interp.eval(sub.value, {}, member)  # {"k": 10 ** 3, ...}
                        if isinstance(value, dict):
                            tables[sub.targets[0].id] = value
                return {"at": f"{member}:{node.lineno}", "decimal": tables.get("decimal_multiplier", {}),
                        "binary": tables.get("binary_multiplier", {})}
    return {}


def type_variants(src: Sources) -> dict[str, Any]:
    """How this release's own type functions behave where releases differ: ``parse_type(json.loads)``
    reading ``a=1,b=2`` (``nullable_kvs``, 0.8.5 - 0.9.2), ``union_dict_and_str``'s test for a JSON object."""
    member = "vllm/engine/arg_utils.py"
    out: dict[str, Any] = {}
    if not src.has(member):
        return out
    for node in src.tree(member).body:
        if isinstance(node, ast.FunctionDef) and node.name in ("parse_type", "optional_type"):
            if "nullable_kvs" in _src(node):
                out["json_kvs"] = True
        if isinstance(node, ast.FunctionDef) and node.name == "union_dict_and_str":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and _src(sub.func).endswith("match") and sub.args:
                    if isinstance(sub.args[0], ast.Constant):
                        out["dict_or_str_re"] = sub.args[0].value
        if isinstance(node, ast.FunctionDef) and node.name == "_compute_kwargs":
            out["json_hri"] = "_expand_json_human_readable_numbers" in _src(node)
        if isinstance(node, ast.FunctionDef) and node.name == "nullable_kvs":
            out["nullable_kvs"] = f"{member}:{node.lineno}"
    return out


def extract(src: Sources) -> dict[str, Any]:
    """The serve parser of one vLLM release: its options in the order argparse holds them."""
    #: the serving platform the table is for: CUDA (``current_platform`` adds its device to a few choices)
    platform = Namespace(device_type="cuda", device_name="cuda", dispatch_key="CUDA")
    interp = Interpreter(src, "vllm", argv=["vllm", "serve"], env={"current_platform": platform})
    kw = Kwargs(interp)
    interp.hooks.update(GENERIC_HOOKS)
    interp.hooks.update({"get_kwargs": kw, "_compute_kwargs": kw, "optional_type": _optional_type,
                         "parse_type": _parse_type})
    serve_member = "vllm/entrypoints/cli/serve.py"
    serve_cls = interp.lookup(serve_member, "ServeSubcommand")
    if not isinstance(serve_cls, ClassRef):
        raise SystemExit(f"{src.wheel}: no ServeSubcommand in {serve_member}")
    top = Parser({"prog": "vllm"})
    subs = Subparsers(top)
    init = interp.class_attr(serve_cls, "subparser_init", via=Instance(serve_cls))
    if not isinstance(init, FuncRef):
        raise SystemExit(f"{src.wheel}: no ServeSubcommand.subparser_init")
    interp.run(init, [subs], {})
    if not top.subparsers:
        raise SystemExit(f"{src.wheel}: subparser_init added no parser")
    serve = next(iter(top.subparsers.values()))
    entries = [entry(interp, r) for r in serve.arguments]
    features = parser_features(src)
    if features.get("boolean_optional") == "EnableDisableAction":  # 0.33: --enable-x also --disable-x
        for e in entries:
            if e.get("action") == "BooleanOptionalAction":
                e["action"] = "EnableDisableAction"
    return {"options": entries, "log": interp.log, "parser": features,
            "human_readable_int": human_readable(src), "json_types": kw.dataclasses,
            "type_variants": type_variants(src), "platform": "cuda",
            "allow_abbrev": serve.kwargs.get("allow_abbrev", True) is not False,
            "prog": "vllm serve", "top_prog": "vllm"}
