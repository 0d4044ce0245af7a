#!/usr/bin/env python3
"""Extract per-release engine facts (model architectures, quantization and attention capability gates, the
engine's own error texts) from a released vLLM or SGLang wheel, and write them as a versioned JSON data file
that pytest-gpulayout ships.

    python tools/engine_facts.py vllm 0.33.0 [--wheel PATH] [--out DIR]
    python tools/engine_facts.py sglang 0.5.23

Without ``--wheel`` the wheel is fetched with ``pip download --no-deps --only-binary=:all:``. The wheel is never
installed nor imported: its members are read with ``zipfile`` and parsed with ``ast``. The only code evaluated is
(a) literal registry tables through a whitelist of AST node types, with no builtins, and (b) small capability
predicates (``supports_compute_capability``, ``get_min_capability``...) through a tiny interpreter that knows
only comparisons, booleans, ``DeviceCapability`` and the CUDA platform predicates; anything else is recorded as
source text with ``"literal": false``/``"evaluable": false``.

Every fact carries the wheel member it was read from (``file``). Message ``template`` values are the engine's
f-string sources with the literal text kept verbatim and each interpolation left as ``{expression}``.

The output is ``json.dumps(..., sort_keys=True, indent=1)``, so a new release is a re-run plus a review of the
diff against the previous release's file.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import operator
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_requires  # noqa: E402

EXTRACTED_BY = "tools/engine_facts.py"
SCHEMA = 1
REPO_ROOT = Path(__file__).resolve().parent.parent

#: CUDA compute capabilities a capability predicate is evaluated against.
KNOWN_CUDA_CAPABILITIES: list[tuple[int, int]] = [
    (6, 0), (6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0),
    (12, 1),
]  # fmt: skip

#: words that make a refusal a compute-capability refusal
CAPABILITY_WORDS = re.compile(
    r"capabilit|\bis_sm\d|_sm\d{2,3}|\bsm_?\d{2,3}|\bSM\s?\d{2,3}|Hopper|Blackwell|Ampere|Volta|Turing|Lovelace"
    r"|\bmajor\b|\bminor\b|device_capability|is_device_capability|has_device_capability|\bsm\d{2,3}",
)


# ----------------------------------------------------------------------------------------------------------------
# wheel access


class Wheel:
    """Read-only view of a wheel's Python sources, with cached ASTs and symbol resolution: a ``.whl`` file, or
    the folder it was unpacked into (its ``.wheel`` file, when there, names the wheel)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._trees: dict[str, ast.Module] = {}
        if self.path.is_dir():
            self.zf: zipfile.ZipFile | None = None
            self.names = {p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if p.is_file()}
        else:
            self.zf = zipfile.ZipFile(self.path)
            self.names = set(self.zf.namelist())

    def info(self) -> dict[str, str]:
        digest = hashlib.sha256()
        if self.zf is None:
            # an unpacked wheel: the wheel's name, and a digest of the Python sources read from it
            for name in sorted(n for n in self.names if n.endswith(".py")):
                digest.update(name.encode() + b"\0" + (self.path / name).read_bytes())
            marker = self.path / ".wheel"
            filename = marker.read_text().strip() if marker.exists() else self.path.name
            return {"filename": filename, "sources_sha256": digest.hexdigest()}
        with open(self.path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return {"filename": self.path.name, "sha256": digest.hexdigest()}

    def has(self, member: str) -> bool:
        return member in self.names

    def text(self, member: str) -> str:
        if self.zf is None:
            return (self.path / member).read_text(encoding="utf-8")
        return self.zf.read(member).decode("utf-8")

    def tree(self, member: str) -> ast.Module:
        if member not in self._trees:
            self._trees[member] = ast.parse(self.text(member), filename=member)
        return self._trees[member]

    def files(self, prefix: str, recursive: bool = True) -> list[str]:
        out = []
        for name in self.names:
            if not name.startswith(prefix) or not name.endswith(".py"):
                continue
            if not recursive and "/" in name[len(prefix) :]:
                continue
            out.append(name)
        return sorted(out)

    def first(self, *members: str) -> str | None:
        for member in members:
            if member in self.names:
                return member
        return None

    # -- modules and names ---------------------------------------------------------------------------------------

    def module_file(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        return self.first(base + ".py", base + "/__init__.py")

    @staticmethod
    def package_of(member: str) -> str:
        parts = member[:-3].split("/")
        if parts[-1] == "__init__":
            return ".".join(parts[:-1])
        return ".".join(parts[:-1])

    def absolute_module(self, member: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        pkg = self.package_of(member).split(".")
        if node.level > 1:
            pkg = pkg[: len(pkg) - (node.level - 1)]
        return ".".join(pkg + ([node.module] if node.module else []))

    def resolve_class(
        self, member: str, name: str, scope: ast.AST | None = None, depth: int = 0
    ) -> tuple[str, ast.ClassDef] | None:
        """Find the ClassDef a name refers to in ``member`` (following imports, re-exports and ``A = B``)."""
        if depth > 12 or member not in self.names:
            return None
        tree = self.tree(member)
        scopes: list[ast.AST] = ([scope] if scope is not None else []) + [tree]
        for sc in scopes:
            body_nodes = list(_module_level(sc)) if sc is tree else list(ast.walk(sc))
            for node in body_nodes:
                if isinstance(node, ast.ClassDef) and node.name == name and sc is tree:
                    return member, node
            for node in body_nodes:
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if (alias.asname or alias.name) == name:
                            target = self.module_file(self.absolute_module(member, node))
                            if target is not None:
                                found = self.resolve_class(target, alias.name, depth=depth + 1)
                                if found:
                                    return found
                elif isinstance(node, ast.Assign) and sc is tree:
                    if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                        if isinstance(node.value, ast.Name) and node.value.id != name:
                            return self.resolve_class(member, node.value.id, depth=depth + 1)
        return None

    def resolve_path(self, dotted: str) -> tuple[str, ast.ClassDef] | None:
        """``package.module.Class`` -> (member, ClassDef)."""
        module, _, cls = dotted.rpartition(".")
        member = self.module_file(module)
        if member is None:
            return None
        return self.resolve_class(member, cls)

    def find_method(
        self, member: str, cls: ast.ClassDef, method: str, depth: int = 0
    ) -> tuple[str, ast.ClassDef, ast.FunctionDef] | None:
        """Method lookup along the (statically resolvable) bases, depth first, left to right."""
        if depth > 12:
            return None
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == method:
                return member, cls, node  # type: ignore[return-value]
        for base in cls.bases:
            base_name = (
                base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            )
            if base_name is None:
                continue
            found = self.resolve_class(member, base_name)
            if found is None:
                continue
            hit = self.find_method(found[0], found[1], method, depth + 1)
            if hit:
                return hit
        return None

    def find_class_attr(
        self, member: str, cls: ast.ClassDef, attr: str, depth: int = 0
    ) -> tuple[str, str, ast.expr] | None:
        if depth > 12:
            return None
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
                return member, cls.name, node.value
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == attr:
                if node.value is not None:
                    return member, cls.name, node.value
        for base in cls.bases:
            base_name = (
                base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            )
            if base_name is None:
                continue
            found = self.resolve_class(member, base_name)
            if found is not None:
                hit = self.find_class_attr(found[0], found[1], attr, depth + 1)
                if hit:
                    return hit
        return None


    def has_method(self, member: str, cls: ast.ClassDef, name: str, depth: int = 0) -> bool:
        """Whether ``cls`` or a base it names (followed through imports) defines the method ``name``."""
        if depth > 12:
            return False
        if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in cls.body):
            return True
        for base in cls.bases:
            node = base.value if isinstance(base, ast.Subscript) else base
            base_name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                         else None)
            found = self.resolve_class(member, base_name) if base_name else None
            if found is not None and self.has_method(found[0], found[1], name, depth + 1):
                return True
        return False


def _module_level(tree: ast.AST) -> Iterator[ast.stmt]:
    """Top-level statements, descending into module-level if/try blocks (``if TYPE_CHECKING:`` and friends)."""
    stack = list(getattr(tree, "body", []))
    while stack:
        node = stack.pop(0)
        yield node
        if isinstance(node, ast.If):
            stack[:0] = node.body + node.orelse
        elif isinstance(node, ast.Try):
            stack[:0] = node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody


def module_assign(tree: ast.Module, name: str) -> ast.expr | None:
    """The last module-level value assigned to ``name``."""
    value = None
    for node in _module_level(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = node.value if node.value is not None else value
    return value


def find_function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node  # type: ignore[return-value]
    return None


def body_source(fn: ast.FunctionDef, limit: int = 600) -> str:
    """Function body without its docstring, as normalized source (comments are gone)."""
    body = fn.body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    text = "\n".join(ast.unparse(stmt) for stmt in body)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------------------------
# safe evaluation of literal tables


_SAFE_NODES = (
    ast.Expression, ast.Dict, ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Name, ast.Load, ast.Store,
    ast.DictComp, ast.ListComp, ast.SetComp, ast.comprehension, ast.Compare, ast.Eq, ast.NotEq, ast.In,
    ast.NotIn, ast.Is, ast.IsNot, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.IfExp, ast.Starred,
    ast.BinOp, ast.Add, ast.Call, ast.Attribute,
)  # fmt: skip
_SAFE_ATTRS = {"items", "keys", "values"}


class NotLiteral(Exception):
    pass


def safe_eval(node: ast.expr, env: dict[str, Any]) -> Any:
    """Evaluate a literal-ish table expression: dict/list/tuple literals, ``**other`` merges, comprehensions over
    ``other.items()``. No builtins, no calls other than ``.items()/.keys()/.values()``."""
    for sub in ast.walk(node):
        if not isinstance(sub, _SAFE_NODES):
            raise NotLiteral(type(sub).__name__)
        if isinstance(sub, ast.Attribute) and sub.attr not in _SAFE_ATTRS:
            raise NotLiteral(sub.attr)
        if isinstance(sub, ast.Call) and not (
            isinstance(sub.func, ast.Attribute) and not sub.args and not sub.keywords
        ):
            raise NotLiteral("call")
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in env:
            # comprehension targets are bound by the comprehension itself
            pass
    code = compile(ast.Expression(body=node), "<table>", "eval")
    try:
        return eval(code, {"__builtins__": {}}, dict(env))  # noqa: S307 - whitelisted AST, no builtins
    except Exception as exc:  # NameError for an unknown name, etc.
        raise NotLiteral(str(exc)) from exc


def resolve_literal(wheel: Wheel, member: str, node: ast.expr, depth: int = 0) -> Any:
    """A literal expression whose free names are module-level literals of ``member`` or of modules it imports."""
    env: dict[str, Any] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in env:
            found = _find_constant(wheel, member, sub.id, depth)
            if found is not _MISSING:
                env[sub.id] = found
    try:
        return safe_eval(node, env)
    except NotLiteral:
        return None


_MISSING = object()


def _find_constant(wheel: Wheel, member: str, name: str, depth: int) -> Any:
    if depth > 6 or not wheel.has(member):
        return _MISSING
    tree = wheel.tree(member)
    value = module_assign(tree, name)
    if value is not None:
        result = resolve_literal(wheel, member, value, depth + 1)
        return _MISSING if result is None else result
    for node in _module_level(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = wheel.module_file(wheel.absolute_module(member, node))
                    if target is not None:
                        return _find_constant(wheel, target, alias.name, depth + 1)
    return _MISSING


def module_tables(tree: ast.Module, predicate: Callable[[str], bool]) -> dict[str, Any]:
    """Evaluate, in order, every module-level assignment whose name satisfies ``predicate`` and is literal."""
    env: dict[str, Any] = {}
    for node in _module_level(tree):
        targets: list[str] = []
        value = None
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            targets = [node.target.id]
            value = node.value
        if value is None or not any(predicate(t) for t in targets):
            continue
        try:
            result = safe_eval(value, env)
        except NotLiteral:
            continue
        for t in targets:
            env[t] = result
    return env


# ----------------------------------------------------------------------------------------------------------------
# message templates


def render(node: ast.expr | None, fn: ast.AST | None = None, depth: int = 0) -> str | None:
    """Render a message expression as the engine's text with ``{expr}`` placeholders; None if not a string."""
    if node is None or depth > 6:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                conv = {114: "!r", 115: "!s", 97: "!a"}.get(value.conversion, "")
                spec = ""
                if value.format_spec is not None:
                    spec = ":" + (render(value.format_spec, fn, depth + 1) or "")
                parts.append("{" + ast.unparse(value.value) + conv + spec + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = render(node.left, fn, depth + 1), render(node.right, fn, depth + 1)
        if left is None and right is None:
            return None
        return (left if left is not None else "{" + ast.unparse(node.left) + "}") + (
            right if right is not None else "{" + ast.unparse(node.right) + "}"
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = render(node.left, fn, depth + 1)
        return None if left is None else left + " % {" + ast.unparse(node.right) + "}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        left = render(node.func.value, fn, depth + 1)
        if left is not None:
            args = ", ".join(ast.unparse(a) for a in node.args)
            return left + " .format(" + args + ")"
        return None
    if isinstance(node, ast.Name) and fn is not None:
        assigned = None
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in sub.targets):
                assigned = sub.value
        if assigned is not None:
            return render(assigned, fn, depth + 1)
    return None


class RefusalScanner(ast.NodeVisitor):
    """Collect every refusal (``raise``, ``assert``, ``return False, msg``, ``reasons.append(msg)``) of a module,
    with the function it is in and the chain of enclosing ``if`` conditions."""

    def __init__(self, member: str) -> None:
        self.member = member
        self.stack: list[str] = []
        self.fns: list[ast.AST] = []
        self.conditions: list[str] = []
        self.found: list[dict[str, Any]] = []

    def _scope(self, node: ast.AST, name: str) -> None:
        self.stack.append(name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.fns.append(node)
        saved, self.conditions = self.conditions, []
        self.generic_visit(node)
        self.conditions = saved
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.fns.pop()
        self.stack.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope(node, node.name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scope(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        self.visit(node.test)
        self.conditions.append(test)
        for stmt in node.body:
            self.visit(stmt)
        self.conditions[-1] = f"not ({test})"
        for stmt in node.orelse:
            self.visit(stmt)
        self.conditions.pop()

    def _add(self, kind: str, message: ast.expr | None, exc: str | None = None, extra: str | None = None) -> None:
        fn = self.fns[-1] if self.fns else None
        entry: dict[str, Any] = {
            "file": self.member,
            "function": ".".join(self.stack) or "<module>",
            "kind": kind,
            "conditions": list(self.conditions) + ([extra] if extra else []),
            "template": render(message, fn) if message is not None else None,
        }
        if exc:
            entry["exception"] = exc
        self.found.append(entry)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            self._add("raise", exc.args[0] if exc.args else None, ast.unparse(exc.func))
        elif exc is not None:
            self._add("raise", None, ast.unparse(exc))
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._add("assert", node.msg, "AssertionError", extra=f"not ({ast.unparse(node.test)})")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        value = node.value
        if (
            isinstance(value, ast.Tuple)
            and len(value.elts) == 2
            and isinstance(value.elts[0], ast.Constant)
            and value.elts[0].value is False
        ):
            self._add("return_false", value.elts[1])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "append" and len(node.args) == 1:
            target = ast.unparse(node.func.value)
            if "reason" in target and render(node.args[0], self.fns[-1] if self.fns else None) is not None:
                self._add("reason", node.args[0], extra=None)
        self.generic_visit(node)


def scan_refusals(wheel: Wheel, members: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for member in members:
        scanner = RefusalScanner(member)
        scanner.visit(wheel.tree(member))
        out.extend(scanner.found)
    return out


def capability_refusals(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the refusals whose condition or text is about the GPU generation, de-duplicated, stably ordered."""
    keep: dict[str, dict[str, Any]] = {}
    for entry in entries:
        blob = " ".join(entry["conditions"]) + " " + (entry.get("template") or "")
        if not CAPABILITY_WORDS.search(blob) or not entry.get("template"):
            continue
        key = json.dumps(entry, sort_keys=True)
        keep[key] = entry
    return [keep[k] for k in sorted(keep)]


def texts_matching(entries: list[dict[str, Any]], pattern: str) -> list[dict[str, Any]]:
    rx = re.compile(pattern)
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("template") and rx.search(entry["template"]):
            seen[json.dumps(entry, sort_keys=True)] = entry
    return [seen[k] for k in sorted(seen)]


# ----------------------------------------------------------------------------------------------------------------
# capability predicates


class Unknown(Exception):
    pass


class NeedAssumption(Unknown):
    """A free name (module flag, ``self.attr``) the predicate depends on; the caller may branch on it."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class Cap(tuple[int, int]):  # noqa: SLOT001 - a DeviceCapability stand-in: (major, minor) with .major/.minor/.to_int()
    @property
    def major(self) -> int:
        return int(self[0])

    @property
    def minor(self) -> int:
        return int(self[1])

    def to_int(self) -> int:
        return int(self[0]) * 10 + int(self[1])


_FALSE_PLATFORMS = re.compile(r"^_?is_(npu|musa|hip|rocm|xpu|cpu|mps|tpu|hpu|neuron|out_of_tree|gfx\w*)$")
_TRUE_PLATFORMS = re.compile(r"^_?is_(cuda|cuda_alike)$")


class CapabilityInterpreter:
    """Evaluate a small predicate (function body) on a CUDA device of a given capability.

    Knows: constants, and/or/not, comparisons, tuples/lists, ``DeviceCapability(a, b)``, ``cap.major/.minor/
    .to_int()``, ``(current_)platform.has_device_capability/is_device_capability/is_device_capability_family``,
    CUDA/non-CUDA platform predicates, ``super().<same method>(cap)`` and simple ``if/return/assign``. Anything
    else raises Unknown."""

    def __init__(
        self,
        wheel: Wheel,
        member: str,
        cls: ast.ClassDef | None,
        fn: ast.FunctionDef,
        cap: Cap,
        assume: dict[str, Any] | None = None,
        platform_self: bool = False,
    ) -> None:
        self.wheel, self.member, self.cls, self.fn, self.cap = wheel, member, cls, fn, cap
        self.assume = assume
        self.platform_self = platform_self  # ``self`` is the platform (a method of a Platform class)
        self.env: dict[str, Any] = {"True": True, "False": False, "None": None}
        params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
        if params:
            self.env[params[0]] = cap

    def run(self) -> Any:
        return self._block(self.fn.body)

    def _block(self, body: list[ast.stmt]) -> Any:
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Return):
                return self._expr(stmt.value) if stmt.value is not None else None
            if isinstance(stmt, ast.If):
                branch = stmt.body if self._truth(self._expr(stmt.test)) else stmt.orelse
                result = self._block(branch)
                if result is not _FALLTHROUGH:
                    return result
                continue
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                value = self._expr(stmt.value)
                if isinstance(target, ast.Name):
                    self.env[target.id] = value
                    continue
                if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
                    for t, v in zip(target.elts, value, strict=True):
                        self.env[t.id] = v  # type: ignore[attr-defined]
                    continue
            raise Unknown(ast.unparse(stmt))
        return _FALLTHROUGH

    @staticmethod
    def _truth(value: Any) -> bool:
        return bool(value)

    def _platform_call(self, name: str, args: list[Any]) -> Any:
        cap = self.cap
        if name == "has_device_capability":
            want = args[0]
            return cap >= tuple(want) if isinstance(want, tuple) else cap.to_int() >= want
        if name == "is_device_capability":
            want = args[0]
            return tuple(cap) == tuple(want) if isinstance(want, tuple) else cap.to_int() == want
        if name == "is_device_capability_family":
            return cap.to_int() // 10 == args[0] // 10
        if name in ("get_device_capability",):
            return cap
        if _TRUE_PLATFORMS.match(name):
            return True
        if _FALSE_PLATFORMS.match(name):
            return False
        raise Unknown(name)

    def _expr(self, node: ast.expr) -> Any:  # noqa: C901 - a flat dispatch reads best here
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if _TRUE_PLATFORMS.match(node.id):
                return True
            if _FALSE_PLATFORMS.match(node.id):
                return False
            if node.id.endswith("_AVAILABLE"):
                return True  # optional kernels are assumed installed: the gate under study is the capability
            if self.assume is not None:
                if node.id in self.assume:
                    return self.assume[node.id]
                raise NeedAssumption(node.id)
            raise Unknown(node.id)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self._expr(e) for e in node.elts]
            return tuple(items) if not isinstance(node, ast.Set) else set(items)
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for value in node.values:
                    result = self._expr(value)
                    if not result:
                        return result
                return result
            result = False
            for value in node.values:
                result = self._expr(value)
                if result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self._expr(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._expr(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mult, ast.Add, ast.Sub)):
            left, right = self._expr(node.left), self._expr(node.right)
            ops: dict[type, Callable[[Any, Any], Any]] = {
                ast.FloorDiv: lambda a, b: a // b,
                ast.Mult: lambda a, b: a * b,
                ast.Add: lambda a, b: a + b,
                ast.Sub: lambda a, b: a - b,
            }
            return ops[type(node.op)](left, right)
        if isinstance(node, ast.IfExp):
            return self._expr(node.body) if self._expr(node.test) else self._expr(node.orelse)
        if isinstance(node, ast.Compare):
            left = self._expr(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self._expr(comparator)
                ok = _COMPARE[type(op)](left, right)
                if not ok:
                    return False
                left = right
            return True
        if isinstance(node, ast.Attribute):
            if self.assume is not None and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                key = ast.unparse(node)
                if key in self.assume:
                    return self.assume[key]
                raise NeedAssumption(key)
            if isinstance(node.value, ast.Name) and node.value.id == "torch":
                return f"torch.{node.attr}"  # a dtype (``supported_dtypes``), kept by name
            base = self._expr(node.value)
            if isinstance(base, Cap) and node.attr in ("major", "minor"):
                return getattr(base, node.attr)
            raise Unknown(ast.unparse(node))
        if isinstance(node, ast.Call):
            func = node.func
            args = [self._expr(a) for a in node.args] if not _is_super_call(func) else []
            if isinstance(func, ast.Name):
                if func.id == "DeviceCapability" and len(args) == 2:
                    return Cap((args[0], args[1]))
                if func.id == "get_device_capability":
                    return self.cap
                if _TRUE_PLATFORMS.match(func.id) or _FALSE_PLATFORMS.match(func.id):
                    return self._platform_call(func.id, args)
                raise Unknown(func.id)
            if isinstance(func, ast.Attribute):
                if _is_super_call(func.value) and func.attr == self.fn.name:
                    return self._super_call()
                if func.attr == "to_int" and not args:
                    base = self._expr(func.value)
                    if isinstance(base, Cap):
                        return base.to_int()
                    raise Unknown("to_int")
                owner = ast.unparse(func.value)
                if owner.endswith("platform") or owner.endswith("platform()") or owner == "torch.cuda" or (
                        self.platform_self and owner in ("self", "cls")):
                    return self._platform_call(func.attr, args)
            raise Unknown(ast.unparse(node))
        raise Unknown(ast.unparse(node))

    def _super_call(self) -> Any:
        if self.cls is None:
            raise Unknown("super")
        for base in self.cls.bases:
            base_name = (
                base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            )
            if base_name is None:
                continue
            found = self.wheel.resolve_class(self.member, base_name)
            if found is None:
                continue
            hit = self.wheel.find_method(found[0], found[1], self.fn.name)
            if hit:
                sub = CapabilityInterpreter(self.wheel, hit[0], hit[1], hit[2], self.cap)
                return sub.run()
        raise Unknown("super: no base method")


_FALLTHROUGH = object()


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return tuple(a) == tuple(b)
    return bool(a == b)


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: _eq,
    ast.NotEq: lambda a, b: not _eq(a, b),
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _is_super_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def fmt_cap(cap: tuple[int, int]) -> str:
    return f"{cap[0]}.{cap[1]}"


def capability_rule(wheel: Wheel, member: str, cls: ast.ClassDef, method: str) -> dict[str, Any] | None:
    """The ``method(capability)`` predicate of a class: where it is defined, its source, and the known CUDA
    capabilities it accepts (when the interpreter can evaluate it)."""
    hit = wheel.find_method(member, cls, method)
    if hit is None:
        return None
    src_member, src_cls, fn = hit
    rule: dict[str, Any] = {"file": src_member, "defined_in": src_cls.name, "source": body_source(fn)}
    allowed = []
    try:
        for cc in KNOWN_CUDA_CAPABILITIES:
            result = CapabilityInterpreter(wheel, src_member, src_cls, fn, Cap(cc)).run()
            if result is _FALLTHROUGH:
                raise Unknown("no return")
            if isinstance(result, tuple):  # (ok, reason) style
                result = result[0]
            if result:
                allowed.append(fmt_cap(cc))
        rule["evaluable"] = True
        rule["allowed_cuda_capabilities"] = allowed
        rule["min_cuda_capability"] = allowed[0] if allowed else None
    except (Unknown, TypeError, KeyError, IndexError, ValueError) as exc:
        rule["evaluable"] = False
        rule["why_not_evaluable"] = str(exc)[:200]
    return rule


def literal_return(wheel: Wheel, member: str, cls: ast.ClassDef, method: str, follow: int = 0) -> dict[str, Any] | None:
    """The value a no-argument classmethod returns: a literal, a delegation to another class's same method (followed),
    or its source plus what it returns on CUDA where the capability interpreter can tell."""
    hit = wheel.find_method(member, cls, method)
    if hit is None:
        return None
    src_member, src_cls, fn = hit
    out: dict[str, Any] = {"file": src_member, "defined_in": src_cls.name}
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(getattr(s, "value", None), ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Raise):
        out.update(literal=False, raises=True, source=body_source(fn))
        return out
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        value = body[0].value
        try:
            out.update(literal=True, value=ast.literal_eval(value))
            return out
        except (ValueError, SyntaxError):
            pass
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and all(
            isinstance(e, (ast.Attribute, ast.Name, ast.Constant)) for e in value.elts
        ):
            out.update(literal=True, value=sorted(ast.unparse(e) for e in value.elts))
            return out
        if (
            follow < 6
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == method
            and isinstance(value.func.value, ast.Name)
        ):
            target = wheel.resolve_class(src_member, value.func.value.id, scope=fn)
            if target is not None:
                inner = literal_return(wheel, target[0], target[1], method, follow + 1)
                if inner is not None:
                    out.update(
                        {
                            k: v
                            for k, v in inner.items()
                            if k in ("literal", "value", "source", "cuda_value", "cuda_values", "raises")
                        }
                    )
                    out["via"] = f"{target[1].name} ({target[0]})"
                    return out
    out.update(literal=False, source=body_source(fn))
    cases = evaluate_with_assumptions(wheel, src_member, src_cls, fn)
    if cases:
        values = {json.dumps(c["value"]) for c in cases}
        if len(values) == 1:
            out["cuda_value"] = cases[0]["value"]
        else:
            out["cuda_values"] = cases
    return out


def evaluate_with_assumptions(
    wheel: Wheel, member: str, cls: ast.ClassDef, fn: ast.FunctionDef, max_free: int = 3
) -> list[dict[str, Any]]:
    """Run a no-argument predicate on CUDA, branching on each free flag it reads (``self.use_mxfp8``, a module
    flag) as True/False, up to ``max_free`` flags. Returns [{"assume": {...}, "value": v}] or [] if not evaluable."""
    results: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = [{}]
    while pending:
        assume = pending.pop(0)
        try:
            value = CapabilityInterpreter(wheel, member, cls, fn, Cap((9, 0)), assume=assume).run()
        except NeedAssumption as need:
            if len(assume) >= max_free:
                return []
            pending += [{**assume, need.key: True}, {**assume, need.key: False}]
            continue
        except (Unknown, TypeError, KeyError, IndexError, ValueError):
            return []
        if value is _FALLTHROUGH or not isinstance(value, (int, float, str, bool)):
            return []
        results.append({"assume": assume, "value": value})
    return results


def class_ref(member: str, cls: ast.ClassDef) -> str:
    return f"{member[:-3].replace('/', '.').removesuffix('.__init__')}.{cls.name}"


# ----------------------------------------------------------------------------------------------------------------
# vLLM


def vllm_architectures(wheel: Wheel) -> dict[str, Any]:
    member = "vllm/model_executor/models/registry.py"
    tree = wheel.tree(member)
    tables = module_tables(tree, lambda n: n.startswith("_") and n.endswith("_MODELS"))
    registries = {
        name: table
        for name, table in tables.items()
        if isinstance(table, dict)
        and table
        and all(isinstance(v, tuple) and len(v) == 2 for v in table.values())
        and name != "_VLLM_MODELS"
    }
    merged = tables.get("_VLLM_MODELS", {})
    order = [n.id for n in _merge_order(module_assign(tree, "_VLLM_MODELS"))] or sorted(registries)
    archs: dict[str, Any] = {}
    for reg in order:
        for arch in registries.get(reg, {}):
            entry = archs.setdefault(arch, {"registries": []})
            entry["registries"].append(reg)
    for arch, (module, cls) in merged.items():
        archs.setdefault(arch, {"registries": []})["impl"] = f"{module}:{cls}"
    out: dict[str, Any] = {
        "file": member,
        "registries": {reg: sorted(registries[reg]) for reg in sorted(registries)},
        "registry_merge_order": order,
        "count": len(archs),
        "by_arch": archs,
        "note": "by_arch[arch].registries lists every registry dict naming it (in merge order); impl is the "
        "module:class of the merged _VLLM_MODELS entry (the last registry wins).",
    }
    return out


def _merge_order(node: ast.expr | None) -> list[ast.Name]:
    if not isinstance(node, ast.Dict):
        return []
    return [v for k, v in zip(node.keys, node.values, strict=True) if k is None and isinstance(v, ast.Name)]


def vllm_previously_supported(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    member = "vllm/model_executor/models/registry.py"
    tables = module_tables(wheel.tree(member), lambda n: n in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"))
    return {
        "file": member,
        "models": tables.get("_PREVIOUSLY_SUPPORTED_MODELS"),
        "out_of_tree_models": tables.get("_OOT_SUPPORTED_MODELS"),
        "errors": texts_matching(
            [r for r in refusals if r["file"] == member], r"was supported in vLLM until|not supported in-tree"
        ),
    }


def vllm_transformers_fallback(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    member = "vllm/model_executor/models/registry.py"
    tree = wheel.tree(member)
    tables = module_tables(tree, lambda n: n.startswith("_") and n.endswith("_MODELS"))
    out: dict[str, Any] = {
        "file": member,
        "backend_archs": sorted(tables.get("_TRANSFORMERS_BACKEND_MODELS", {})),
        "supported_archs": sorted(tables.get("_TRANSFORMERS_SUPPORTED_MODELS", {})),
    }
    # the conditions under which resolve_model_cls falls back to the Transformers backend
    fn = find_function(tree, "resolve_model_cls")
    steps = []
    if fn is not None:
        for node in fn.body:
            if isinstance(node, ast.If) and "_try_resolve_transformers" in ast.unparse(node):
                steps.append(ast.unparse(node.test))
            elif isinstance(node, ast.For):
                steps.append("for arch in architectures: registry lookup of the (normalized) arch")
            elif isinstance(node, ast.Return) and "_raise_for_unsupported" in ast.unparse(node):
                steps.append("raise (see errors)")
    out["resolve_model_cls_steps"] = steps
    resolve = find_function(tree, "_try_resolve_transformers")
    if resolve is not None:
        out["try_resolve_transformers_source"] = body_source(resolve, limit=3000)
    # which Transformers backend class wraps the model
    config = wheel.first("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")
    if config is not None:
        ctree = wheel.tree(config)
        backend_fn = find_function(ctree, "_get_transformers_backend_cls")
        if backend_fn is not None:
            out["backend_class_rule"] = {"file": config, "source": body_source(backend_fn, limit=3000)}
        suffixes = module_assign(ctree, "_SUFFIX_TO_DEFAULTS")
        if suffixes is not None:
            try:
                out["suffix_defaults"] = {
                    "file": config,
                    "value": [[s, list(rc)] for s, rc in ast.literal_eval(suffixes)],
                    "note": "(suffix, (runner, convert)) in priority order: an unknown arch ending in suffix "
                    "is converted from the base arch of the same stem",
                }
            except ValueError:
                pass
    impl = None
    if config is not None:
        for ann in ast.walk(wheel.tree(config)):
            if isinstance(ann, ast.AnnAssign) and isinstance(ann.target, ast.Name) and ann.target.id == "model_impl":
                try:
                    impl = ast.literal_eval(ann.value) if ann.value is not None else None
                except ValueError:
                    impl = ast.unparse(ann.value) if ann.value is not None else None
    out["model_impl_default"] = impl
    out["errors"] = texts_matching(
        [r for r in refusals if r["file"] == member],
        r"not supported for now|Cannot find model module|is not compatible with vLLM|failed to be inspected",
    )
    return out


def vllm_quantization(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    member = "vllm/model_executor/layers/quantization/__init__.py"
    tree = wheel.tree(member)
    methods: list[str] = []
    literal_type = module_assign(tree, "QuantizationMethods")
    if isinstance(literal_type, ast.Subscript):
        sl = literal_type.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        methods = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if not methods:
        value = module_assign(tree, "QUANTIZATION_METHODS")
        if value is not None:
            try:
                methods = list(ast.literal_eval(value))
            except ValueError:
                pass
    deprecated = []
    dep = module_assign(tree, "DEPRECATED_QUANTIZATION_METHODS")
    if dep is not None:
        try:
            deprecated = sorted(ast.literal_eval(dep))
        except ValueError:
            pass
    fn = find_function(tree, "get_quantization_config")
    mapping: dict[str, str] = {}
    loop_default: tuple[str, str] | None = None
    if fn is not None:
        for node in ast.walk(fn):
            value = None
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                value = node.value
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) for t in node.targets):
                value = node.value
            if isinstance(value, ast.Dict) and len(value.keys) > 3:
                for k, v in zip(value.keys, value.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                        mapping[str(k.value)] = v.id
            if isinstance(node, ast.For):
                # ``for shorthand in X: method_to_config.setdefault(shorthand, Cls)`` or ``...[k] = Cls``
                for sub in node.body:
                    call = sub.value if isinstance(sub, ast.Expr) else None
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "setdefault"
                        and len(call.args) == 2
                        and isinstance(call.args[1], ast.Name)
                    ):
                        loop_default = (ast.unparse(node.iter), call.args[1].id)
                    if (
                        isinstance(sub, ast.Assign)
                        and isinstance(sub.targets[0], ast.Subscript)
                        and isinstance(sub.value, ast.Name)
                    ):
                        loop_default = (ast.unparse(node.iter), sub.value.id)
    by_method: dict[str, Any] = {}
    classes: dict[str, Any] = {}
    for method in methods:
        cls_name = mapping.get(method)
        via = None
        if cls_name is None and loop_default is not None:
            cls_name, via = loop_default[1], f"loop over {loop_default[0]}"
        entry: dict[str, Any] = {"class": cls_name, "deprecated": method in deprecated}
        if via:
            entry["mapped_via"] = via
        if cls_name is not None:
            found = wheel.resolve_class(member, cls_name, scope=fn)
            if found is None and fn is not None:
                # a local variable chosen per platform (``deepseek_config = A if cuda else B``)
                alternatives = _local_class_choices(wheel, member, fn, cls_name, classes)
                if alternatives:
                    entry["alternatives"] = alternatives
                    values = {a.get("min_capability") for a in alternatives}
                    if len(values) == 1 and all(a.get("min_capability_literal") for a in alternatives):
                        entry["min_capability"] = values.pop()
                        entry["min_capability_literal"] = True
                    by_method[method] = entry
                    continue
            if found is None:
                entry["unresolved"] = True
            else:
                ref = class_ref(*found)
                entry["class_path"] = ref
                entry["file"] = found[0]
                if ref not in classes:
                    classes[ref] = {
                        "file": found[0],
                        "min_capability": literal_return(wheel, found[0], found[1], "get_min_capability"),
                        "supported_act_dtypes": literal_return(wheel, found[0], found[1], "get_supported_act_dtypes"),
                    }
                summarize_min_capability(entry, classes[ref]["min_capability"])
        by_method[method] = entry
    gate = texts_matching(
        refusals,
        r"is not supported for the current GPU|Minimum capability|Min capability|"
        r"Required capability|requires capability|is not supported for quantization method",
    )
    return {
        "file": member,
        "methods": methods,
        "deprecated": deprecated,
        "by_method": by_method,
        "classes": classes,
        "gate_texts": gate,
    }


def summarize_min_capability(entry: dict[str, Any], mc: dict[str, Any] | None) -> None:
    """Copy a class's get_min_capability() finding onto a per-method entry: ``min_capability`` when literal,
    else ``min_capability_on_cuda`` (one value) or ``min_capability_on_cuda_cases`` (per assumed flag)."""
    mc = mc or {}
    entry["min_capability"] = mc.get("value") if mc.get("literal") else None
    entry["min_capability_literal"] = bool(mc.get("literal"))
    if mc.get("literal"):
        return
    if "cuda_value" in mc:
        entry["min_capability_on_cuda"] = mc["cuda_value"]
    if "cuda_values" in mc:
        entry["min_capability_on_cuda_cases"] = mc["cuda_values"]
    if mc.get("raises"):
        entry["min_capability_raises"] = True


def _local_class_choices(
    wheel: Wheel, member: str, fn: ast.FunctionDef, name: str, classes: dict[str, Any]
) -> list[dict[str, Any]]:
    scanner = _AssignScanner(name)
    scanner.visit(fn)
    out = []
    for assignment in scanner.found:
        found = wheel.resolve_class(member, assignment["value"], scope=fn)
        if found is None:
            continue
        ref = class_ref(*found)
        if ref not in classes:
            classes[ref] = {
                "file": found[0],
                "min_capability": literal_return(wheel, found[0], found[1], "get_min_capability"),
                "supported_act_dtypes": literal_return(wheel, found[0], found[1], "get_supported_act_dtypes"),
            }
        choice: dict[str, Any] = {"class_path": ref, "file": found[0], "conditions": assignment["conditions"]}
        summarize_min_capability(choice, classes[ref]["min_capability"])
        out.append(choice)
    return out


def kernel_min_capabilities(wheel: Wheel, prefixes: list[str]) -> list[dict[str, Any]]:
    """Every class under ``prefixes`` that defines ``get_min_capability`` itself (kernel families, schemes)."""
    out = []
    for prefix in prefixes:
        for member in wheel.files(prefix):
            for node in ast.walk(wheel.tree(member)):
                if not isinstance(node, ast.ClassDef):
                    continue
                if not any(isinstance(s, ast.FunctionDef) and s.name == "get_min_capability" for s in node.body):
                    continue
                value = literal_return(wheel, member, node, "get_min_capability") or {}
                item = {"file": member, "class": node.name, "literal": bool(value.get("literal"))}
                if value.get("literal"):
                    item["min_capability"] = value.get("value")
                elif value.get("raises"):
                    item["raises"] = True
                else:
                    item["source"] = value.get("source")
                    if "cuda_value" in value:
                        item["cuda_value"] = value["cuda_value"]
                    if "cuda_values" in value:
                        item["cuda_values"] = value["cuda_values"]
                if value.get("via"):
                    item["via"] = value["via"]
                out.append(item)
    return sorted(out, key=lambda d: (d["file"], d["class"]))


def vllm_attention(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    registry = wheel.first("vllm/v1/attention/backends/registry.py", "vllm/attention/backends/registry.py")
    out: dict[str, Any] = {}
    enum_cls = None
    if registry is not None:
        for node in ast.walk(wheel.tree(registry)):
            if isinstance(node, ast.ClassDef) and node.name in ("AttentionBackendEnum", "_Backend"):
                enum_cls = node
                break
    backends: dict[str, Any] = {}
    referenced: set[tuple[str, str]] = set()
    if enum_cls is not None and registry is not None:
        out["enum"] = {"file": registry, "class": enum_cls.name}
        for stmt in enum_cls.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            try:
                path = ast.literal_eval(stmt.value)
            except ValueError:
                continue
            entry: dict[str, Any] = {"class_path": path}
            if isinstance(path, str) and path:
                found = wheel.resolve_path(path)
                composite = None if found is not None else composite_backend(wheel, path)
                if composite is not None:
                    entry.update(composite)
                elif found is None:
                    entry["unresolved"] = True
                else:
                    member, cls = found
                    referenced.add((member, cls.name))
                    entry["file"] = member
                    entry["compute_capability"] = capability_rule(wheel, member, cls, "supports_compute_capability")
                    for flag in ("is_mla", "is_sparse", "get_name"):
                        value = literal_return(wheel, member, cls, flag)
                        if value is not None and value.get("literal"):
                            entry[flag] = value["value"]
                    kv = wheel.find_class_attr(member, cls, "supported_kv_cache_dtypes")
                    if kv is not None:
                        try:
                            entry["supported_kv_cache_dtypes"] = sorted(ast.literal_eval(kv[2]))
                        except ValueError:
                            entry["supported_kv_cache_dtypes_source"] = ast.unparse(kv[2])[:300]
            backends[name] = entry
    else:
        out["enum"] = None
    out["backends"] = backends
    others: dict[str, Any] = {}
    for prefix in ("vllm/v1/attention/backends/", "vllm/attention/backends/"):
        for member in wheel.files(prefix):
            for node in ast.walk(wheel.tree(member)):
                if not isinstance(node, ast.ClassDef) or (member, node.name) in referenced:
                    continue
                if any(isinstance(s, ast.FunctionDef) and s.name == "supports_compute_capability" for s in node.body):
                    others[f"{member}::{node.name}"] = capability_rule(
                        wheel, member, node, "supports_compute_capability"
                    )
    out["other_backend_classes"] = others
    attn_files = [r for r in refusals if "/attention/" in r["file"] or r["file"].startswith("vllm/platforms/")]
    out["no_valid_backend_errors"] = texts_matching(
        attn_files, r"No valid attention backend|is not valid for this configuration"
    )
    out["invalid_reasons"] = sorted(
        {
            r["template"]
            for r in attn_files
            if r["kind"] == "reason" and r["function"].endswith("validate_configuration")
        }
    )
    out["flash_attn"] = vllm_flash_attn(wheel, refusals)
    priorities = []
    cuda = wheel.first("vllm/platforms/cuda.py")
    if cuda is not None:
        fn = find_function(wheel.tree(cuda), "_get_backend_priorities")
        if fn is not None:
            priorities = sorted(
                {
                    ast.unparse(n)
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name)
                    and n.value.id in ("AttentionBackendEnum", "_Backend")
                }
            )
            out["cuda_priority_function"] = {
                "file": cuda,
                "function": "_get_backend_priorities",
                "backends_named": priorities,
            }
    return out


def composite_backend(wheel: Wheel, path: str) -> dict[str, Any] | None:
    """``Name = create_composite_attention_backend(general, causal, ..., device_major=N)``: the composite accepts a
    capability when both parts do (and its major is N when given)."""
    module, _, name = path.rpartition(".")
    member = wheel.module_file(module)
    if member is None:
        return None
    value = module_assign(wheel.tree(member), name)
    if not (isinstance(value, ast.Call) and ast.unparse(value.func).endswith("create_composite_attention_backend")):
        return None
    parts = [a.id for a in value.args[:2] if isinstance(a, ast.Name)]
    keywords = {k.arg: k.value for k in value.keywords if k.arg}
    device_major = None
    if "device_major" in keywords:
        try:
            device_major = ast.literal_eval(keywords["device_major"])
        except ValueError:
            device_major = ast.unparse(keywords["device_major"])
    out: dict[str, Any] = {"file": member, "composite_of": parts, "composite_device_major": device_major}
    allowed: set[str] | None = None
    evaluable = isinstance(device_major, (int, type(None))) and len(parts) == 2
    for part in parts:
        found = wheel.resolve_class(member, part)
        rule = capability_rule(wheel, found[0], found[1], "supports_compute_capability") if found else None
        if not rule or not rule.get("evaluable"):
            evaluable = False
            continue
        part_allowed = set(rule["allowed_cuda_capabilities"])
        allowed = part_allowed if allowed is None else allowed & part_allowed
    rule_out: dict[str, Any] = {
        "file": member,
        "defined_in": "create_composite_attention_backend",
        "source": ast.unparse(value)[:600],
        "evaluable": evaluable,
    }
    if evaluable and allowed is not None:
        ordered = [
            fmt_cap(cc)
            for cc in KNOWN_CUDA_CAPABILITIES
            if fmt_cap(cc) in allowed and (device_major is None or cc[0] == device_major)
        ]
        rule_out["allowed_cuda_capabilities"] = ordered
        rule_out["min_cuda_capability"] = ordered[0] if ordered else None
    out["compute_capability"] = rule_out
    return out


def vllm_flash_attn(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    iface = wheel.first("vllm/vllm_flash_attn/flash_attn_interface.py")
    if iface is not None:
        tree = wheel.tree(iface)
        versions = {}
        for node in tree.body:
            match = re.fullmatch(r"_is_fa(\d)_supported", getattr(node, "name", ""))
            if isinstance(node, ast.FunctionDef) and match:
                rule: dict[str, Any] = {"file": iface, "function": node.name, "source": body_source(node)}
                try:
                    allowed = []
                    for cc in KNOWN_CUDA_CAPABILITIES:
                        result = CapabilityInterpreter(wheel, iface, None, node, Cap(cc)).run()
                        ok = result[0] if isinstance(result, tuple) else result
                        if ok:
                            allowed.append(fmt_cap(cc))
                    rule["evaluable"] = True
                    rule["allowed_cuda_capabilities"] = allowed
                except (Unknown, TypeError, KeyError, IndexError, ValueError) as exc:
                    rule["evaluable"] = False
                    rule["why_not_evaluable"] = str(exc)[:200]
                rule["refusals"] = [
                    r["template"]
                    for r in refusals
                    if r["file"] == iface and r["function"] == node.name and r["template"]
                ]
                versions[f"FA{match.group(1)}"] = rule
        out["versions"] = versions
    fa_utils = wheel.first("vllm/v1/attention/backends/fa_utils.py", "vllm/attention/utils/fa_utils.py")
    if fa_utils is not None:
        fn = find_function(wheel.tree(fa_utils), "get_flash_attn_version")
        if fn is not None:
            scanner = _AssignScanner("fa_version")
            scanner.visit(fn)
            out["default_version_selection"] = {
                "file": fa_utils,
                "function": "get_flash_attn_version",
                "assignments": scanner.found,
            }
    return out


#: vLLM's interface flags (``model_executor/models/interfaces.py`` / ``interfaces_base.py``: each Protocol sets
#: ``<flag>: ClassVar[Literal[True]] = True``; ``_ModelInfo.from_model_cls`` in ``registry.py`` reads them)
INTERFACE_FLAGS = ("supports_pp", "supports_multimodal", "is_pooling_model", "supports_lora", "is_hybrid",
                   "is_attention_free", "supports_transcription")


def _model_member(wheel: Wheel, module: str) -> str | None:
    """The file of a registry entry's module (``"llama"`` -> ``vllm/model_executor/models/llama.py``)."""
    for base in ("vllm/model_executor/models/", "vllm/models/"):
        found = wheel.module_file((base + module).replace("/", ".").rstrip("."))
        if found is not None:
            return found
    return wheel.module_file(module)


#: bases outside vLLM that set none of its interface flags
_NEUTRAL_BASES = {"Module", "object", "Protocol", "Generic", "ABC", "Enum", "PreTrainedModel", "GenerationMixin"}


def _unread_bases(wheel: Wheel, member: str, cls: ast.ClassDef, depth: int = 0) -> list[str]:
    """Bases of ``cls`` (transitively) that could not be read and are not known to be neutral: a flag such a
    base sets would be missed, so no claim is made for the class."""
    if depth > 12:
        return [cls.name]
    out: list[str] = []
    for base in cls.bases:
        node = base.value if isinstance(base, ast.Subscript) else base
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is None:
            out.append(ast.unparse(base))
            continue
        found = wheel.resolve_class(member, name)
        if found is None:
            if name not in _NEUTRAL_BASES:
                out.append(name)
            continue
        out.extend(_unread_bases(wheel, found[0], found[1], depth + 1))
    return out


def vllm_interfaces(wheel: Wheel) -> dict[str, Any]:
    """Per architecture of the registry, the interface flags its class has (statically: the class and its
    bases, followed through imports, first definition wins as in the MRO). ``by_flag[flag]`` lists the
    architectures whose class sets it true; ``unresolved`` those whose class could not be read (no claim).
    ``pp_refusal``: where ``ModelConfig`` refuses PP for a class without ``SupportsPP``."""
    member = "vllm/model_executor/models/registry.py"
    tree = wheel.tree(member)
    tables = module_tables(tree, lambda n: n.startswith("_") and n.endswith("_MODELS"))
    merged = tables.get("_VLLM_MODELS") or {}
    if not merged:
        # a registry table that is not literal (0.8.x) leaves the merge unevaluated: merge the literal ones
        for name in _merge_order(module_assign(tree, "_VLLM_MODELS")):
            table = tables.get(name.id)
            if isinstance(table, dict):
                merged.update({k: v for k, v in table.items() if isinstance(v, tuple) and len(v) == 2})
    by_flag: dict[str, list[str]] = {f: [] for f in INTERFACE_FLAGS}
    unresolved: list[str] = []
    without_flags: list[str] = []
    #: the architectures whose class defines ``compute_logits`` (``interfaces_base.is_text_generation_model``:
    #: ``callable(getattr(model, "compute_logits", None))``): a pooling class that also generates text has it
    text_generation: list[str] = []
    resolved = 0
    for arch, (module, cls_name) in sorted(merged.items()):
        found_member = _model_member(wheel, module)
        found = wheel.resolve_class(found_member, cls_name) if found_member else None
        if found is None or _unread_bases(wheel, found[0], found[1]):
            unresolved.append(arch)
            continue
        resolved += 1
        if wheel.has_method(found[0], found[1], "compute_logits"):
            text_generation.append(arch)
        flagged = False
        for flag in INTERFACE_FLAGS:
            hit = wheel.find_class_attr(found[0], found[1], flag)
            if hit is None:
                continue
            try:
                value = ast.literal_eval(hit[2])
            except ValueError:
                continue
            if value is True:
                by_flag[flag].append(arch)
                flagged = True
        if not flagged:
            without_flags.append(arch)
    refusal = None
    config = wheel.first("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")
    if config is not None:
        for r in scan_refusals(wheel, [config]):
            if r.get("template") and "Pipeline parallelism is not supported for this model" in r["template"]:
                refusal = {"file": config, "function": r["function"], "template": r["template"],
                           "exception": r.get("exception")}
                break
    return {
        "file": "vllm/model_executor/models/",
        "registry": member,
        "flags": list(INTERFACE_FLAGS),
        "resolved": resolved,
        "by_flag": by_flag,
        "without_flags": without_flags,
        "text_generation": text_generation,
        "unresolved": unresolved,
        "pp_refusal": refusal,
        "note": "the registry's architectures whose class was read are those of by_flag and without_flags; one "
        "of them absent from by_flag[flag] lacks the flag",
    }


def _warning_with(fn: ast.AST, needle: str) -> str | None:
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "warning":
            text = render(sub.args[0], fn) if sub.args else None
            if text and needle in text:
                return text
    return None


def vllm_dtype(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    """How ``--dtype`` resolves: ``_get_and_verify_dtype`` (``config/model.py``; ``config/__init__.py`` in
    0.10.x, ``config.py`` before). ``auto``: ``config`` (the checkpoint's dtype, float32 as float16; no
    fallback: 0.8.x), ``platform`` (a dtype the platform lacks falls back to its first supported one: 0.9.0),
    ``model_type`` (``_resolve_auto_dtype``: the platform's dtypes less those the model type refuses, so a
    float16-refusing model on a GPU without bf16 falls back to float32: 0.9.1+). ``float16_not_supported``:
    ``_FLOAT16_NOT_SUPPORTED_MODELS`` (model type -> reason) and the ``_check_valid_dtype`` raise;
    ``cuda_supported_dtypes``: ``CudaPlatformBase.supported_dtypes`` evaluated per compute capability;
    ``bf16_gate``: the worker's (or platform's) refusal of bfloat16 below 8.0."""
    config = next((m for m in ("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")
                   if wheel.has(m) and find_function(wheel.tree(m), "_get_and_verify_dtype") is not None), None)
    out: dict[str, Any] = {"file": config}
    if config is None:
        return out
    tree = wheel.tree(config)
    verify = find_function(tree, "_get_and_verify_dtype")
    resolve = find_function(tree, "_resolve_auto_dtype")
    verify_src = ast.unparse(verify) if verify is not None else ""
    if resolve is not None:
        out["auto"] = "model_type"
        out["fallback_warning"] = _warning_with(resolve, "Falling back")
        out["pooling_prefers_float16"] = "is_pooling_model" in ast.unparse(resolve)
    elif "supported_dtypes" in verify_src:
        out["auto"] = "platform"
        out["fallback_warning"] = _warning_with(verify, "Falling back") if verify is not None else None
    else:
        out["auto"] = "config"
    out["float32_auto_to_float16"] = "torch_dtype = torch.float16" in verify_src
    table = module_tables(tree, lambda n: n == "_FLOAT16_NOT_SUPPORTED_MODELS").get("_FLOAT16_NOT_SUPPORTED_MODELS")
    out["float16_not_supported"] = table
    check = [r for r in refusals if r["file"] == config and r["function"] == "_check_valid_dtype"]
    out["float16_refusal"] = ({"file": config, "function": "_check_valid_dtype", "template": check[0]["template"],
                               "exception": check[0].get("exception")} if check else None)
    platform = "vllm/platforms/cuda.py"
    dtypes: dict[str, Any] = {}
    if wheel.has(platform):
        ptree = wheel.tree(platform)
        for node in ast.walk(ptree):
            if not isinstance(node, ast.ClassDef):
                continue
            fn = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "supported_dtypes"), None)
            if fn is None:
                continue
            for cap in KNOWN_CUDA_CAPABILITIES:
                try:
                    value = CapabilityInterpreter(wheel, platform, node, fn, Cap(cap), platform_self=True).run()
                except Unknown:
                    continue
                if isinstance(value, tuple):
                    dtypes[fmt_cap(cap)] = [str(v).removeprefix("torch.") for v in value]
            if dtypes:
                out["cuda_supported_dtypes"] = {"file": platform, "class": node.name, "by_capability": dtypes}
                break
    gate = texts_matching(refusals, r"Bfloat16 is only supported on GPUs")
    out["bf16_gate"] = [{"file": g["file"], "function": g["function"], "template": g["template"]} for g in gate]
    return out


class _AssignScanner(RefusalScanner):
    """Record ``name = <int>`` assignments with their enclosing conditions."""

    def __init__(self, name: str) -> None:
        super().__init__("")
        self.name = name

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(t, ast.Name) and t.id == self.name for t in node.targets):
            self.found.append({"conditions": list(self.conditions), "value": ast.unparse(node.value)})
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name) and node.target.id == self.name and node.value is not None:
            self.found.append({"conditions": list(self.conditions), "value": ast.unparse(node.value)})
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        pass

    def visit_Assert(self, node: ast.Assert) -> None:
        pass

    def visit_Return(self, node: ast.Return) -> None:
        pass

    def visit_Call(self, node: ast.Call) -> None:
        pass


def extract_vllm(wheel: Wheel, version: str, groups: set[str]) -> dict[str, Any]:
    if "model" in groups:
        # the model-type and interface facts only (``--only model``: releases without a full extraction)
        workers = [m for m in ("vllm/worker/worker.py", "vllm/v1/worker/gpu_worker.py", "vllm/platforms/cuda.py")
                   if wheel.has(m)]
        configs = [m for m in ("vllm/config.py", "vllm/config/__init__.py", "vllm/config/model.py") if wheel.has(m)]
        found = scan_refusals(wheel, configs + workers)
        return {"dtype": vllm_dtype(wheel, found), "interfaces": vllm_interfaces(wheel)}
    scan_members = sorted(
        set(
            wheel.files("vllm/config/")
            + [m for m in ("vllm/config.py", "vllm/engine/arg_utils.py") if wheel.has(m)]
            + [m for m in ("vllm/worker/worker.py", "vllm/v1/worker/gpu_worker.py") if wheel.has(m)]
            + wheel.files("vllm/platforms/")
            + wheel.files("vllm/v1/attention/")
            + wheel.files("vllm/attention/")
            + wheel.files("vllm/model_executor/layers/quantization/")
            + wheel.files("vllm/model_executor/kernels/")
            + wheel.files("vllm/model_executor/model_loader/")
            + [m for m in ("vllm/vllm_flash_attn/flash_attn_interface.py",) if wheel.has(m)]
            + ["vllm/model_executor/models/registry.py"]
        )
    )
    refusals = scan_refusals(wheel, scan_members)
    data: dict[str, Any] = {}
    data["architectures"] = vllm_architectures(wheel)
    data["previously_supported"] = vllm_previously_supported(wheel, refusals)
    data["transformers_fallback"] = vllm_transformers_fallback(wheel, refusals)
    data["quantization"] = vllm_quantization(wheel, refusals)
    if "full" in groups:
        data["kernel_min_capabilities"] = kernel_min_capabilities(
            wheel, ["vllm/model_executor/kernels/", "vllm/model_executor/layers/quantization/"]
        )
        data["attention_backends"] = vllm_attention(wheel, refusals)
        data["capability_refusals"] = capability_refusals(refusals)
        data["dtype"] = vllm_dtype(wheel, refusals)
        data["interfaces"] = vllm_interfaces(wheel)
    return data


# ----------------------------------------------------------------------------------------------------------------
# SGLang


def sglang_architectures(wheel: Wheel) -> dict[str, Any]:
    archs: dict[str, Any] = {}
    problems = []
    for member in wheel.files("sglang/srt/models/", recursive=False):
        tree = wheel.tree(member)
        names: list[ast.expr] = []
        for node in _module_level(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets
            ):
                value = node.value
                names = list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value]
            elif (
                isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "EntryClass"
            ):
                value = node.value
                names += list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value]
        for name in names:
            if not isinstance(name, ast.Name):
                problems.append({"file": member, "entry": ast.unparse(name)})
                continue
            found = wheel.resolve_class(member, name.id)
            arch = found[1].name if found else name.id
            entry = {"file": member}
            if found and found[0] != member:
                entry["class_file"] = found[0]
            if arch != name.id:
                entry["entry_name"] = name.id
            if arch in archs:
                problems.append({"file": member, "duplicate": arch})
            archs[arch] = entry
    registry = "sglang/srt/models/registry.py"
    out: dict[str, Any] = {
        "file": "sglang/srt/models/*.py (EntryClass)",
        "count": len(archs),
        "by_arch": archs,
        "note": "arch name = EntryClass member's class __name__ (sglang/srt/models/registry.py import_model_classes)",
    }
    config = wheel.first("sglang/srt/configs/model_config.py")
    if config is not None:
        ctree = wheel.tree(config)
        kinds: dict[str, Any] = {}
        for fn_name in ("is_generation_model", "is_audio_model", "is_encoder_decoder_model"):
            fn = find_function(ctree, fn_name)
            if fn is not None:
                named = sorted(
                    {
                        n.value
                        for n in ast.walk(fn)
                        if isinstance(n, ast.Constant)
                        and isinstance(n.value, str)
                        and re.fullmatch(r"[A-Z]\w+", n.value)
                    }
                )
                kinds[fn_name] = {"archs_named": named, "source": body_source(fn, limit=400)}
        for node in _module_level(ctree):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and "archs" in node.targets[0].id:
                value = resolve_literal(wheel, config, node.value)
                if isinstance(value, (list, tuple, set)):
                    kinds[node.targets[0].id] = sorted(value)
        out["kinds"] = {"file": config, **kinds}
    if problems:
        out["problems"] = problems
    if wheel.has(registry):
        tree = wheel.tree(registry)
        fallback = None
        fn = find_function(tree, "_normalize_archs")
        if fn is not None:
            for call in ast.walk(fn):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "append"
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                ):
                    fallback = call.args[0].value
        refusals = scan_refusals(wheel, [registry])
        out["transformers_fallback"] = {
            "file": registry,
            "function": "_normalize_archs",
            "appended_arch": fallback,
            "rule_source": body_source(fn, limit=2000) if fn is not None else None,
            "errors": texts_matching(refusals, r"not supported for now|failed to be inspected"),
        }
    return out


def sglang_quantization(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    member = "sglang/srt/layers/quantization/__init__.py"
    tree = wheel.tree(member)
    tables: dict[str, dict[str, str]] = {}
    conditional: list[dict[str, Any]] = []
    for node in tree.body:
        value = None
        name = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        if name and isinstance(value, ast.Dict) and name.endswith("QUANTIZATION_METHODS"):
            table: dict[str, str] = {}
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                    table[str(k.value)] = v.id
                elif k is None and isinstance(v, ast.Name) and v.id in tables:
                    table.update(tables[v.id])
            tables[name] = table
        if isinstance(node, ast.If):
            for sub in node.body:
                call = sub.value if isinstance(sub, ast.Expr) else None
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "update"
                    and call.args
                    and isinstance(call.args[0], ast.Dict)
                ):
                    for k, v in zip(call.args[0].keys, call.args[0].values, strict=True):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                            conditional.append(
                                {
                                    "table": ast.unparse(call.func.value),
                                    "condition": ast.unparse(node.test),
                                    "method": k.value,
                                    "class": v.id,
                                }
                            )
    classes: dict[str, Any] = {}

    def describe(cls_name: str) -> dict[str, Any]:
        found = wheel.resolve_class(member, cls_name)
        if found is None:
            return {"class": cls_name, "unresolved": True}
        ref = class_ref(*found)
        if ref not in classes:
            classes[ref] = {
                "file": found[0],
                "min_capability": literal_return(wheel, found[0], found[1], "get_min_capability"),
                "supported_act_dtypes": literal_return(wheel, found[0], found[1], "get_supported_act_dtypes"),
            }
        entry: dict[str, Any] = {"class": cls_name, "class_path": ref, "file": found[0]}
        summarize_min_capability(entry, classes[ref]["min_capability"])
        return entry

    base = tables.get("BASE_QUANTIZATION_METHODS", {})
    by_method = {m: describe(c) for m, c in base.items()}
    cond_out = []
    for item in conditional:
        d = describe(item["class"])
        d.update({"condition": item["condition"], "table": item["table"], "method": item["method"]})
        cond_out.append(d)
    cpu = {m: describe(c) for m, c in tables.get("CPU_QUANTIZATION_METHODS", {}).items()}
    gate = texts_matching(
        refusals,
        r"is not supported for the current GPU|Minimum capability|"
        r"is not supported for quantization method",
    )
    return {
        "file": member,
        "methods": sorted(set(base) | {c["method"] for c in conditional}),
        "by_method": by_method,
        "conditional_methods": sorted(cond_out, key=lambda d: (d["method"], d["condition"])),
        "cpu_methods": cpu,
        "classes": classes,
        "gate_texts": gate,
    }


def sglang_attention(wheel: Wheel, refusals: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    choices = wheel.first("sglang/srt/arg_groups/choices.py", "sglang/srt/server_args.py")
    if choices is not None:
        tree = wheel.tree(choices)
        for name in (
            "ATTENTION_BACKEND_CHOICES",
            "DRAFT_ATTENTION_BACKEND_CHOICES",
            "DETERMINISTIC_ATTENTION_BACKEND_CHOICES",
        ):
            value = module_assign(tree, name)
            if value is not None:
                try:
                    out[name.lower()] = {"file": choices, "value": list(ast.literal_eval(value))}
                except ValueError:
                    pass
    registry = wheel.first("sglang/srt/layers/attention/attention_registry.py")
    if registry is not None:
        tree = wheel.tree(registry)
        backends = {}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if (
                    isinstance(deco, ast.Call)
                    and ast.unparse(deco.func).endswith("register_attention_backend")
                    and deco.args
                    and isinstance(deco.args[0], ast.Constant)
                ):
                    backends[deco.args[0].value] = {
                        "file": registry,
                        "factory": node.name,
                        "refusals": [
                            {k: r[k] for k in ("conditions", "exception", "kind", "template") if k in r}
                            for r in refusals
                            if r["file"] == registry and r["function"] == node.name
                        ],
                    }
        out["registered_backends"] = backends
    return out


def sglang_platform_probes(wheel: Wheel) -> dict[str, Any]:
    """What ``get_platform().is_sm100`` & co. mean: the PlatformContext property -> probe map, and each probe's
    CUDA major list and minimum CUDA toolkit (``partial(_check_cuda_device_version, ...)``)."""
    out: dict[str, Any] = {}
    context = wheel.first("sglang/srt/runtime_context.py")
    if context is not None:
        value = module_assign(wheel.tree(context), "_PLATFORM_PROBES")
        if value is not None:
            try:
                out["properties"] = {"file": context, "value": ast.literal_eval(value)}
            except ValueError:
                pass
    common = wheel.first("sglang/srt/utils/common.py")
    if common is not None:
        probes: dict[str, Any] = {}
        for node in _module_level(wheel.tree(common)):
            if isinstance(node, ast.Assign):
                for call in ast.walk(node.value):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Name)
                        and call.func.id == "partial"
                        and call.args
                        and ast.unparse(call.args[0]) == "_check_cuda_device_version"
                    ):
                        kw = {k.arg: k.value for k in call.keywords if k.arg}
                        try:
                            info = {
                                "cuda_capability_majors": ast.literal_eval(kw["device_capability_majors"]),
                                "min_cuda_toolkit": ".".join(map(str, ast.literal_eval(kw["cuda_version"]))),
                            }
                        except (KeyError, ValueError):
                            continue
                        for target in node.targets:
                            if isinstance(target, ast.Name):
                                probes[target.id] = info
            elif isinstance(node, ast.FunctionDef) and re.fullmatch(r"is_sm\d+\w*", node.name):
                probes[node.name] = {"source": body_source(node)}
        checker = find_function(wheel.tree(common), "_check_cuda_device_version")
        out["probes"] = {
            "file": common,
            "value": probes,
            "checker_source": body_source(checker) if checker is not None else None,
        }
    return out


def _find_callable(wheel: Wheel, members: list[str], names: list[str]) -> tuple[str, ast.FunctionDef] | None:
    """The first function or method named one of ``names`` in the first of ``members`` that defines it."""
    for member in members:
        if not wheel.has(member):
            continue
        for name in names:
            fn = find_function(wheel.tree(member), name)
            if fn is not None:
                return member, fn
    return None


def _default_prefill_backend(wheel: Wheel) -> dict[str, Any] | None:
    """The prefill CUDA-graph backend on CUDA when no flag names one (``model_executor/cuda_graph_config.py``:
    ``default_prefill_backend()``, or the ``prefill`` field's ``PhaseConfig(backend=...)`` before it)."""
    member = "sglang/srt/model_executor/cuda_graph_config.py"
    if not wheel.has(member):
        return None
    tree = wheel.tree(member)
    fn = find_function(tree, "default_prefill_backend")
    if fn is not None:
        for node in ast.walk(fn):
            if isinstance(node, ast.IfExp) and "is_cuda" in ast.unparse(node.test):
                body = node.body
                if isinstance(body, ast.Attribute):
                    return {"file": member, "function": "default_prefill_backend", "backend": body.attr.lower(),
                            "source": ast.unparse(node)}
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "backend" and isinstance(node.value, ast.Attribute):
            text = ast.unparse(node.value)
            if text.startswith("Backend.") and "DISABLED" not in text and "FULL" not in text:
                return {"file": member, "field": "CudaGraphConfig.prefill", "backend": node.value.attr.lower(),
                        "source": text}
    return None


def _rule_list(fn: ast.FunctionDef) -> list[tuple[str | None, ast.expr]]:
    """``rules = [(name, lambda: ...), ...]`` in a compatibility function: each rule's name and predicate."""
    out: list[tuple[str | None, ast.expr]] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.List):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "rules" for t in node.targets):
            continue
        for elt in node.value.elts:
            if isinstance(elt, ast.Tuple) and len(elt.elts) == 2:
                name = elt.elts[0]
                label = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
                pred = elt.elts[1]
                out.append((label, pred.body if isinstance(pred, ast.Lambda) else pred))
    return out


def _allow_list(wheel: Wheel, config: str, attr: str) -> dict[str, Any] | None:
    """``ModelConfig.<attr>`` -> the module function it calls -> the architecture list that function reads."""
    tree = wheel.tree(config)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        if not any(isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
            continue
        for call in ast.walk(node.value):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            fn = find_function(tree, call.func.id)
            if fn is None:
                continue
            for name in ast.walk(fn):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Load):
                    value = module_assign(tree, name.id)
                    archs = resolve_literal(wheel, config, value) if value is not None else None
                    if isinstance(archs, (list, tuple)):
                        return {"file": config, "attribute": attr, "function": fn.name, "list": name.id,
                                "archs": sorted(set(archs))}
    return None


def _hook_order(wheel: Wheel, before: str, after: str) -> dict[str, Any] | None:
    """Whether SGLang resolves the CUDA-graph config (``before``) ahead of sizing memory (``after``): the order
    of the calls in ``arg_groups/pipeline.py`` (0.5.19+) or ``ServerArgs.__post_init__`` (``server_args.py``)."""
    for member in ("sglang/srt/arg_groups/pipeline.py", "sglang/srt/server_args.py"):
        if not wheel.has(member):
            continue
        lines: dict[str, int] = {}
        for node in ast.walk(wheel.tree(member)):
            if isinstance(node, ast.Call):
                text = ast.unparse(node.func) + " " + " ".join(ast.unparse(a) for a in node.args[:1])
                for name in (before, after):
                    if re.search(rf"\b_?{name}\b", text) and name not in lines:
                        lines[name] = node.lineno
        if before in lines and after in lines:
            return {"file": member, "resolved_before_memory_sizing": lines[before] < lines[after]}
    return None


def sglang_prefill_graphs(wheel: Wheel) -> dict[str, Any]:
    """When SGLang turns prefill CUDA graphs off before it sizes memory (its default ``mem_fraction_static``
    reserves memory for them only when they are on): the default backend on CUDA, the compatibility rules of
    that backend (``arg_groups/cuda_graph_hook.py`` from 0.5.19, ``server_args.py`` before), the multimodal
    rule's allow-list (``configs/model_config.py``), and the architectures whose multimodal input is off by
    default (``ModelConfig.__init__``: ``mm_disabled_models``, so SGLang treats them as text models)."""
    out: dict[str, Any] = {}
    default = _default_prefill_backend(wheel)
    if default is None:
        return out
    out["default_backend"] = default
    backend = default["backend"]
    hooks = ["sglang/srt/arg_groups/cuda_graph_hook.py", "sglang/srt/server_args.py"]
    found = _find_callable(wheel, hooks, [f"disable_{backend}_cudagraph_if_incompatible",
                                          f"_disable_{backend}_cudagraph_if_incompatible"])
    config = wheel.first("sglang/srt/configs/model_config.py")
    if found is not None:
        member, fn = found
        rules = _rule_list(fn)
        out["rules"] = {"file": member, "function": fn.name,
                        "names": [name for name, _ in rules if name is not None]}
        for name, pred in rules:
            src = ast.unparse(pred)
            if ".is_multimodal" not in src:
                continue
            rule: dict[str, Any] = {"file": member, "function": fn.name, "rule": name, "condition": src,
                                    "allow_list": None}
            attrs = sorted({a.attr for a in ast.walk(pred) if isinstance(a, ast.Attribute)
                            and re.fullmatch(r"is_multimodal_\w+_supported", a.attr)})
            if attrs and config is not None:
                rule["allow_list"] = _allow_list(wheel, config, attrs[0])
            out["multimodal"] = rule
    compat = _find_callable(wheel, hooks, ["apply_cuda_graph_compatibility", "_apply_cuda_graph_compatibility"])
    if compat is not None:
        # PP turns the default backend off: a check ahead of the per-backend rules (0.5.19+) or one of them
        ahead = any(isinstance(n, ast.Compare) and "pp_size > 1" in ast.unparse(n) for n in ast.walk(compat[1]))
        among = found is not None and any("pp_size > 1" in ast.unparse(p) for _, p in _rule_list(found[1]))
        out["pp_disables"] = {"file": compat[0], "function": compat[1].name, "value": ahead or among}
    if config is not None:
        for node in ast.walk(wheel.tree(config)):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "mm_disabled_models"
                                                    for t in node.targets):
                archs = resolve_literal(wheel, config, node.value)
                if isinstance(archs, list):
                    out["multimodal_off_by_default"] = {"file": config, "list": "mm_disabled_models",
                                                        "archs": sorted(set(archs))}
    order = _hook_order(wheel, "handle_cuda_graph_config", "handle_gpu_memory_settings")
    if order is not None:
        out["order"] = order
    return out


def extract_sglang(wheel: Wheel, version: str, groups: set[str]) -> dict[str, Any]:
    scan_members = sorted(
        set(
            [m for m in ("sglang/srt/server_args.py",) if wheel.has(m)]
            + wheel.files("sglang/srt/arg_groups/")
            + wheel.files("sglang/srt/model_loader/")
            + wheel.files("sglang/srt/layers/quantization/")
            + [m for m in ("sglang/srt/layers/attention/attention_registry.py",) if wheel.has(m)]
        )
    )
    refusals = scan_refusals(wheel, scan_members)
    data: dict[str, Any] = {}
    data["architectures"] = sglang_architectures(wheel)
    data["quantization"] = sglang_quantization(wheel, refusals)
    if "full" in groups:
        data["kernel_min_capabilities"] = kernel_min_capabilities(wheel, ["sglang/srt/layers/quantization/"])
        data["attention_backends"] = sglang_attention(wheel, refusals)
        data["platform_probes"] = sglang_platform_probes(wheel)
        startup = [
            r
            for r in refusals
            if r["file"] == "sglang/srt/server_args.py"
            or r["file"].startswith("sglang/srt/arg_groups/")
            or r["file"].endswith("attention_registry.py")
        ]
        data["capability_refusals"] = capability_refusals(startup)
        data["prefill_graphs"] = sglang_prefill_graphs(wheel)
    return data


# ----------------------------------------------------------------------------------------------------------------
# driver

EXTRACTORS: dict[str, Callable[[Wheel, str, set[str]], dict[str, Any]]] = {
    "vllm": extract_vllm,
    "sglang": extract_sglang,
}


def download(engine: str, version: str, dest: Path, timeout: float = 1800) -> Path:
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
        "-q", f"{engine}=={version}", "-d", str(dest),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=timeout)
    wheels = sorted(dest.glob(f"{engine}-{version}-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"pip download left no {engine} {version} wheel in {dest}")
    return wheels[0]


def extract(engine: str, version: str, wheel_path: Path, groups: set[str] | None = None) -> dict[str, Any]:
    wheel = Wheel(wheel_path)
    facts = EXTRACTORS[engine](wheel, version, groups or {"full"})
    return {
        "engine": engine,
        "version": version,
        "wheel": wheel.info(),
        "extracted_by": EXTRACTED_BY,
        "schema": SCHEMA,
        "groups": sorted(facts),
        **facts,
    }


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def default_out(engine: str) -> Path:
    return REPO_ROOT / "pytest_gpulayout" / "engines" / engine / "releases"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(EXTRACTORS))
    parser.add_argument("version")
    parser.add_argument("--wheel", type=Path, help="a downloaded wheel (default: pip download it)")
    parser.add_argument("--out", type=Path, help="output folder (default: pytest_gpulayout/engines/ENGINE/releases)")
    parser.add_argument(
        "--only", choices=["basic", "full", "model"], default="full",
        help="basic: architectures + quantization only (older releases); model: dtype + interfaces only (vLLM "
             "releases between full extractions); full: everything",
    )  # fmt: skip
    parser.add_argument(
        "--merge", action="store_true",
        help="add the extracted groups to the release's existing file, keeping its other groups and wheel",
    )
    args = parser.parse_args(argv)
    out_dir = args.out or default_out(args.engine)
    groups = {args.only}
    if args.wheel is not None:
        data = extract(args.engine, args.version, args.wheel, groups)
        engine_requires.update(args.engine, [args.wheel])  # the wheel's Requires-Dist (engines/ENGINE/requires.json)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            wheel_path = download(args.engine, args.version, Path(tmp))
            data = extract(args.engine, args.version, wheel_path, groups)
            engine_requires.update(args.engine, [wheel_path])
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{args.version}.json"
    if args.merge and target.exists():
        old = json.loads(target.read_text(encoding="utf-8"))
        added = [g for g in data["groups"]]
        data = {**old, **{g: data[g] for g in added}, "groups": sorted(set(old["groups"]) | set(added))}
    text = dump(data)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
