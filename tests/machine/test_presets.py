"""Bundled presets: the machines people plan for, with NVML's own numbers for real cards."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.presets import list_presets, load_preset, preset_text

REQUIRED = {"2xL4-pcie", "2x32gb-pcie", "4xA100-80gb-sxm", "8xH100-sxm", "8xH200", "8xL40S-2socket"}

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BUS_RE = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")
DRIVER_RE = re.compile(r"^\d{3}\.\d{2,3}(\.\d{2})?$")


def test_required_presets_are_listed():
    assert REQUIRED <= set(list_presets())
    assert list_presets() == sorted(list_presets())


@pytest.mark.parametrize(
    ("name", "count", "model", "total", "kinds"),
    [
        ("2xL4-pcie", 2, "NVIDIA L4", 23034, {"PHB"}),
        ("2x32gb-pcie", 2, "NVIDIA RTX 5000 Ada Generation", 32760, {"PHB"}),
        ("4xA100-80gb-sxm", 4, "NVIDIA A100-SXM4-80GB", 81920, {"NV12"}),
        ("8xH100-sxm", 8, "NVIDIA H100 80GB HBM3", 81559, {"NV18"}),
        ("8xH200", 8, "NVIDIA H200", 143771, {"NV18"}),
        ("8xL40S-2socket", 8, "NVIDIA L40S", 46068, {"NODE", "SYS"}),
    ],
)
def test_preset_facts(name, count, model, total, kinds):
    m = load_preset(name)
    assert m.source == f"preset:{name}"
    assert len(m.gpus) == count
    assert {g.name for g in m.gpus} == {model}
    assert {g.memory_total_mib for g in m.gpus} == {total}
    assert set(m.links.values()) == kinds
    assert len(m.links) == count * (count - 1) // 2  # every pair known


def test_l40s_two_sockets_node_inside_sys_across():
    m = load_preset("8xL40S-2socket")
    assert [g.numa_node for g in m.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    for i, j, kind in m.links_within(range(8)):
        same_socket = m.gpu(i).numa_node == m.gpu(j).numa_node
        assert kind == ("NODE" if same_socket else "SYS"), (i, j)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_presets_look_like_a_real_probe(name):
    m = load_preset(name)
    assert m.driver and DRIVER_RE.match(m.driver)
    assert m.host
    uuids = [g.uuid for g in m.gpus]
    assert all(UUID_RE.match(u) for u in uuids) and len(set(uuids)) == len(uuids)
    buses = [g.pci_bus_id for g in m.gpus]
    assert all(b and BUS_RE.match(b) for b in buses) and len(set(buses)) == len(buses)
    for g in m.gpus:
        assert g.memory_total_mib and g.memory_free_mib
        reserved = g.memory_total_mib - g.memory_free_mib
        assert 100 <= reserved <= 1024, f"{g.label}: idle reservation {reserved} MiB is not a driver's"
        assert not g.mig and g.processes == () and g.numa_node is not None


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_preset_files_say_where_memory_numbers_come_from(name):
    text = preset_text(name)
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Memory:" in comments and "MiB" in comments


def test_presets_ship_inside_the_package():
    root = resources.files("pytest_gpulayout.machine.presets")
    assert {p.name for p in root.iterdir() if p.name.endswith(".yaml")} >= {f"{n}.yaml" for n in REQUIRED}


def test_unknown_preset_lists_them_and_suggests():
    with pytest.raises(InputError) as exc:
        load_preset("8xh100")
    msg = str(exc.value)
    assert msg.startswith("preset:8xh100: unknown preset '8xh100'")
    assert "did you mean '8xH100-sxm'" in msg
    assert all(n in msg for n in REQUIRED)
    with pytest.raises(InputError, match="unknown preset 'zzz'; presets: "):
        load_preset("zzz")
