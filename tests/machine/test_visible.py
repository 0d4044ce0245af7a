"""CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER as CUDA reads them (PyTorch's parser mirrors the same rules)."""

from __future__ import annotations

import pytest

from pytest_gpulayout.machine.visible import MigInstance, NvmlGpu, cuda_order, pci_sort_key, resolve, resolve_visible

# NVML order deliberately differs from PCI order for the last two GPUs.
GPUS = [
    NvmlGpu(0, "GPU-aaaa1111-0000-0000-0000-000000000000", "NVIDIA L4", "00000000:01:00.0"),
    NvmlGpu(1, "GPU-aaaa2222-0000-0000-0000-000000000000", "NVIDIA L4", "00000000:02:00.0"),
    NvmlGpu(2, "GPU-bbbb3333-0000-0000-0000-000000000000", "NVIDIA L4", "00000000:81:00.0"),
    NvmlGpu(3, "GPU-cccc4444-0000-0000-0000-000000000000", "NVIDIA L4", "00000000:41:00.0"),
]


def nvml(cvd, gpus=GPUS, order=None) -> list[int]:
    return [d.gpu.nvml_index for d in resolve_visible(cvd, gpus, order)]


def test_unset_is_all_empty_is_none():
    assert nvml(None) == [0, 1, 2, 3]
    assert nvml("") == []
    assert nvml("  ") == []


def test_listed_order_becomes_cuda_order():
    assert nvml("2,0") == [2, 0]
    assert nvml(" 3 , 1 ") == [3, 1]


def test_first_invalid_entry_truncates():
    assert nvml("0,2,-1,1") == [0, 2]
    assert nvml("1,7,0") == [1]  # out of range
    assert nvml("1,abc,0") == [1]
    assert nvml("abc,0") == []
    assert nvml("1,0,") == [1, 0]  # trailing comma


def test_strtoul_reads_leading_digits():
    assert nvml("1x,2") == [1, 2]


def test_duplicates_give_the_empty_set():
    assert nvml("0,1,0") == []
    assert nvml("GPU-aaaa1111,0") == []  # same GPU twice, spelled two ways


def test_uuid_and_unique_prefix():
    assert nvml("GPU-cccc4444-0000-0000-0000-000000000000,GPU-bbbb") == [3, 2]
    assert nvml("GPU-aaaa") == []  # ambiguous prefix: invalid, ends the list at once
    assert nvml("GPU-bbbb,GPU-aaaa,0") == [2]
    assert nvml("gpu-CCCC4444") == [3]  # hex is case-insensitive


def test_uuid_entries_ignore_device_order():
    assert nvml("GPU-cccc4444", order="PCI_BUS_ID") == [3]


def test_pci_bus_id_order_renumbers_integers():
    assert [g.nvml_index for g in cuda_order(GPUS, "PCI_BUS_ID")] == [0, 1, 3, 2]
    assert nvml(None, order="PCI_BUS_ID") == [0, 1, 3, 2]
    assert nvml("2", order="PCI_BUS_ID") == [3]  # CUDA ordinal 2 is the third by bus id
    assert nvml("2", order="FASTEST_FIRST") == [2]
    assert nvml("2", order=" pci_bus_id ") == [3]


def test_pci_sort_key_compares_numbers_not_strings():
    assert pci_sort_key("0000:0A:00.0") < pci_sort_key("00000000:1B:00.0")
    assert pci_sort_key("0000:1b:00.0") == pci_sort_key("00000000:1B:00.0")
    assert pci_sort_key(None) > pci_sort_key("ffff:ff:1f.7")


MIXED = [
    NvmlGpu(0, "GPU-11110000-0000-0000-0000-000000000000", "NVIDIA RTX A4000", "00000000:01:00.0"),
    NvmlGpu(1, "GPU-22220000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", "00000000:41:00.0"),
]


def test_mixed_models_with_default_order_warn_that_integers_are_ambiguous():
    vis = resolve(None, MIXED, None)
    assert [d.gpu.nvml_index for d in vis.devices] == [0, 1]
    assert len(vis.warnings) == 1 and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in vis.warnings[0]
    assert "NVIDIA RTX A4000" in vis.warnings[0] and "NVIDIA H100 80GB HBM3" in vis.warnings[0]
    assert resolve("1", MIXED, "FASTEST_FIRST").warnings
    assert resolve(None, MIXED, "PCI_BUS_ID").warnings == ()
    assert resolve("GPU-2222", MIXED, None).warnings == ()  # UUIDs are never ambiguous
    assert resolve(None, GPUS, None).warnings == ()  # one model: the orders agree


def test_truncation_and_duplicates_are_explained():
    vis = resolve("0,2,-1,1", GPUS, None)
    assert any("'-1'" in w and "ignores it" in w for w in vis.warnings)
    vis = resolve("1,1", GPUS, None)
    assert vis.devices == () and any("twice" in w for w in vis.warnings)


MIG_PARENT = NvmlGpu(
    0,
    "GPU-99990000-0000-0000-0000-000000000000",
    "NVIDIA A100-SXM4-80GB",
    "00000000:01:00.0",
    mig_enabled=True,
    mig_instances=(
        MigInstance("MIG-aaaa0000-1111-2222-3333-444444444444", 1, 0),
        MigInstance("MIG-bbbb0000-1111-2222-3333-444444444444", 2, 0),
    ),
)
WITH_MIG = [
    MIG_PARENT,
    NvmlGpu(1, "GPU-88880000-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB", "00000000:41:00.0"),
]


def test_mig_entries_select_instances():
    devs = resolve_visible("MIG-bbbb,MIG-aaaa0000-1111-2222-3333-444444444444", WITH_MIG, None)
    assert [d.uuid for d in devs] == [
        "MIG-bbbb0000-1111-2222-3333-444444444444",
        "MIG-aaaa0000-1111-2222-3333-444444444444",
    ]
    assert all(d.gpu is MIG_PARENT and d.mig is not None for d in devs)


def test_legacy_mig_form_and_unknown_mig():
    devs = resolve_visible("MIG-GPU-99990000-0000-0000-0000-000000000000/2/0", WITH_MIG, None)
    assert [d.uuid for d in devs] == ["MIG-bbbb0000-1111-2222-3333-444444444444"]
    assert resolve_visible("MIG-GPU-99990000-0000-0000-0000-000000000000/5/0", WITH_MIG, None) == []
    assert resolve_visible("MIG-ffff", WITH_MIG, None) == []


def test_whole_gpu_listed_by_index_keeps_its_mig_flag():
    (dev,) = resolve_visible("0", WITH_MIG, None)
    assert dev.mig is None and dev.gpu.mig_enabled and dev.uuid == MIG_PARENT.uuid


@pytest.mark.parametrize("cvd", ["0,1", "1,0", "GPU-8888,0"])
def test_visible_device_uuid_is_the_cuda_one(cvd):
    devs = resolve_visible(cvd, WITH_MIG, None)
    assert [d.uuid for d in devs] == [WITH_MIG[d.gpu.nvml_index].uuid for d in devs]
