#!/usr/bin/env python3
"""Record each release's unconditional wheel requirements (``Requires-Dist`` of its ``*.dist-info/METADATA``)
in ``pytest_gpulayout/engines/ENGINE/requires.json``: what every install of the release shares, whatever image
it is in.

    python tools/engine_requires.py vllm /work/wheels/src/vllm-0.15.0 [/work/wheels/src/vllm-0.16.0 ...]

Each argument is a wheel (``.whl``) or the folder it was unpacked into. A requirement under an extra
(``extra == "..."``) is left out: a plain ``pip install ENGINE==VER`` does not install it. The others are kept
as ``[name, specifier, marker, on]`` (the name normalized as PEP 503 says, extras dropped; "" where there is no
specifier or marker; ``on``: the machines of ``MACHINES`` on which the marker holds for every CPython of
``PYTHONS``, evaluated here so that the checks never import a marker grammar), in the wheel's order.
``tools/engine_facts.py`` calls ``update`` for the wheel it reads, so a re-extraction records them too.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import sys
import zipfile
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parent.parent


def canonical(name: str) -> str:
    """The PEP 503 normal form of a distribution name (``flashinfer_python`` -> ``flashinfer-python``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


#: the machines the checks judge (NVIDIA GPUs on Linux) and the CPython minors a release may run on
MACHINES = ("x86_64", "aarch64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")


def holds_on(marker: str) -> str:
    """The machines of ``MACHINES`` (comma-joined) on which ``marker`` holds for every CPython of ``PYTHONS``."""
    if not marker:
        return ",".join(MACHINES)
    m = Marker(marker)
    return ",".join(machine for machine in MACHINES if all(
        m.evaluate({"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                    "platform_machine": machine, "python_version": py, "python_full_version": f"{py}.0",
                    "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""})
        for py in PYTHONS))  # fmt: skip


def requirements(metadata: str) -> list[list[str]]:
    """The ``Requires-Dist`` lines of ``metadata`` that no extra guards, as ``[name, specifier, marker, on]``."""
    out: list[list[str]] = []
    for value in email.parser.HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []:
        req = Requirement(value.strip())
        marker = str(req.marker) if req.marker is not None else ""
        if re.search(r"\bextra\s*==", marker):
            continue
        out.append([canonical(req.name), str(req.specifier), marker, holds_on(marker)])
    return out


def metadata_of(path: Path) -> tuple[str, str]:
    """(``name-version``, METADATA text) of a wheel or an unpacked wheel folder."""
    if path.is_dir():
        found = sorted(path.glob("*.dist-info/METADATA"))
        if not found:
            raise FileNotFoundError(f"no *.dist-info/METADATA in {path}")
        return found[0].parent.name.removesuffix(".dist-info"), found[0].read_text(encoding="utf-8")
    with zipfile.ZipFile(path) as zf:
        member = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        return member.split("/")[0].removesuffix(".dist-info"), zf.read(member).decode("utf-8")


def version_of(metadata: str) -> str:
    """The ``Version:`` header of ``metadata``."""
    version = email.parser.HeaderParser().parsestr(metadata).get("Version")
    if version is None:
        raise ValueError("METADATA has no Version header")
    return str(version).strip()


def default_out(engine: str) -> Path:
    return REPO_ROOT / "pytest_gpulayout" / "engines" / engine / "requires.json"


def update(engine: str, paths: list[Path], out: Path | None = None) -> Path:
    """Add (or replace) the releases of ``paths`` in the engine's requires.json; releases sorted by version."""
    from packaging.version import Version

    target = out or default_out(engine)
    data: dict[str, object] = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
    releases: dict[str, list[list[str]]] = dict(data.get("releases", {}))  # type: ignore[call-overload]
    for path in paths:
        _, text = metadata_of(path)
        releases[version_of(text)] = requirements(text)
    ordered = {v: releases[v] for v in sorted(releases, key=Version)}
    doc = {"engine": engine, "extracted_by": "tools/engine_requires.py", "source": "Requires-Dist of the wheel's "
           "METADATA, requirements under an extra left out", "releases": ordered}  # fmt: skip
    lines = ["{"]
    head = {k: v for k, v in doc.items() if k != "releases"}
    lines += [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "releases": {')
    body = [f"  {json.dumps(v)}: [\n" + ",\n".join(f"   {json.dumps(r)}" for r in reqs) + "\n  ]"
            for v, reqs in ordered.items()]  # fmt: skip
    lines.append(",\n".join(body))
    lines += [" }", "}"]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=["vllm", "sglang"])
    parser.add_argument("wheels", nargs="+", type=Path, help="wheels or unpacked wheel folders")
    parser.add_argument("--out", type=Path, help="output file (default: pytest_gpulayout/engines/ENGINE/requires.json)")
    args = parser.parse_args(argv)
    target = update(args.engine, list(args.wheels), args.out)
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
