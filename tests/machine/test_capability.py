"""Each GPU's compute capability: NVML gives it, snapshots keep it, presets carry it, and files without it
get it from the GPU's name with a note saying so (``machine/capability.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fake_pynvml import FakeNvml

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.capability import capability_from_name
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.presets import list_presets, load_preset
from pytest_gpulayout.machine.probe import probe
from pytest_gpulayout.machine.snapshot import dump_snapshot, load_snapshot

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize(("name", "cc"), [
    ("Tesla T4", (7, 5)), ("Tesla V100-SXM2-32GB", (7, 0)), ("NVIDIA A100-SXM4-80GB", (8, 0)),
    ("NVIDIA A100 80GB PCIe", (8, 0)), ("NVIDIA A30", (8, 0)), ("NVIDIA A10", (8, 6)), ("NVIDIA A10G", (8, 6)),
    ("NVIDIA A40", (8, 6)), ("NVIDIA A16", (8, 6)), ("NVIDIA A2", (8, 6)), ("NVIDIA L4", (8, 9)),
    ("NVIDIA L40", (8, 9)), ("NVIDIA L40S", (8, 9)), ("NVIDIA GeForce RTX 4090", (8, 9)),
    ("NVIDIA GeForce RTX 3090", (8, 6)), ("NVIDIA GeForce RTX 2080 Ti", (7, 5)),
    ("NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA H200", (9, 0)), ("NVIDIA H20", (9, 0)),
    ("NVIDIA GH200 480GB", (9, 0)), ("NVIDIA B200", (10, 0)), ("NVIDIA GB200", (10, 0)),
    ("NVIDIA GeForce RTX 5090", (12, 0)), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0)),
    ("NVIDIA RTX 6000 Ada Generation", (8, 9)), ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", (8, 0)),
    ("NVIDIA Mystery 9000", None), ("", None),
])
def test_capability_from_the_gpu_name(name, cc):
    assert capability_from_name(name) == cc


def test_nvml_gives_each_gpu_its_capability(tmp_path):
    m = load_preset("2xL4-pcie")
    t4 = Machine(gpus=(replace(m.gpus[0], name="Tesla T4", compute_capability=None),
                       replace(m.gpus[1], name="Tesla T4", compute_capability=None)),
                 links=m.links, driver=m.driver, source="test")
    fake = FakeNvml(t4)
    got = probe(nvml=fake, env={}, host_root=tmp_path)
    assert [g.compute_capability for g in got.gpus] == [(7, 5), (7, 5)]
    assert any(c[0] == "nvmlDeviceGetCudaComputeCapability" for c in fake.calls)
    assert not any("compute capability" in n for n in got.notes)


def test_a_gpu_nvml_gives_no_capability_for_falls_back_to_its_name(tmp_path):
    m = Machine(gpus=(Gpu(0, "GPU-0", "NVIDIA Mystery 9000", "00000000:01:00.0", 1000, 900),), source="t")
    got = probe(nvml=FakeNvml(m), env={}, host_root=tmp_path)
    assert got.gpus[0].compute_capability is None


def test_snapshot_keeps_the_capability_and_old_snapshots_derive_it(tmp_path):
    m = load_preset("2xL4-pcie")
    assert [g.compute_capability for g in m.gpus] == [(8, 9), (8, 9)]
    assert not any("compute capability" in n for n in m.notes)
    text = dump_snapshot(m)
    assert 'compute_capability: "8.9"' in text or "compute_capability: '8.9'" in text
    old = tmp_path / "old.yaml"
    old.write_text("\n".join(line for line in text.splitlines() if "compute_capability" not in line))
    got = load_snapshot(old)
    assert [g.compute_capability for g in got.gpus] == [(8, 9), (8, 9)]
    assert any("compute capability from the GPU name" in n for n in got.notes)
    dgx1 = load_snapshot(DATA / "snapshots" / "dgx1-v100.yaml")
    assert {g.compute_capability for g in dgx1.gpus} == {(7, 0)}


def test_a_malformed_capability_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(dump_snapshot(load_preset("2xL4-pcie")).replace('"8.9"', '"sm89"', 1)
                   .replace("'8.9'", "'sm89'", 1))
    with pytest.raises(InputError, match=r"gpus\[0\]\.compute_capability"):
        load_snapshot(bad)


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_carries_the_capability(name):
    assert all(g.compute_capability is not None for g in load_preset(name).gpus)
