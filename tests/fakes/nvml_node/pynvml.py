"""``import pynvml`` on one node of the tests' local Ray cluster: the snapshot-driven fake NVML.

This folder goes first on a node's ``PYTHONPATH`` (set for that node's raylet only, by the Ray
fixture), so the unchanged probe code imports this instead of nvidia-ml-py. It loads the real
binding (the fake takes its constants, structs and exception classes from it), builds
``fake_pynvml.FakeNvml`` from the machine snapshot named by ``GPULAYOUT_TEST_NVML_SNAPSHOT`` and
puts that object in ``sys.modules["pynvml"]``, which is what the import statement then returns.
Faults for one node, by environment variable: ``GPULAYOUT_TEST_NVML_HANG`` (import blocks: the
probe does not answer), ``GPULAYOUT_TEST_NVML_INIT_ERROR`` (``nvmlInit`` fails with that NVML code).
"""

import importlib.machinery
import importlib.util
import os
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_TESTS = _HERE.parent.parent

if os.environ.get("GPULAYOUT_TEST_NVML_HANG"):
    time.sleep(float(os.environ["GPULAYOUT_TEST_NVML_HANG"]))

_spec = importlib.machinery.PathFinder.find_spec(
    "pynvml", [p for p in sys.path if Path(p or ".").resolve() != _HERE])
if _spec is None or _spec.loader is None:
    raise ImportError("the real nvidia-ml-py is not installed")
_real = importlib.util.module_from_spec(_spec)
sys.modules["pynvml"] = _real
_spec.loader.exec_module(_real)

sys.path.insert(0, str(_TESTS / "fakes"))
import fake_pynvml  # noqa: E402

from pytest_gpulayout.machine.snapshot import load_snapshot  # noqa: E402

_error = os.environ.get("GPULAYOUT_TEST_NVML_INIT_ERROR")
sys.modules["pynvml"] = fake_pynvml.FakeNvml(  # type: ignore[assignment]
    load_snapshot(os.environ["GPULAYOUT_TEST_NVML_SNAPSHOT"]),
    init_error=int(_error) if _error else None,
)
