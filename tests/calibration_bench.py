"""``benchmarks/bench_calibration.py`` loaded once as a module (it is a script, not a package): the
calibration tests and the ledger's test read the same cases and the same predictions from it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    loaded = sys.modules.get("bench_calibration")
    if loaded is not None:
        return loaded
    path = REPO / "benchmarks" / "bench_calibration.py"
    spec = importlib.util.spec_from_file_location("bench_calibration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_calibration"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()
