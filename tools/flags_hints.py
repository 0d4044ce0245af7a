"""Type annotations of a package's dataclass fields, resolved from source the way ``typing`` would see them at
run time: ``Optional[X]`` and ``Union`` flattened (``X | Y`` kept apart as ``types.UnionType`` where both sides
are plain classes), ``Literal`` values evaluated, aliases followed through imports, ``Annotated`` kept with its
metadata, and each class known as a dataclass, a ``dict`` subclass, a ``TypedDict`` or an ``Enum``.

What vLLM's ``get_kwargs`` (``engine/arg_utils.py``) reads to choose each flag's ``type``, ``nargs`` and
``choices``; ``flags_vllm.py`` replays that function over these hints.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from flags_eval import ClassRef, External, Interpreter, Unknown

#: typing's generic aliases and what their origin is at run time
TYPING_ORIGINS = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset",
                  "Type": "type", "Sequence": "Sequence", "Mapping": "Mapping", "Iterable": "Iterable",
                  "Callable": "Callable", "MutableMapping": "MutableMapping", "DefaultDict": "defaultdict"}
BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}
BUILTIN_NAMES = {"int", "float", "str", "bool", "bytes", "dict", "list", "tuple", "set", "frozenset", "type",
                 "object", "complex"}


@dataclass(frozen=True)
class H:
    """One type hint: ``kind`` is ``b`` (a builtin class), ``none``, ``lit`` (Literal), ``gen`` (a generic:
    ``name`` its origin, ``typing`` whether written as ``typing.List``), ``union`` (``pep604``: ``X | Y``),
    ``ann`` (Annotated), ``cls`` (a class of the package or elsewhere), ``any``, ``ellipsis`` or ``other``."""

    kind: str
    name: str = ""
    args: tuple[H, ...] = ()
    values: tuple[Any, ...] = ()
    pep604: bool = False
    typing: bool = False
    dataclass: bool = False
    dictsub: bool = False
    typeddict: bool = False
    enum: bool = False
    ref: ClassRef | None = field(default=None, compare=False, hash=False)

    def show(self) -> str:
        if self.kind in ("b", "cls", "other"):
            return self.name
        if self.kind == "none":
            return "None"
        if self.kind == "lit":
            return f"Literal{list(self.values)}"
        if self.kind == "union":
            return " | ".join(a.show() for a in self.args)
        return f"{self.name or self.kind}[{', '.join(a.show() for a in self.args)}]"


NONE = H("none")
ANY = H("any")


def _union(args: list[H], pep604: bool) -> H:
    flat: list[H] = []
    for a in args:
        inner = a.args if a.kind == "union" and (not pep604 or a.pep604) else (a,)
        if a.kind == "union" and not pep604 and a.pep604:
            inner = a.args  # typing.Union flattens a types.UnionType argument too
        for x in inner:
            if x not in flat:
                flat.append(x)
    if len(flat) == 1:
        return flat[0]
    return H("union", args=tuple(flat), pep604=pep604)


class Hints:
    """Resolves annotation ASTs of one package into ``H`` values (cached by node)."""

    def __init__(self, interp: Interpreter) -> None:
        self.interp = interp
        self._class_flags: dict[int, tuple[bool, bool, bool, bool]] = {}

    def binding(self, member: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """Where ``name`` is bound for ``member``, following ``from x import name`` (no evaluation)."""
        if depth > 12:
            return None
        node = self.interp.bindings(member, self.interp.src.tree(member).body).get(name)
        if isinstance(node, ast.ImportFrom):
            mod = self.interp._resolve_from(member, node)
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            ref = self.interp.module_ref(mod)
            if ref.member is None:
                return (mod, node)  # outside the package
            return self.binding(ref.member, alias.name, depth + 1)
        if node is None:
            for st in self.interp.src.tree(member).body:  # from .types import *
                if isinstance(st, ast.ImportFrom) and any(a.name == "*" for a in st.names):
                    ref = self.interp.module_ref(self.interp._resolve_from(member, st))
                    if ref.member is not None:
                        found = self.binding(ref.member, name, depth + 1)
                        if found is not None:
                            return found
            return None
        return (member, node)

    def class_flags(self, cls: ClassRef) -> tuple[bool, bool, bool, bool]:
        """(dataclass, dict subclass, TypedDict, Enum) for a class, its bases included."""
        key = id(cls.node)
        if key in self._class_flags:
            return self._class_flags[key]
        self._class_flags[key] = (False, False, False, False)
        deco = [ast.unparse(d).split("(")[0].split(".")[-1] for d in cls.node.decorator_list]
        dc = any(d in ("dataclass", "config", "pydantic_dataclass") for d in deco)
        if "config" in deco and not self._config_makes_dataclass(cls):
            dc = any(d in ("dataclass", "pydantic_dataclass") for d in deco)
        dictsub = typeddict = enum = False
        for b in cls.node.bases:
            text = ast.unparse(b)
            last = text.split("[")[0].split(".")[-1]
            if last in ("TypedDict",):
                typeddict = True
            elif last in ("dict", "Dict", "defaultdict", "OrderedDict"):
                dictsub = True
            elif last in ("Enum", "IntEnum", "StrEnum"):
                enum = True
            value = self.interp.eval(b, {}, cls.member)
            if isinstance(value, ClassRef):
                bdc, bds, btd, ben = self.class_flags(value)
                dc, dictsub, typeddict, enum = dc or bdc, dictsub or bds, typeddict or btd, enum or ben
        flags = (dc, dictsub and not typeddict, typeddict, enum)
        self._class_flags[key] = flags
        return flags

    def _config_makes_dataclass(self, cls: ClassRef) -> bool:
        """Whether the release's ``@config`` decorator itself makes a (pydantic) dataclass."""
        for d in cls.node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            value = self.interp.eval(target, {}, cls.member)
            node = getattr(value, "node", None)
            if isinstance(node, ast.FunctionDef):
                return "dataclass(" in ast.unparse(node)
        return False

    def of(self, member: str, node: ast.expr | None) -> H:  # noqa: C901 - one dispatch over annotation forms
        if node is None:
            return ANY
        if isinstance(node, ast.Constant):
            if node.value is None:
                return NONE
            if isinstance(node.value, str):
                try:
                    return self.of(member, ast.parse(node.value, mode="eval").body)
                except SyntaxError:
                    return H("other", name=node.value)
            if node.value is Ellipsis:
                return H("ellipsis")
            return H("other", name=repr(node.value))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            left, right = self.of(member, node.left), self.of(member, node.right)
            plain = all(self._plain(x) for x in (left, right))
            return _union([left, right], pep604=plain)
        if isinstance(node, (ast.Name, ast.Attribute)):
            return self._named(member, node)
        if isinstance(node, ast.Subscript):
            return self._subscript(member, node)
        return H("other", name=ast.unparse(node))

    @staticmethod
    def _plain(h: H) -> bool:
        """``types.UnionType`` arises only from ``|`` between classes, builtin generics and None."""
        return h.kind in ("b", "cls", "none") or (h.kind == "gen" and not h.typing) or (h.kind == "union" and h.pep604)

    def _named(self, member: str, node: ast.Name | ast.Attribute) -> H:
        text = ast.unparse(node)
        last = text.split(".")[-1]
        if isinstance(node, ast.Name):
            if node.id in BUILTIN_NAMES and self.binding(member, node.id) is None:
                return H("b", name=node.id)
            found = self.binding(member, node.id)
        else:
            base = self.interp.eval(node.value, {}, member)
            if isinstance(base, External) or (hasattr(base, "member") and getattr(base, "member", 1) is None):
                found = None
            elif hasattr(base, "member") and isinstance(base.member, str) and not isinstance(base,
                                                                                                       ClassRef):
                found = self.binding(base.member, last)
            else:
                found = None
        if found is None:
            if last == "Any":
                return ANY
            if last in ("NoneType",):
                return NONE
            if last in BUILTIN_NAMES:
                return H("b", name=last)
            return H("other", name=text)
        where, bnode = found
        if isinstance(bnode, ast.ImportFrom):  # outside the package
            if last == "Any":
                return ANY
            if last in TYPING_ORIGINS:
                return H("gen", name=TYPING_ORIGINS[last], typing=True)
            return H("cls", name=f"{where}.{last}")
        if isinstance(bnode, ast.ClassDef):
            ref = ClassRef(where, bnode)
            dc, ds, td, en = self.class_flags(ref)
            return H("cls", name=bnode.name, dataclass=dc, dictsub=ds, typeddict=td, enum=en, ref=ref)
        if isinstance(bnode, (ast.Assign, ast.AnnAssign)) and bnode.value is not None:
            value = bnode.value
            if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("NewType", "TypeVar"):
                if ast.unparse(value.func).endswith("NewType") and len(value.args) > 1:
                    return self.of(where, value.args[1])
                return ANY
            if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "TypeAliasType":
                return self.of(where, value.args[1])
            return self.of(where, value)
        if isinstance(bnode, ast.Import):
            return H("other", name=text)
        return H("other", name=text)

    def _origin_name(self, member: str, node: ast.expr) -> str:
        """The generic's name behind a subscripted annotation: ``Optional``, ``list``, ``Literal``..."""
        text = ast.unparse(node)
        last = text.split(".")[-1]
        if isinstance(node, ast.Name):
            found = self.binding(member, node.id)
            if found is not None and isinstance(found[1], (ast.Assign, ast.AnnAssign)):
                return f"alias:{found[0]}:{node.id}"
            if found is not None and isinstance(found[1], ast.ClassDef):
                return f"class:{node.id}"
        return last

    def _subscript(self, member: str, node: ast.Subscript) -> H:
        origin = self._origin_name(member, node.value)
        elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if origin == "Optional":
            return _union([self.of(member, elts[0]), NONE], pep604=False)
        if origin == "Union":
            return _union([self.of(member, e) for e in elts], pep604=False)
        if origin == "Literal":
            values: list[Any] = []
            for e in elts:
                v = self.interp.eval(e, {}, member)
                if isinstance(v, tuple):
                    values.extend(v)
                elif isinstance(e, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(v, Unknown):
                    inner = self.of(member, e)
                    values.extend(inner.values if inner.kind == "lit" else [])
                else:
                    values.append(v)
            return H("lit", values=tuple(dict.fromkeys(values)))
        if origin in ("Annotated", "SkipValidation"):
            inner = self.of(member, elts[0])
            return H("ann", name="Annotated", args=(inner,), values=tuple(ast.unparse(e) for e in elts[1:]))
        if origin in ("ClassVar", "InitVar", "Final", "Required", "NotRequired"):
            return H("gen", name=origin, args=(self.of(member, elts[0]),), typing=True)
        if origin in BUILTIN_GENERICS:
            return H("gen", name=origin, args=tuple(self.of(member, e) for e in elts))
        if origin in TYPING_ORIGINS:
            return H("gen", name=TYPING_ORIGINS[origin], args=tuple(self.of(member, e) for e in elts), typing=True)
        if origin.startswith("alias:"):
            return self.of(member, node.value)  # a generic alias used with parameters: its own shape
        if origin.startswith("class:"):
            return self._named(member, node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else ANY
        return H("other", name=ast.unparse(node))


def get_args_hook(interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
    """``typing.get_args(SomeLiteral)``: the Literal's values, read from its annotation."""
    if not node.args:
        return Unknown("get_args()")
    h = Hints(interp).of(interp.member, node.args[0])
    if h.kind == "lit":
        return tuple(h.values)
    return Unknown(f"get_args({ast.unparse(node.args[0])})")


def permutations_hook(interp: Interpreter, func: Any, args: list[Any], kwargs: dict[str, Any],
                      node: ast.Call) -> Any:
    import itertools

    if args and isinstance(args[0], (list, tuple)) and all(isinstance(v, int) for v in kwargs.values()):
        return list(itertools.permutations(args[0], *args[1:], **kwargs))
    return Unknown("permutations")


GENERIC_HOOKS = {"typing.get_args": get_args_hook, "typing_extensions.get_args": get_args_hook,
                 "itertools.permutations": permutations_hook}
