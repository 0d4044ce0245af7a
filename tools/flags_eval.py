"""A small abstract interpreter for the functions a Python engine builds its ``argparse`` parser with.

It runs the statements of ``make_arg_parser`` / ``EngineArgs.add_cli_args`` / ``ServerArgs.add_cli_args`` over
their AST (never the code itself): assignments, ``if`` (an undecidable test takes its body and is logged),
``for`` over known lists and dicts, calls into the package's own functions and methods (``super()`` included),
and the parser's ``add_argument`` / ``add_argument_group`` / ``add_parser`` calls, which it records. Every
value it cannot know is ``Unknown``: a constant, a list of constants or a known type function is all the
table needs. Engine-specific functions (vLLM's ``get_kwargs``, ``optional_type``) are hooks the caller passes.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flags_source import Sources

STDLIB = {"argparse", "json", "sys", "os", "typing", "re", "regex", "dataclasses", "enum", "functools", "itertools",
          "collections", "typing_extensions", "pydantic", "warnings", "copy", "textwrap", "importlib", "logging",
          "contextlib", "inspect", "pathlib", "math", "types", "abc"}


class Unknown:
    """A value the interpreter cannot know (its source text, for the log)."""

    def __init__(self, why: str = "") -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"Unknown({self.why[:60]!r})"


@dataclass(frozen=True)
class ModuleRef:
    name: str            # dotted
    member: str | None   # the package member, None for a module outside the package


@dataclass(frozen=True)
class External:
    """A name from outside the package (``argparse.BooleanOptionalAction``, ``json.loads``)."""

    module: str
    name: str


@dataclass(eq=False)
class ClassRef:
    member: str
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(eq=False)
class FuncRef:
    member: str
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    owner: ClassRef | None = None       # the class the method was found on (for super())
    bound: Any = None                   # cls / self
    closure: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return "<lambda>" if isinstance(self.node, ast.Lambda) else self.node.name


@dataclass(eq=False)
class Instance:
    """An object of a package class (``self`` of a method)."""

    cls: ClassRef


@dataclass(eq=False)
class SuperRef:
    owner: ClassRef
    bound: Any


class Namespace(dict):  # type: ignore[type-arg]
    """A stand-in object whose attributes are known (``current_platform.device_type``)."""


@dataclass(frozen=True)
class EnumMember:
    name: str
    value: Any


@dataclass(frozen=True)
class TypeSpec:
    """A parser ``type=``: ``int``, ``optional(json.loads)``, ``lambda:<source>``, ``func:<name>``."""

    spec: str


@dataclass(frozen=True)
class ActionSpec:
    """A parser ``action=``: ``store_true``, ``BooleanOptionalAction``, or a class the package defines."""

    name: str


@dataclass(frozen=True)
class Opaque:
    """A value that is not a literal (a config object as a default): its source text."""

    src: str


@dataclass
class Recorded:
    """One ``add_argument`` call as the parser receives it."""

    names: list[str]
    kwargs: dict[str, Any]
    member: str
    line: int


@dataclass(eq=False)
class Parser:
    """What ``argparse.ArgumentParser`` / ``add_parser`` made: the arguments in the order added."""

    kwargs: dict[str, Any]
    arguments: list[Recorded] = field(default_factory=list)
    subparsers: dict[str, Parser] = field(default_factory=dict)


@dataclass(eq=False)
class Group:
    parser: Parser


@dataclass(eq=False)
class Subparsers:
    parser: Parser


@dataclass(eq=False)
class Bound:
    """``obj.method`` on a value of the interpreter (a parser, a list, a dict, a string)."""

    obj: Any
    name: str


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


SAFE_BUILTINS: dict[str, Callable[..., Any]] = {
    n: getattr(builtins, n) for n in ("sorted", "list", "tuple", "set", "dict", "len", "str", "int", "float", "bool",
                                       "min", "max", "sum", "any", "all", "reversed", "enumerate", "zip", "range",
                                       "frozenset", "isinstance", "repr")
}
STR_METHODS = {"replace", "lower", "upper", "strip", "lstrip", "rstrip", "split", "join", "startswith", "endswith",
               "removeprefix", "removesuffix", "format", "title", "capitalize"}
LIST_METHODS = {"append", "extend", "remove", "insert", "index", "count", "copy", "pop"}
DICT_METHODS = {"get", "items", "keys", "values", "pop", "update", "copy", "setdefault"}
TYPE_NAMES = {"int", "float", "str", "bool", "bytes", "complex"}


def _known(v: Any) -> bool:
    """A constant all the way down."""
    if isinstance(v, Namespace):
        return False
    if isinstance(v, (Unknown, FuncRef, ClassRef, ModuleRef, External, Parser, Group, Subparsers, Bound, SuperRef,
                      Instance, TypeSpec, ActionSpec, Opaque)):
        return False
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(_known(x) for x in v)
    if isinstance(v, dict):
        return all(_known(k) and _known(x) for k, x in v.items())
    return True


class Interpreter:
    """Evaluates the package's parser-building functions over their AST (see the module docstring)."""

    def __init__(self, src: Sources, package: str, hooks: dict[str, Callable[..., Any]] | None = None,
                 argv: list[str] | None = None, env: dict[str, Any] | None = None) -> None:
        self.src = src
        self.package = package
        self.hooks = hooks or {}
        self.argv = argv or [package, "serve"]
        self.env = env or {}
        self.log: list[str] = []
        self._scope_cache: dict[tuple[str, str], Any] = {}
        self._depth = 0
        self._steps = 0
        self.member = ""  # the member of the call being evaluated (for hooks that read their AST)

    # -- names --------------------------------------------------------------------------------------------------
    def module_ref(self, dotted: str) -> ModuleRef:
        return ModuleRef(dotted, self.src.module_file(dotted) if dotted.split(".")[0] == self.package else None)

    def _resolve_from(self, member: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        pkg = Sources.module_of(member).split(".")
        if not member.endswith("__init__.py"):
            pkg = pkg[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
        return ".".join(pkg + ([node.module] if node.module else []))

    def bindings(self, member: str, body: list[ast.stmt]) -> dict[str, ast.AST]:
        """The top-level names a module (or class) body binds, the last binding winning; ``if`` / ``try``
        bodies included (not their ``except`` handlers)."""
        out: dict[str, ast.AST] = {}

        def walk(stmts: list[ast.stmt]) -> None:
            for st in stmts:
                if isinstance(st, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[st.name] = st
                elif isinstance(st, ast.Assign):
                    for t in st.targets:
                        if isinstance(t, ast.Name):
                            out[t.id] = st
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    out[st.target.id] = st
                elif isinstance(st, (ast.ImportFrom, ast.Import)):
                    for a in st.names:
                        name = a.asname or a.name.split(".")[0]
                        if name != "*":
                            out[name] = st
                elif isinstance(st, ast.If):
                    walk(st.body)
                    walk(st.orelse)
                elif isinstance(st, ast.Try):
                    walk(st.body)
                    walk(st.orelse)
                elif isinstance(st, ast.With):
                    walk(st.body)

        walk(body)
        return out

    def lookup(self, member: str, name: str, _seen: frozenset[tuple[str, str]] = frozenset()) -> Any:
        """The value ``name`` has at the top level of ``member``."""
        key = (member, name)
        if key in self._scope_cache:
            return self._scope_cache[key]
        if key in _seen:
            return Unknown(f"import cycle {member}:{name}")
        seen = _seen | {key}
        tree = self.src.tree(member)
        node = self.bindings(member, tree.body).get(name)
        value: Any
        if node is None:
            value = SAFE_BUILTINS.get(name, Unknown(f"{name} not found in {member}"))
            if name in ("None", "True", "False"):
                value = {"None": None, "True": True, "False": False}[name]
            if isinstance(value, Unknown):
                for st in tree.body:  # from x import *
                    if isinstance(st, ast.ImportFrom) and any(a.name == "*" for a in st.names):
                        target = self.module_ref(self._resolve_from(member, st))
                        if target.member:
                            got = self.lookup(target.member, name, seen)
                            if not isinstance(got, Unknown):
                                value = got
                                break
        elif isinstance(node, ast.ClassDef):
            value = ClassRef(member, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            value = FuncRef(member, node)
        elif isinstance(node, ast.ImportFrom):
            mod = self._resolve_from(member, node)
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            value = self.import_name(mod, alias.name, seen)
        elif isinstance(node, ast.Import):
            alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
            value = self.module_ref(alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = Unknown(f"{name} unassigned") if node.value is None else self.eval(node.value, {}, member)
        else:  # pragma: no cover
            value = Unknown(name)
        self._scope_cache[key] = value
        return value

    def import_name(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Any:
        ref = self.module_ref(module)
        if ref.member is None:
            if module.split(".")[0] == self.package:
                sub = self.module_ref(f"{module}.{name}")
                return sub if sub.member else Unknown(f"{module}.{name} absent")
            return External(module, name)
        value = self.lookup(ref.member, name, seen)
        if isinstance(value, Unknown):
            sub = self.module_ref(f"{module}.{name}")
            if sub.member:
                return sub
        return value

    def class_attr(self, cls: ClassRef, name: str, via: Any = None) -> Any:
        """``Cls.name`` (or ``obj.name`` with ``via`` the object): a method (by the MRO), a class-level value
        (a dataclass field's default)."""
        for c in self.mro(cls):
            node = self.bindings(c.member, c.node.body).get(name)
            if node is None:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decos = {ast.unparse(d) for d in node.decorator_list}
                bound: Any = cls if "classmethod" in decos else (
                    None if "staticmethod" in decos else via)
                return FuncRef(c.member, node, owner=c, bound=bound)
            if isinstance(node, ast.ClassDef):
                return ClassRef(c.member, node)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("field", "Field"):
                    for k in value.keywords:
                        if k.arg == "default":
                            return self.eval(k.value, {}, c.member)
                    return Unknown(f"{cls.name}.{name} has a default_factory")
                got = self.eval(value, self.class_scope(c, node), c.member)
                if got == {} and isinstance(self.class_attr(cls, "register_module"), FuncRef):
                    return dict.fromkeys(self.registry(c))
                return got
        if name == "__name__":
            return cls.name
        return Unknown(f"{cls.name}.{name}")

    def class_scope(self, cls: ClassRef, upto: ast.AST) -> dict[str, Any]:
        """The names a class body has bound before ``upto`` (``ALL = (FULL, BREAKABLE)`` reads ``FULL``)."""
        env: dict[str, Any] = {}
        for st in cls.node.body:
            if st is upto:
                break
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                env[st.targets[0].id] = self.eval(st.value, dict(env), cls.member)
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                env[st.target.id] = self.eval(st.value, dict(env), cls.member)
        return env

    def registry(self, manager: ClassRef) -> list[str]:
        """The names a ``register_module`` registry holds once its package is imported: each
        ``@Manager.register_module("name")`` of the modules the package's ``__init__`` imports, in that
        order (vLLM's reasoning and tool-call parsers)."""
        pkg = manager.member.rsplit("/", 1)[0]
        init = f"{pkg}/__init__.py"
        if not self.src.has(init):
            return []
        names: list[str] = []
        seen: set[str] = set()
        for st in self.src.tree(init).body:
            if not isinstance(st, ast.ImportFrom):
                continue
            mod = self.module_ref(self._resolve_from(init, st))
            if mod.member is None or mod.member in seen:
                continue
            seen.add(mod.member)
            for node in self.src.tree(mod.member).body:
                if not isinstance(node, ast.ClassDef):
                    continue
                for d in reversed(node.decorator_list):  # stacked decorators apply from the bottom
                    if isinstance(d, ast.Call) and ast.unparse(d.func).endswith(f"{manager.name}.register_module"):
                        arg = d.args[0] if d.args else next((k.value for k in d.keywords if k.arg == "name"), None)
                        value = self.eval(arg, {}, mod.member) if arg is not None else node.name
                        names.extend(value if isinstance(value, (list, tuple)) else [value])
        return [n for n in names if isinstance(n, str)]

    def bases(self, cls: ClassRef) -> list[Any]:
        return [self.eval(b, {}, cls.member) for b in cls.node.bases]

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        out: list[ClassRef] = []

        def visit(c: ClassRef) -> None:
            if any(c.node is o.node for o in out):
                return
            out.append(c)
            for b in self.bases(c):
                if isinstance(b, ClassRef):
                    visit(b)

        visit(cls)
        return out

    # -- expressions ------------------------------------------------------------------------------------------
    def eval(self, node: ast.expr, env: dict[str, Any], member: str) -> Any:
        try:
            return self._eval(node, env, member)
        except (_Return, _Break, _Continue):
            raise
        except RecursionError:
            return Unknown("recursion")
        except Exception as e:  # a constant operation that fails at run time: not a value
            return Unknown(f"{ast.unparse(node)[:80]}: {type(e).__name__}")

    def _name(self, name: str, env: dict[str, Any], member: str) -> Any:
        if name in env:
            return env[name]
        if name in self.env:
            return self.env[name]
        return self.lookup(member, name)

    def enum_members(self, cls: ClassRef) -> list[EnumMember] | None:
        """The members of an ``Enum`` class, in definition order (None: not an Enum)."""
        if not any(ast.unparse(b).split(".")[-1].endswith("Enum") for b in cls.node.bases):
            return None
        out = []
        for st in cls.node.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and not st.targets[0].id.startswith("_"):
                out.append(EnumMember(st.targets[0].id, self.eval(st.value, {}, cls.member)))
        return out

    def _eval(self, node: ast.expr, env: dict[str, Any], member: str) -> Any:  # noqa: C901 - one dispatch
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, env, member)
        if isinstance(node, ast.Attribute):
            return self.attr(self._eval(node.value, env, member), node.attr, node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Any] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    v = self._eval(e.value, env, member)
                    if not isinstance(v, (list, tuple, set)):
                        return Unknown(ast.unparse(node))
                    items.extend(v)
                else:
                    items.append(self._eval(e, env, member))
            if isinstance(node, ast.List):
                return items
            if isinstance(node, ast.Tuple):
                return tuple(items)
            return set(items) if all(_known(i) for i in items) else Unknown(ast.unparse(node))
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    inner = self._eval(v, env, member)
                    if not isinstance(inner, dict):
                        return Unknown(ast.unparse(v))
                    out.update(inner)
                else:
                    key = self._eval(k, env, member)
                    if isinstance(key, Unknown):
                        return Unknown(ast.unparse(node))
                    out[key] = self._eval(v, env, member)
            return out
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    x = self._eval(v.value, env, member)
                    if not _known(x) or v.format_spec is not None:
                        return Unknown("f-string")
                    parts.append(repr(x) if v.conversion == ord("r") else str(x))
            return "".join(parts)
        if isinstance(node, ast.BinOp):
            a, b = self._eval(node.left, env, member), self._eval(node.right, env, member)
            if not (_known(a) and _known(b)):
                return Unknown(ast.unparse(node))
            ops: dict[type, Callable[[Any, Any], Any]] = {
                ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
                ast.Pow: lambda x, y: x ** y, ast.BitOr: lambda x, y: x | y, ast.Mod: lambda x, y: x % y,
                ast.FloorDiv: lambda x, y: x // y, ast.Div: lambda x, y: x / y}
            op = ops.get(type(node.op))
            return op(a, b) if op else Unknown(ast.unparse(node))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env, member)
            if isinstance(node.op, ast.Not):
                return Unknown("not ?") if not _known(v) else (not v)
            if isinstance(node.op, ast.USub) and isinstance(v, (int, float)):
                return -v
            return Unknown(ast.unparse(node))
        if isinstance(node, ast.BoolOp):
            vals = [self._eval(v, env, member) for v in node.values]
            if isinstance(node.op, ast.And):
                for v in vals:
                    if _known(v) and not v:
                        return v
                return vals[-1] if all(_known(v) for v in vals) else Unknown(ast.unparse(node))
            for v in vals:
                if _known(v) and v:
                    return v
            return vals[-1] if all(_known(v) for v in vals) else Unknown(ast.unparse(node))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env, member)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comp, env, member)
                if isinstance(op, (ast.Is, ast.IsNot)) and left is not None and right is None \
                        and not isinstance(left, Unknown):
                    ok = isinstance(op, ast.IsNot)
                elif not (_known(left) and _known(right)):
                    return Unknown(ast.unparse(node))
                else:
                    fn = {ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y, ast.In: lambda x, y: x in y,
                          ast.NotIn: lambda x, y: x not in y, ast.Lt: lambda x, y: x < y, ast.LtE: lambda x, y: x <= y,
                          ast.Gt: lambda x, y: x > y, ast.GtE: lambda x, y: x >= y, ast.Is: lambda x, y: x is y,
                          ast.IsNot: lambda x, y: x is not y}[type(op)]
                    ok = fn(left, right)
                if not ok:
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            test = self._eval(node.test, env, member)
            if not _known(test):
                return Unknown(ast.unparse(node))
            return self._eval(node.body if test else node.orelse, env, member)
        if isinstance(node, ast.Subscript):
            base = self._eval(node.value, env, member)
            key = self._eval(node.slice, env, member)
            if isinstance(base, (dict, list, tuple, str)) and _known(key):
                try:
                    return base[key]
                except (KeyError, IndexError, TypeError):
                    return Unknown(ast.unparse(node))
            return Unknown(ast.unparse(node))
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self._eval(p, env, member) for p in (node.lower, node.upper, node.step)]
            return slice(*parts) if all(_known(p) for p in parts) else Unknown("slice")
        if isinstance(node, ast.Lambda):
            return FuncRef(member, node, closure=dict(env))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._comp(node, env, member)
        if isinstance(node, ast.Call):
            return self.call(node, env, member)
        if isinstance(node, ast.Starred):
            return self._eval(node.value, env, member)
        return Unknown(ast.unparse(node)[:80])

    def _comp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, env: dict[str, Any],
              member: str) -> Any:
        results: list[Any] = []

        def run(i: int, scope: dict[str, Any]) -> bool:
            if i == len(node.generators):
                results.append(self._eval(node.elt, scope, member))
                return True
            gen = node.generators[i]
            it = self._eval(gen.iter, scope, member)
            if isinstance(it, ClassRef):
                it = self.enum_members(it)
            if not isinstance(it, (list, tuple, set, frozenset, dict, str, range)):
                return False
            for x in (sorted(it) if isinstance(it, (set, frozenset)) else it):
                inner = dict(scope)
                if not self.bind(gen.target, x, inner):
                    return False
                if all(self._eval(c, inner, member) is True for c in gen.ifs) and not run(i + 1, inner):
                    return False
            return True

        if not run(0, dict(env)):
            return Unknown(ast.unparse(node)[:80])
        if isinstance(node, ast.SetComp):
            return set(results) if all(_known(r) for r in results) else Unknown("set comp")
        return results

    def bind(self, target: ast.expr, value: Any, env: dict[str, Any]) -> bool:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return True
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (list, tuple)) or len(value) != len(target.elts):
                for t in target.elts:
                    self.bind(t, Unknown("unpack"), env)
                return False
            return all(self.bind(t, v, env) for t, v in zip(target.elts, value, strict=True))
        return False

    def attr(self, base: Any, name: str, node: ast.AST) -> Any:
        if isinstance(base, ModuleRef):
            if base.member is None:
                if base.name == "sys" and name == "argv":
                    return list(self.argv)
                if base.name == "sys" and name == "modules":
                    return {}  # nothing of the engine is imported yet when its parser is built
                if base.name == "argparse" and name == "SUPPRESS":
                    return "==SUPPRESS=="
                return External(base.name, name)
            return self.import_name(base.name, name)
        if isinstance(base, External):
            if base.module == "sys" and base.name == "argv":
                return Unknown("sys.argv attribute")
            if base.name in self.env:
                return self.env[base.name].get(name, Unknown(f"{base.name}.{name}")) \
                    if isinstance(self.env[base.name], dict) else Unknown(f"{base.name}.{name}")
            return External(f"{base.module}.{base.name}", name)
        if isinstance(base, ClassRef):
            return self.class_attr(base, name)
        if isinstance(base, Instance):
            return self.class_attr(base.cls, name, via=base)
        if isinstance(base, SuperRef):
            start = base.bound if isinstance(base.bound, ClassRef) else (
                base.bound.cls if isinstance(base.bound, Instance) else base.owner)
            chain = self.mro(start)
            idx = next((i for i, c in enumerate(chain) if c.node is base.owner.node), -1)
            for c in chain[idx + 1:]:
                got = self.class_attr(c, name, via=base.bound)
                if isinstance(got, FuncRef) and got.owner is not None and got.owner.node is c.node:
                    return got
            return Unknown(f"super().{name}")
        if isinstance(base, (Parser, Group, Subparsers)):
            return Bound(base, name)
        if isinstance(base, Namespace):
            return base.get(name, Unknown(f"namespace.{name}"))
        if isinstance(base, EnumMember):
            return base.value if name == "value" else (base.name if name == "name" else Unknown(name))
        if isinstance(base, str) and name in STR_METHODS:
            return Bound(base, name)
        if isinstance(base, list) and name in LIST_METHODS:
            return Bound(base, name)
        if isinstance(base, dict) and name in DICT_METHODS:
            return Bound(base, name)
        return Unknown(f"{type(base).__name__}.{name}")

    def call(self, node: ast.Call, env: dict[str, Any], member: str) -> Any:
        self.member = member
        if isinstance(node.func, ast.Name) and node.func.id == "super" and "__class__" in env:
            return SuperRef(env["__class__"], env.get("__bound__"))
        func = self._eval(node.func, env, member)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self._eval(a.value, env, member)
                if isinstance(v, (list, tuple)):
                    args.extend(v)
                else:
                    args.append(Unknown(f"*{ast.unparse(a.value)}"))
            else:
                args.append(self._eval(a, env, member))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            v = self._eval(k.value, env, member)
            if k.arg is None:
                if isinstance(v, dict):
                    kwargs.update(v)
                else:
                    kwargs["**"] = Unknown(ast.unparse(k.value))
            else:
                kwargs[k.arg] = v
        return self.apply(func, args, kwargs, node, member)

    def apply(self, func: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call, member: str) -> Any:
        if isinstance(func, Bound):
            return self.method(func, args, kwargs, node, member)
        if isinstance(func, FuncRef) and func.name in self.hooks:
            return self.hooks[func.name](self, func, args, kwargs, node)
        if isinstance(func, External):
            qual = f"{func.module}.{func.name}"
            if qual in self.hooks:
                return self.hooks[qual](self, func, args, kwargs, node)
            if func.name in ("ArgumentParser",) or qual.endswith("FlexibleArgumentParser"):
                return Parser(dict(kwargs))
            if func.name == "super":
                return Unknown("super")
            return Unknown(qual)
        if isinstance(func, ClassRef):
            if func.name.endswith("ArgumentParser"):
                return Parser(dict(kwargs))
            if func.name in self.hooks:
                return self.hooks[func.name](self, func, args, kwargs, node)
            return Opaque(f"{func.name}()")
        if isinstance(func, FuncRef):
            return self.run(func, args, kwargs)
        if callable(func) and func in (list, tuple, sorted, set) and len(args) == 1 and isinstance(args[0], ClassRef):
            members = self.enum_members(args[0])
            if members is not None:
                args = [members]
        if callable(func) and func in SAFE_BUILTINS.values():
            if func is builtins.super:  # pragma: no cover - super is handled in run()
                return Unknown("super")
            if all(_known(a) for a in args) and all(_known(v) for v in kwargs.values()):
                try:
                    return func(*args, **kwargs)
                except Exception:
                    return Unknown(f"{func.__name__}(...)")
        return Unknown(ast.unparse(node.func)[:80])

    def method(self, b: Bound, args: list[Any], kwargs: dict[str, Any], node: ast.Call, member: str) -> Any:
        obj, name = b.obj, b.name
        if isinstance(obj, (Parser, Group)):
            parser = obj if isinstance(obj, Parser) else obj.parser
            if name == "add_argument":
                names = [a for a in args if isinstance(a, str)]
                if any(not isinstance(a, str) for a in args):
                    self.log.append(f"{member}:{node.lineno}: add_argument with an unknown name: {args}")
                parser.arguments.append(Recorded(names, kwargs, member, node.lineno))
                return Unknown("action")
            if name in ("add_argument_group", "add_mutually_exclusive_group"):
                return Group(parser)
            if name == "add_subparsers":
                return Subparsers(parser)
            if name == "set_defaults":
                return None
            return Unknown(f"parser.{name}")
        if isinstance(obj, Subparsers):
            if name == "add_parser":
                sub = Parser(dict(kwargs))
                name = args[0] if args and isinstance(args[0], str) else f"#{len(obj.parser.subparsers)}"
                obj.parser.subparsers[name] = sub
                return sub
            return Unknown(f"subparsers.{name}")
        if not all(_known(a) for a in args) or not all(_known(v) for v in kwargs.values()):
            if isinstance(obj, list) and name == "remove":
                return None
            if isinstance(obj, dict) and name in ("pop", "get") and args and isinstance(args[0], str):
                fallback = args[1] if len(args) > 1 else None
                return obj.pop(args[0], fallback) if name == "pop" else obj.get(args[0], fallback)
            if isinstance(obj, dict) and name == "update" and args and isinstance(args[0], dict):
                obj.update(args[0])
                return None
            if isinstance(obj, list) and name in ("append", "extend"):
                getattr(obj, name)(*args)
                return None
            return Unknown(f"{name}(?)")
        try:
            return getattr(obj, name)(*args, **kwargs)
        except Exception:
            return Unknown(f"{name}(...)")

    # -- statements -------------------------------------------------------------------------------------------
    def run(self, func: FuncRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call ``func`` (a function, method or lambda of the package) with these values."""
        if self._depth > 14:
            return Unknown(f"too deep: {func.name}")
        node = func.node
        env: dict[str, Any] = dict(func.closure or {})
        params = node.args
        positional = [*params.posonlyargs, *params.args]
        values = list(args)
        if func.bound is not None and positional:
            env[positional[0].arg] = func.bound
            positional = positional[1:]
        with_default = [p.arg for p in positional][len(positional) - len(params.defaults):]
        defaults = dict(zip(with_default, params.defaults, strict=True))
        for p, d in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            if d is not None:
                defaults[p.arg] = d
        for p in positional:
            if values:
                env[p.arg] = values.pop(0)
            elif p.arg in kwargs:
                env[p.arg] = kwargs.pop(p.arg)
            elif p.arg in defaults:
                env[p.arg] = self.eval(defaults[p.arg], {}, func.member)
            else:
                env[p.arg] = Unknown(f"argument {p.arg}")
        for p in params.kwonlyargs:
            env[p.arg] = kwargs.pop(p.arg) if p.arg in kwargs else (
                self.eval(defaults[p.arg], {}, func.member) if p.arg in defaults else Unknown(p.arg))
        if params.vararg:
            env[params.vararg.arg] = tuple(values)
        if params.kwarg:
            env[params.kwarg.arg] = dict(kwargs)
        if func.owner is not None:
            env["__class__"] = func.owner
            env["__bound__"] = func.bound
        if isinstance(node, ast.Lambda):
            return self.eval(node.body, env, func.member)
        self._depth += 1
        try:
            self.exec_block(node.body, env, func)
        except _Return as r:
            return r.value
        finally:
            self._depth -= 1
        return None

    def exec_block(self, body: list[ast.stmt], env: dict[str, Any], func: FuncRef) -> None:
        for st in body:
            self.exec(st, env, func)

    def exec(self, st: ast.stmt, env: dict[str, Any], func: FuncRef) -> None:  # noqa: C901 - one dispatch
        self._steps += 1
        member = func.member
        if isinstance(st, ast.Expr):
            if isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "super().__init__":
                return
            self.eval(st.value, env, member)
        elif isinstance(st, ast.Assign):
            value = self.eval(st.value, env, member)
            for t in st.targets:
                self.assign(t, value, env, member)
        elif isinstance(st, ast.AnnAssign):
            if st.value is not None:
                self.assign(st.target, self.eval(st.value, env, member), env, member)
        elif isinstance(st, ast.AugAssign):
            cur = self.eval(st.target, env, member)
            add = self.eval(st.value, env, member)
            if isinstance(st.op, ast.Add) and isinstance(cur, list) and isinstance(add, (list, tuple)):
                cur.extend(add)  # in place, like list.__iadd__
            elif _known(cur) and _known(add) and isinstance(st.op, ast.Add):
                self.assign(st.target, cur + add, env, member)
            elif isinstance(st.target, ast.Subscript) and isinstance(st.target.slice, ast.Constant) \
                    and st.target.slice.value == "help":
                pass  # help texts are not kept
            else:
                self.assign(st.target, Unknown(f"augmented {ast.unparse(st)[:60]}"), env, member)
        elif isinstance(st, ast.Return):
            raise _Return(None if st.value is None else self.eval(st.value, env, member))
        elif isinstance(st, ast.If):
            test = self.eval(st.test, env, member)
            if _known(test):
                self.exec_block(st.body if test else st.orelse, env, func)
            else:
                self.log.append(f"{member}:{st.lineno}: if {ast.unparse(st.test)[:100]}: undecided, body taken")
                self.exec_block(st.body, env, func)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            it = self.eval(st.iter, env, member)
            if isinstance(it, ClassRef):
                it = self.enum_members(it)
            if isinstance(it, (list, tuple, str, range)) or (hasattr(it, "__iter__") and not isinstance(it, dict)
                                                             and not isinstance(it, (Parser, Unknown))):
                try:
                    for x in list(it):
                        self.bind(st.target, x, env)
                        try:
                            self.exec_block(st.body, env, func)
                        except _Continue:
                            continue
                except _Break:
                    pass
            elif isinstance(it, dict):
                for x in list(it):
                    self.bind(st.target, x, env)
                    self.exec_block(st.body, env, func)
            else:
                self.log.append(f"{member}:{st.lineno}: for over {ast.unparse(st.iter)[:80]}: unknown, skipped")
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            self.exec_block(st.body, env, func)
        elif isinstance(st, ast.Try):
            self.exec_block(st.body, env, func)
            self.exec_block(st.orelse, env, func)
            self.exec_block(st.finalbody, env, func)
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[st.name] = FuncRef(member, st, closure=env)
        elif isinstance(st, ast.ImportFrom):
            mod = self._resolve_from(member, st)
            for a in st.names:
                env[a.asname or a.name] = self.import_name(mod, a.name)
        elif isinstance(st, ast.Import):
            for a in st.names:
                env[a.asname or a.name.split(".")[0]] = self.module_ref(a.name if a.asname else a.name.split(".")[0])
        elif isinstance(st, ast.Delete):
            for t in st.targets:
                if isinstance(t, ast.Subscript):
                    base = self.eval(t.value, env, member)
                    key = self.eval(t.slice, env, member)
                    if isinstance(base, dict) and _known(key):
                        base.pop(key, None)
        elif isinstance(st, ast.Break):
            raise _Break()
        elif isinstance(st, ast.Continue):
            raise _Continue()
        # Pass, Raise, Assert, Global: nothing the table needs

    def assign(self, target: ast.expr, value: Any, env: dict[str, Any], member: str) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.bind(target, value, env)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, env, member)
            key = self.eval(target.slice, env, member)
            if isinstance(base, dict) and _known(key):
                base[key] = value
            elif isinstance(base, list) and isinstance(key, int):
                base[key] = value
        elif isinstance(target, ast.Attribute):
            base = self.eval(target.value, env, member)
            if isinstance(base, Parser):
                base.kwargs[target.attr] = value
