#!/usr/bin/env python3
"""List every config-time refusal of each engine release, from its released source, into a ledger.

    python tools/config_ledger.py vllm /work/wheels/src/vllm-0.*            # unpacked wheels
    python tools/config_ledger.py vllm vllm-0.33.0-cp38-abi3-manylinux1_x86_64.whl vllm-0.32.0-...whl
    python tools/config_ledger.py sglang 0.5.22 0.5.23                      # pip download --no-deps each
    python tools/config_ledger.py vllm --check /work/wheels/src/vllm-0.*    # exit 1 when the ledger is not current

A source is a wheel file (read with ``zipfile``), a folder holding an unpacked wheel (``<engine>-<version>``, or
one with a ``.wheel`` file naming the wheel), or a version that ``pip download --no-deps --only-binary=:all:``
fetches. Nothing is installed or imported: each file is parsed with ``ast``.

What is listed (``SCANNED``): every ``raise``, ``assert`` and exit (``sys.exit`` / ``exit`` / ``os._exit``,
with the ``logger.error`` before it as its message) in

- vLLM: ``vllm/config.py`` (before 0.10) and ``vllm/config/*.py`` (the config classes: ``__post_init__``,
  ``verify_*``, ``_verify_*``), ``vllm/engine/arg_utils.py`` (``create_engine_config`` and what it calls there);
- SGLang: ``sglang/srt/server_args.py`` (``__post_init__``, ``check_server_args``, the ``_handle_*`` methods)
  and ``sglang/srt/arg_groups/`` (the hooks those moved to in 0.5.19+).

A refusal is keyed by its file, its function (``Class.method``), the chain of conditions it sits under (each
enclosing ``if`` as written, ``not (...)`` in an ``else``, ``except X``, ``for x in y``), its exception class
and its message as an f-string template (literal text verbatim, ``{{`` ``}}`` for literal braces, each
interpolation ``{expression!conversion:spec}`` as written). Identical refusals of several releases are one
entry with the releases it appears in and its line in each (``at``: runs of consecutive listed releases that
share a line). The output is sorted JSON, so a new release is a re-run and a reviewable diff.

The hand-kept classification of each entry lives beside the ledger (``config_classes.yaml``); the test
``tests/engines/test_config_ledger.py`` fails when an entry has none.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

EXTRACTED_BY = "tools/config_ledger.py"
SCHEMA = 1
REPO_ROOT = Path(__file__).resolve().parent.parent

#: the files each engine's config-time refusals live in (prefixes end in "/": every .py below)
SCANNED: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm/config.py", "vllm/config/", "vllm/engine/arg_utils.py"),
    "sglang": ("sglang/srt/server_args.py", "sglang/srt/arg_groups/"),
}
_EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit"}
_LOG_ERROR = re.compile(r"^(logger|logging|log)\.(error|critical|fatal|exception)$")


# ----------------------------------------------------------------------------------------------------------------
# sources


class Source:
    """A released wheel's Python files: a ``.whl`` (zipfile) or the folder it was unpacked into."""

    def __init__(self, path: Path, version: str | None = None) -> None:
        self.path = path
        if path.is_dir():
            self._zip: zipfile.ZipFile | None = None
            self.names = {p.relative_to(path).as_posix() for p in path.rglob("*.py")}
            marker = path / ".wheel"
            self.wheel = marker.read_text().strip() if marker.exists() else path.name
        else:
            self._zip = zipfile.ZipFile(path)
            self.names = {n for n in self._zip.namelist() if n.endswith(".py")}
            self.wheel = path.name
        self.version = version or _version_of(self.wheel)

    def text(self, member: str) -> str:
        if self._zip is not None:
            return self._zip.read(member).decode("utf-8")
        return (self.path / member).read_text(encoding="utf-8")

    def members(self, patterns: Iterable[str]) -> list[str]:
        out = set()
        for pattern in patterns:
            if pattern.endswith("/"):
                out.update(n for n in self.names if n.startswith(pattern))
            elif pattern in self.names:
                out.add(pattern)
        return sorted(out)


def _version_of(name: str) -> str:
    """``vllm-0.33.0-cp38-abi3-manylinux1_x86_64.whl`` / ``sglang-0.5.23`` -> the version."""
    parts = name.split("-")
    for part in parts[1:]:
        try:
            Version(part)
        except InvalidVersion:
            continue
        return part
    raise SystemExit(f"config_ledger: cannot tell the release of {name!r} (name it <engine>-<version>)")


