"""The GPU-machine script (``tests/device/live_probe.py``) runs end to end against the fake NVML, so
the few minutes a lent GPU machine gives are not spent on a script that broke here."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

from fake_pynvml import FakeNvml

import pytest_gpulayout.machine.probe as probe_mod
from pytest_gpulayout.machine.presets import load_preset

SCRIPT = Path(__file__).resolve().parents[1] / "device" / "live_probe.py"


def test_live_probe_writes_a_snapshot_with_the_reservation(tmp_path, monkeypatch):
    m = load_preset("2xL4-pcie")
    m = replace(m, gpus=tuple(replace(g, memory_reserved_mib=470) for g in m.gpus))
    fake = FakeNvml(m)
    real_probe = probe_mod.probe
    monkeypatch.setattr(probe_mod, "probe", lambda: real_probe(nvml=fake, env={}, host_root=tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch here: the CUDA cross-check is skipped
    spec = importlib.util.spec_from_file_location("live_probe", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["live_probe.py", "--out", str(out)])
    assert script.main() == 0
    snap = json.loads((out / "snapshot.json").read_text())
    assert [g["memory_reserved_mib"] for g in snap["gpus"]] == [470, 470]
    report = (out / "report.txt").read_text()
    assert "reserved=492830720" in report and "torch not importable" in report
