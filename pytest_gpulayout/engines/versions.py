"""Engine versions and the defaults that depend on them.

Defaults move between releases (vLLM's ``gpu_memory_utilization`` went from 0.9 to 0.92 in 0.20;
SGLang replaced a step table with a formula in 0.5), so every default is looked up, in the engine's
module (``engines/vllm.py``, ``engines/sglang.py``), for a version:
the one pinned in the manifest (``engine_version``), else the one installed on the ``Host`` (read once
at the edges from package metadata, ``host.py``), else the newest we have read.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.engines import ENGINE_NAMES, ENGINES
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import BARE_HOST, Host

#: Newest releases whose source the rules were read from, by engine.
LATEST_KNOWN = {name: engine.latest_known for name, engine in ENGINES.items()}


def check_engine(engine: str) -> str:
    """The engine's manifest name, lower case; an ``InputError`` naming the key for any other."""
    e = engine.lower()
    if e not in ENGINES:
        raise InputError(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINE_NAMES)})",
                         key="engine")
    return e


def parse_version(text: str, *, key: str = "engine_version") -> Version:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise InputError(f"not a version: {text!r} (e.g. 0.11.0)", key=key) from None


def resolve_version(engine: str, pinned: str | None, host: Host = BARE_HOST) -> tuple[Version, str]:
    """The engine version defaults are taken for, and where it came from.

    ``pinned`` (the deployment's ``engine_version``) wins: it lets a CI machine without the engine
    check what the GPU host will run. Then the package installed on ``host``. Else the newest release we know,
    which the source string says, so a report never hides that it assumed.
    """
    e = check_engine(engine)
    if pinned is not None and str(pinned).strip():
        return parse_version(pinned), "pinned"
    found = host.installed(e)
    if found is not None:
        try:
            return Version(found), "installed"
        except InvalidVersion:
            pass
    return Version(LATEST_KNOWN[e]), "assumed latest known"