# ----------------------------------------------------------------------------------------------------------------
# message templates


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def template(node: ast.expr | None, fn: ast.AST | None, depth: int = 0) -> str | None:
    """The message ``node`` builds, as a template (see the module's docstring); None when it is no string."""
    if node is None or depth > 6:
        return None
    if isinstance(node, ast.Constant):
        return _escape(node.value) if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(_escape(str(value.value)))
            elif isinstance(value, ast.FormattedValue):
                conv = {114: "!r", 115: "!s", 97: "!a"}.get(value.conversion, "")
                spec = ""
                if value.format_spec is not None:
                    inner = template(value.format_spec, fn, depth + 1) or ""
                    spec = ":" + inner.replace("{{", "{").replace("}}", "}")
                parts.append("{" + ast.unparse(value.value) + conv + spec + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left, fn, depth + 1), template(node.right, fn, depth + 1)
        if left is None and right is None:
            return None
        return (left if left is not None else "{" + ast.unparse(node.left) + "}") + (
            right if right is not None else "{" + ast.unparse(node.right) + "}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = template(node.left, fn, depth + 1)
        return None if left is None else f"{left} % {{{ast.unparse(node.right)}}}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        left = template(node.func.value, fn, depth + 1)
        if left is not None:
            args = [ast.unparse(a) for a in node.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in node.keywords]
            return f"{left}.format({{{', '.join(args)}}})"
        return None
    if isinstance(node, ast.Name) and fn is not None:
        # the assignment nearest above the use (``ast.walk`` goes breadth first, not in source order: the last
        # one walked can be another branch's, vLLM 0.9.2 ``ModelConfig._resolve_task``'s ``msg``)
        found = [sub for sub in ast.walk(fn) if isinstance(sub, ast.Assign) and sub.lineno <= node.lineno
                 and any(isinstance(t, ast.Name) and t.id == node.id for t in sub.targets)]
        if found:
            return template(max(found, key=lambda a: a.lineno).value, fn, depth + 1)
    return None


# ----------------------------------------------------------------------------------------------------------------
# the scan


@dataclass(frozen=True)
class Found:
    file: str
    function: str
    kind: str                  # raise | assert | exit
    exception: str
    conditions: tuple[str, ...]
    template: str
    line: int

    def key(self) -> tuple[str, str, str, str, tuple[str, ...], str]:
        return (self.file, self.function, self.kind, self.exception, self.conditions, self.template)


def _call_name(node: ast.expr) -> str:
    return ast.unparse(node.func) if isinstance(node, ast.Call) else ""


class _Scan:
    """Walk one module's statements with the enclosing scopes and conditions."""

    def __init__(self, member: str) -> None:
        self.member = member
        self.found: list[Found] = []

    def module(self, tree: ast.Module) -> None:
        self.body(tree.body, [], (), None)

    def _add(self, scope: list[str], conds: tuple[str, ...], kind: str, exc: str, message: str | None,
             line: int) -> None:
        self.found.append(Found(self.member, ".".join(scope) or "<module>", kind, exc, conds, message or "", line))

    def body(self, stmts: list[ast.stmt], scope: list[str], conds: tuple[str, ...], fn: ast.AST | None) -> None:
        last_error: str | None = None
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.body(stmt.body, scope + [stmt.name], (), stmt)
            elif isinstance(stmt, ast.ClassDef):
                self.body(stmt.body, scope + [stmt.name], (), None)
            elif isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                self.body(stmt.body, scope, conds + (test,), fn)
                self.body(stmt.orelse, scope, conds + (f"not ({test})",), fn)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                loop = f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}"
                self.body(stmt.body, scope, conds + (loop,), fn)
                self.body(stmt.orelse, scope, conds + (f"after {loop}",), fn)
            elif isinstance(stmt, ast.While):
                test = ast.unparse(stmt.test)
                self.body(stmt.body, scope, conds + (f"while {test}",), fn)
                self.body(stmt.orelse, scope, conds + (f"after while {test}",), fn)
            elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                self.body(stmt.body, scope, conds, fn)
                for h in stmt.handlers:
                    caught = f"except {ast.unparse(h.type)}" if h.type is not None else "except"
                    self.body(h.body, scope, conds + (caught,), fn)
                self.body(stmt.orelse, scope, conds, fn)
                self.body(stmt.finalbody, scope, conds, fn)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                self.body(stmt.body, scope, conds, fn)
            elif isinstance(stmt, ast.Match):
                subject = ast.unparse(stmt.subject)
                for case in stmt.cases:
                    pattern = f"match {subject} case {ast.unparse(case.pattern)}"
                    if case.guard is not None:
                        pattern += f" if {ast.unparse(case.guard)}"
                    self.body(case.body, scope, conds + (pattern,), fn)
            elif isinstance(stmt, ast.Raise):
                if stmt.exc is None:
                    continue  # a bare re-raise refuses nothing of its own
                if isinstance(stmt.exc, ast.Call):
                    arg = stmt.exc.args[0] if stmt.exc.args else None
                    self._add(scope, conds, "raise", ast.unparse(stmt.exc.func), template(arg, fn), stmt.lineno)
                else:
                    self._add(scope, conds, "raise", ast.unparse(stmt.exc), None, stmt.lineno)
            elif isinstance(stmt, ast.Assert):
                self._add(scope, conds + (f"not ({ast.unparse(stmt.test)})",), "assert", "AssertionError",
                          template(stmt.msg, fn), stmt.lineno)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                name = _call_name(stmt.value)
                if _LOG_ERROR.match(name) and stmt.value.args:
                    last_error = template(stmt.value.args[0], fn)
                elif name in _EXIT_CALLS:
                    self._add(scope, conds, "exit", "SystemExit", last_error, stmt.lineno)


