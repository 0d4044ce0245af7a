"""Shared test configuration: pytester for the plugin's own tests, and the builders every test module
uses (``builders.py``: machines, deployments, model specs) importable from any test directory."""

from __future__ import annotations

import sys
from pathlib import Path

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE / "fakes"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
