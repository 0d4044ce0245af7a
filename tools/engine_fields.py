#!/usr/bin/env python3
"""Extract the dataclass fields of each vLLM release's ``AsyncEngineArgs`` (with ``EngineArgs``, its base) and
``FrontendArgs`` (with ``BaseFrontendArgs``) from its released files, into
``pytest_gpulayout/engines/vllm/fields/releases.json``.

Ray Serve LLM hands ``engine_kwargs`` to vLLM as these fields, not as command-line flags
(``ray/llm/_internal/serve/engines/vllm/vllm_models.py VLLMEngineConfig.from_llm_config``: a key of neither
dataclass is ``ValueError: Unknown engine argument: KEY``); ``artifacts/rayserve.py`` reads the table.

    python tools/engine_fields.py --src /path/to/unpacked            # every DIR/vllm-<version>/ inside
    python tools/engine_fields.py --wheel vllm-0.10.2-...whl [--wheel ...]

Wheels are read with ``zipfile`` (or from the folder) and parsed with ``ast``; nothing is imported. Each
release records its fields' names and the member and line of each class; the file keeps the first release in
full and every later one as the names it adds and drops.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

TOOLS = Path(__file__).resolve().parent
REPO_ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from flags_source import Sources  # noqa: E402

OUT = REPO_ROOT / "pytest_gpulayout" / "engines" / "vllm" / "fields" / "releases.json"
#: where each release declares the classes (``entrypoints/common/cli_args.py`` from 0.33)
MEMBERS = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py")
CLASSES = {"engine": ("AsyncEngineArgs", "EngineArgs"), "frontend": ("FrontendArgs", "BaseFrontendArgs")}


def _fields(cls: ast.ClassDef) -> list[str]:
    out: list[str] = []
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            out.append(stmt.target.id)
    return out


def extract(src: Sources) -> dict[str, Any]:
    classes: dict[str, tuple[str, ast.ClassDef]] = {}
    for member in MEMBERS:
        if not src.has(member):
            continue
        for node in src.tree(member).body:
            if isinstance(node, ast.ClassDef) and any(node.name in names for names in CLASSES.values()):
                classes.setdefault(node.name, (member, node))
    fields: dict[str, list[str]] = {}
    at: dict[str, str] = {}
    for group, names in CLASSES.items():
        seen: list[str] = []
        for name in names:  # the class and the base it extends: dataclass fields are inherited
            if name in classes:
                member, node = classes[name]
                at[name] = f"{member}:{node.lineno}"
                seen += [f for f in _fields(node) if f not in seen]
        fields[group] = sorted(seen)
    if not fields["engine"]:
        raise SystemExit(f"{src.wheel}: no EngineArgs dataclass in {', '.join(MEMBERS)}")
    return {"fields": sorted(set(fields["engine"]) | set(fields["frontend"])), "at": at}


def _version_of(name: str) -> str:
    m = re.search(r"vllm-(\d[^-/]*?)(?:-cp|-py|$)", name)
    if not m:
        raise SystemExit(f"{name}: not a vllm wheel or unpacked vllm-<version> folder")
    return m.group(1)


def pack(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    prev: set[str] = set()
    for version in sorted(records, key=Version):
        rec = records[version]
        now = set(rec["fields"])
        entry: dict[str, Any] = {"version": version, "at": rec["at"]}
        if not out:
            entry["fields"] = sorted(now)
        else:
            entry["add"], entry["drop"] = sorted(now - prev), sorted(prev - now)
        out.append(entry)
        prev = now
    return {"engine": "vllm", "extracted_by": "tools/engine_fields.py", "releases": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, help="a folder of unpacked vllm-<version>/ wheels")
    ap.add_argument("--wheel", type=Path, action="append", default=[], help="a vllm wheel file (repeatable)")
    args = ap.parse_args(argv)
    paths: list[Path] = list(args.wheel)
    if args.src:
        paths += sorted(p for p in args.src.iterdir() if p.is_dir() and p.name.startswith("vllm-")
                        and (p / "vllm" / "engine" / "arg_utils.py").is_file())
    if not paths:
        ap.error("give --src or --wheel")
    records = {_version_of(p.name): extract(Sources(p)) for p in paths}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(pack(records), indent=1, sort_keys=True) + "\n")
    print(f"{OUT.relative_to(REPO_ROOT)}: {len(records)} releases ({', '.join(sorted(records, key=Version))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