def scan(source: Source, engine: str) -> list[Found]:
    out: list[Found] = []
    for member in source.members(SCANNED[engine]):
        scanner = _Scan(member)
        scanner.module(ast.parse(source.text(member), filename=member))
        out.extend(scanner.found)
    return out


# ----------------------------------------------------------------------------------------------------------------
# the ledger


def entry_id(key: tuple[Any, ...]) -> str:
    return hashlib.sha1(json.dumps(key).encode()).hexdigest()[:10]


def runs(releases: list[str], lines: dict[str, int]) -> list[list[Any]]:
    """``[[first, last, line], ...]``: consecutive listed releases in which the entry sits on one line."""
    out: list[list[Any]] = []
    prev_index = -2
    for index, release in enumerate(releases):
        if release not in lines:
            continue
        line = lines[release]
        if out and prev_index == index - 1 and out[-1][2] == line:
            out[-1][1] = release
        else:
            out.append([release, release, line])
        prev_index = index
    return out


def build(engine: str, sources: list[Source]) -> dict[str, Any]:
    sources = sorted(sources, key=lambda s: Version(s.version))
    releases = [s.version for s in sources]
    entries: dict[tuple[Any, ...], dict[str, Any]] = {}
    lines: dict[tuple[Any, ...], dict[str, int]] = {}
    for source in sources:
        for found in scan(source, engine):
            key = found.key()
            if key not in entries:
                entries[key] = {"file": found.file, "function": found.function, "kind": found.kind,
                                "exception": found.exception, "conditions": list(found.conditions),
                                "template": found.template}
            # one key twice in one release (a copy-pasted check): the first line answers
            lines.setdefault(key, {}).setdefault(source.version, found.line)
    out = []
    for key, entry in entries.items():
        out.append({"id": entry_id(key), **entry, "at": runs(releases, lines[key])})
    out.sort(key=lambda e: (e["file"], e["function"], e["at"][0][2], e["id"]))
    return {
        "engine": engine,
        "extracted_by": EXTRACTED_BY,
        "schema": SCHEMA,
        "scanned": list(SCANNED[engine]),
        "releases": releases,
        "wheels": {s.version: s.wheel for s in sources},
        "entries": out,
    }


def dump(data: dict[str, Any]) -> str:
    """One entry per line: compact, and a re-run is a line-by-line diff."""
    head = {k: v for k, v in data.items() if k != "entries"}
    lines = [json.dumps(e, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for e in data["entries"]]
    text = json.dumps(head, sort_keys=True, ensure_ascii=False, separators=(",", ":"))[:-1]
    return text + ',"entries":[\n' + ",\n".join(lines) + "\n]}\n"


def default_out(engine: str) -> Path:
    return REPO_ROOT / "pytest_gpulayout" / "engines" / engine / "config_ledger.json"


def download(engine: str, version: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", f"{engine}=={version}", "-d", str(dest)]
    subprocess.run(cmd, check=True, timeout=1800)
    found = sorted(dest.glob(f"{engine}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"config_ledger: pip download left no {engine} {version} wheel in {dest}")
    return found[0]


def open_sources(engine: str, given: list[str], tmp: Path) -> Iterator[Source]:
    for item in given:
        path = Path(item)
        if path.exists():
            if path.is_dir() and (path / ".wheel").exists() and not (path / ".complete").exists():
                raise SystemExit(f"config_ledger: {path} is still being unpacked (no .complete beside .wheel)")
            yield Source(path)
        else:
            yield Source(download(engine, item, tmp))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(SCANNED))
    parser.add_argument("sources", nargs="+", help="wheel files, unpacked wheel folders, or versions to download")
    parser.add_argument("--out", type=Path, help="default: pytest_gpulayout/engines/ENGINE/config_ledger.json")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    out = args.out or default_out(args.engine)
    with tempfile.TemporaryDirectory() as tmp:
        data = build(args.engine, list(open_sources(args.engine, args.sources, Path(tmp))))
    text = dump(data)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            print(f"{out} is not current: re-run without --check", file=sys.stderr)
            return 1
        print(f"{out} is current ({len(data['entries'])} entries, {len(data['releases'])} releases)")
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}: {len(data['entries'])} entries over {len(data['releases'])} releases "
          f"({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
