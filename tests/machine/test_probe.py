"""The live probe against a faithful fake NVML: links, memory, MIG, processes, visibility, failures."""

from __future__ import annotations

import ctypes
import socket
import sys
from dataclasses import replace
from pathlib import Path

import pynvml
import pytest
from fake_pynvml import FakeNvml, err, mig_specs, nvml_library_present

from pytest_gpulayout.errors import ProbeError
from pytest_gpulayout.machine.facts import Gpu, GpuProcess, Machine
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.machine.probe import probe
from pytest_gpulayout.machine.snapshot import load_snapshot

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def run(tmp_path):
    """probe() on a fake, with /proc and /sys read from an empty tmp dir (the test host's stay out)."""

    def _run(fake: FakeNvml, env: dict[str, str] | None = None) -> Machine:
        return probe(nvml=fake, env=env or {}, host_root=tmp_path)

    return _run


def dgx1() -> Machine:
    return load_snapshot(DATA / "snapshots" / "dgx1-v100.yaml")


def pcie_box() -> Machine:
    """Five GPUs showing every PCIe level."""
    gpus = tuple(
        Gpu(
            i,
            f"GPU-{i:08x}-1111-2222-3333-444444444444",
            "NVIDIA L4",
            f"00000000:{0x10 * (i + 1):02X}:00.0",
            23034,
            22478,
            0 if i < 4 else 1,
            compute_capability=(8, 9),
        )
        for i in range(5)
    )
    links = {
        (0, 1): "PIX",
        (0, 2): "PXB",
        (1, 2): "PXB",
        (0, 3): "PHB",
        (1, 3): "PHB",
        (2, 3): "NODE",
        (0, 4): "SYS",
        (1, 4): "SYS",
        (2, 4): "SYS",
        (3, 4): "SYS",
    }
    return Machine(gpus=gpus, links=links, driver="550.90.07", source="test")


# -- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "nvswitch"),
    [
        (lambda: load_preset("2xL4-pcie"), False),
        (lambda: load_preset("2x32gb-pcie"), False),
        (lambda: load_preset("4xA100-80gb-sxm"), False),
        (lambda: load_preset("4xA100-80gb-sxm"), True),
        (lambda: load_preset("8xH100-sxm"), True),
        (lambda: load_preset("8xH200"), True),
        (lambda: load_preset("8xL40S-2socket"), False),
        (dgx1, False),
        (pcie_box, False),
    ],
)
def test_snapshot_to_fake_to_probe_gives_the_same_machine(run, machine, nvswitch):
    m = machine()
    # what the driver reserves comes back too (NVML's v2 struct): give each GPU its own figure
    m = replace(m, gpus=tuple(replace(g, memory_reserved_mib=min(400 + g.index, g.memory_total_mib - g.memory_free_mib))
                              for g in m.gpus))
    fake = FakeNvml(m, nvswitch=nvswitch)
    got = run(fake)
    assert got.gpus == m.gpus
    assert dict(got.links) == dict(m.links)
    assert got.source == "nvml" and got.driver == m.driver and got.host == socket.gethostname()
    assert got.notes == ()
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_dgx1_pairwise_nvlink_counts(run):
    got = run(FakeNvml(dgx1(), inactive_links=2))  # inactive links after the active ones are skipped
    assert got.link(0, 1) == "NV1" and got.link(0, 3) == "NV2" and got.link(0, 4) == "NV2"
    assert got.link(0, 5) == "SYS" and got.link(1, 4) == "SYS"
    assert got.link(6, 7) == "NV2" and got.link(5, 7) == "NV1"


def test_nvlink_remote_pci_compared_as_numbers(run):
    # the remote end reports only the legacy 4-digit-domain string; the ints still match
    got = run(FakeNvml(dgx1(), remote_pci_legacy=True))
    assert dict(got.links) == dict(dgx1().links)
    # a remote struct with only the bus id string filled in is parsed to the same numbers
    got = run(FakeNvml(dgx1(), remote_pci_legacy=True, remote_pci_strings_only=True))
    assert dict(got.links) == dict(dgx1().links)


@pytest.mark.parametrize("end", [pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_SUPPORTED])
def test_link_iteration_stops_at_either_end_error(run, end):
    assert dict(run(FakeNvml(dgx1(), link_end=end)).links) == dict(dgx1().links)


def test_remote_device_type_unsupported_is_treated_as_gpu(run):
    assert dict(run(FakeNvml(dgx1(), remote_type_unsupported=True)).links) == dict(dgx1().links)


def test_nvswitch_gives_switch_link_count_for_every_p2p_pair(run):
    fake = FakeNvml(load_preset("8xH100-sxm"), nvswitch=True)
    got = run(fake)
    assert set(got.links.values()) == {"NV18"} and len(got.links) == 28
    p2p = [args for name, args in fake.calls if name == "nvmlDeviceGetP2PStatus"]
    assert p2p and all(args[2] == pynvml.NVML_P2P_CAPS_INDEX_NVLINK for args in p2p)


def test_the_read_index_trap_is_real_in_the_fake():
    assert isinstance(pynvml.NVML_P2P_CAPS_INDEX_READ, tuple)  # nvidia-ml-py's trailing comma
    fake = FakeNvml(load_preset("2xL4-pcie"))
    fake.nvmlInit()
    h0, h1 = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(ctypes.ArgumentError):
        fake.nvmlDeviceGetP2PStatus(h0, h1, pynvml.NVML_P2P_CAPS_INDEX_READ)


def test_nvswitch_pairs_without_p2p_fall_back_to_pcie(run):
    base = load_preset("8xH100-sxm")
    links = dict(base.links)
    for j in range(1, 8):
        links[(0, j)] = "SYS"  # GPU0 is switch-attached, but NVLink P2P to it is not OK
    links[(0, 1)] = "NODE"
    m = Machine(gpus=base.gpus, links=links, driver=base.driver)
    got = run(FakeNvml(m, nvswitch=True))
    assert got.link(0, 1) == "NODE" and got.link(0, 5) == "SYS" and got.link(1, 2) == "NV18"


def test_internal_topology_level_is_pix(run):
    fake = FakeNvml(load_preset("2xL4-pcie"))
    fake.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: pynvml.NVML_TOPOLOGY_INTERNAL  # a K80-style board
    assert run(fake).link(0, 1) == "PIX"


def test_a_pair_without_topology_stays_unknown_with_a_note(run):
    m = pcie_box()
    links = dict(m.links)
    del links[(2, 4)]
    got = run(FakeNvml(Machine(gpus=m.gpus, links=links)))
    assert got.link(2, 4) is None
    assert any("GPU2-GPU4" in n and "unknown" in n for n in got.notes)


# -- memory --------------------------------------------------------------------------------------------


def test_v2_memory_is_used_when_present(run):
    fake = FakeNvml(load_preset("2xL4-pcie"))
    run(fake)
    versions = [args[1] for name, args in fake.calls if name == "nvmlDeviceGetMemoryInfo"]
    assert versions == [pynvml.nvmlMemory_v2, pynvml.nvmlMemory_v2]


def test_v1_fallback_when_the_driver_lacks_v2(run):
    m = load_preset("2xL4-pcie")
    fake = FakeNvml(m, no_v2_memory=True)
    got = run(fake)
    assert [g.memory_free_mib for g in got.gpus] == [g.memory_free_mib for g in m.gpus]
    versions = [args[1] for name, args in fake.calls if name == "nvmlDeviceGetMemoryInfo"]
    assert versions == [pynvml.nvmlMemory_v2, None, pynvml.nvmlMemory_v2, None]


def test_old_bindings_bytes_names_no_version_keyword_no_remote_type(run):
    m = dgx1()
    got = run(FakeNvml(m, old_bindings=True))
    assert got.gpus == m.gpus and dict(got.links) == dict(m.links)
    assert got.driver == m.driver and isinstance(got.gpus[0].name, str)


def test_memory_nvml_refuses_stays_unknown_with_a_note(run):
    got = run(FakeNvml(load_preset("2xL4-pcie"), memory_error={1: pynvml.NVML_ERROR_NO_PERMISSION}))
    assert got.gpu(0).memory_free_mib == 22478
    assert got.gpu(1).memory_total_mib is None and got.gpu(1).memory_free_mib is None
    assert not got.memory_known and any(n.startswith("GPU1:") and "memory" in n for n in got.notes)


# -- MIG -------------------------------------------------------------------------------------------------


def test_mig_enabled_gpu_is_marked_and_loses_its_nvlinks(run):
    m = load_preset("4xA100-80gb-sxm")
    got = run(FakeNvml(m, mig={1: mig_specs(m.gpu(1), 2)}))
    assert [g.mig for g in got.gpus] == [False, True, False, False]
    assert got.link(0, 2) == "NV12"
    assert got.link(0, 1) == "NODE" and got.link(1, 2) == "SYS"  # PCIe path only: no NVLink P2P for MIG


def test_mig_capable_but_disabled_is_a_whole_gpu(run):
    m = load_preset("4xA100-80gb-sxm")
    got = run(FakeNvml(m, mig_capable=[0, 1, 2, 3]))
    assert not any(g.mig for g in got.gpus) and set(got.links.values()) == {"NV12"}


def test_mig_uuid_selects_the_instance_with_its_own_memory(run):
    m = load_preset("4xA100-80gb-sxm")
    specs = mig_specs(m.gpu(1), 2)
    got = run(FakeNvml(m, mig={1: specs}), env={"CUDA_VISIBLE_DEVICES": f"{specs[1].uuid},0"})
    g0, g1 = got.gpus
    assert (g0.uuid, g0.mig, g0.memory_total_mib, g0.memory_free_mib) == (
        specs[1].uuid,
        True,
        specs[1].memory_total_mib,
        specs[1].memory_free_mib,
    )
    assert g0.name == specs[1].name and g0.pci_bus_id == m.gpu(1).pci_bus_id
    assert g1.uuid == m.gpu(0).uuid and not g1.mig
    assert got.link(0, 1) == "NODE"


def test_two_instances_of_one_gpu_have_no_link(run):
    m = load_preset("4xA100-80gb-sxm")
    specs = mig_specs(m.gpu(2), 3)
    got = run(FakeNvml(m, mig={2: specs}), env={"CUDA_VISIBLE_DEVICES": f"{specs[0].uuid},{specs[2].uuid}"})
    assert len(got.gpus) == 2 and all(g.mig for g in got.gpus)
    assert got.link(0, 1) is None and any("MIG instances of one GPU" in n for n in got.notes)


# -- processes -------------------------------------------------------------------------------------------


def busy() -> Machine:
    m = load_preset("2xL4-pcie")
    g1 = m.gpu(1)
    procs = (GpuProcess(4242, "python3", 3502), GpuProcess(4343, "", None))
    busy1 = Gpu(
        g1.index, g1.uuid, g1.name, g1.pci_bus_id, g1.memory_total_mib, 18719, g1.numa_node, False, procs
    )
    return Machine(gpus=(m.gpu(0), busy1), links=m.links, driver=m.driver)


def test_processes_with_names_from_proc_and_unknown_memory(run, tmp_path):
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "comm").write_text("python3\n")
    got = run(FakeNvml(busy()))
    assert got.gpu(0).processes == ()
    assert got.gpu(1).processes == (GpuProcess(4242, "python3", 3502), GpuProcess(4343, "", None))
    assert got.gpu(1).foreign_used_mib == 3502


def test_processes_fallback_to_v2_symbol_on_old_drivers(run, tmp_path):
    fake = FakeNvml(busy(), no_v3_processes=True)
    got = run(fake)
    assert [p.pid for p in got.gpu(1).processes] == [4242, 4343]
    assert any(name == "nvmlDeviceGetComputeRunningProcesses_v2" for name, _ in fake.calls)


def test_processes_nvml_refuses_is_noted_not_hidden(run):
    got = run(FakeNvml(busy(), processes_error=pynvml.NVML_ERROR_NO_PERMISSION))
    assert got.gpu(1).processes == ()
    assert any("GPU1" in n and "processes" in n for n in got.notes)


# -- NUMA ------------------------------------------------------------------------------------------------


def test_numa_from_sysfs_when_nvml_has_no_affinity(run, tmp_path):
    m = load_preset("2xL4-pcie")
    gpus = tuple(
        Gpu(g.index, g.uuid, g.name, g.pci_bus_id, g.memory_total_mib, g.memory_free_mib, None)
        for g in m.gpus
    )
    dev = tmp_path / "sys" / "bus" / "pci" / "devices"
    (dev / "0000:17:00.0").mkdir(parents=True)
    (dev / "0000:17:00.0" / "numa_node").write_text("1\n")
    (dev / "0000:65:00.0").mkdir(parents=True)
    (dev / "0000:65:00.0" / "numa_node").write_text("-1\n")  # the kernel's "no NUMA info"
    got = run(FakeNvml(Machine(gpus=gpus, links=m.links)))
    assert [g.numa_node for g in got.gpus] == [1, None]


# -- CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER ----------------------------------------------------------


def test_cuda_visible_devices_reorders_and_remaps_links(run):
    m = pcie_box()
    got = run(FakeNvml(m), env={"CUDA_VISIBLE_DEVICES": "4,0,3"})
    assert [g.uuid for g in got.gpus] == [m.gpu(4).uuid, m.gpu(0).uuid, m.gpu(3).uuid]
    assert got.indices == (0, 1, 2)
    assert got.link(0, 1) == "SYS" and got.link(1, 2) == "PHB" and got.link(0, 2) == "SYS"


def test_cuda_visible_devices_uuid_prefixes(run):
    m = pcie_box()
    got = run(FakeNvml(m), env={"CUDA_VISIBLE_DEVICES": "GPU-00000002,GPU-00000001-1111"})
    assert [g.uuid for g in got.gpus] == [m.gpu(2).uuid, m.gpu(1).uuid]
    assert got.link(0, 1) == "PXB"


def test_invalid_entry_truncates_with_a_note(run):
    got = run(FakeNvml(pcie_box()), env={"CUDA_VISIBLE_DEVICES": "0,2,-1,1"})
    assert len(got.gpus) == 2 and got.link(0, 1) == "PXB"
    assert any("'-1'" in n for n in got.notes)


@pytest.mark.parametrize(
    ("cvd", "needle"),
    [
        ("", "CUDA_VISIBLE_DEVICES is set but empty"),
        ("0,1,0", "lists the same device twice"),
        ("7", "entry '7' matches no GPU"),
        ("GPU-ffff", "entry 'GPU-ffff' matches no GPU"),
        ("GPU-0000000", "matches no GPU"),  # ambiguous prefix
    ],
)
def test_visible_set_empty_is_a_probe_error(run, cvd, needle):
    fake = FakeNvml(pcie_box())
    with pytest.raises(ProbeError) as exc:
        run(fake, env={"CUDA_VISIBLE_DEVICES": cvd})
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and "NVML sees 5" in msg
    assert fake.shutdown_calls == 1


def test_cuda_device_order_pci_bus_id(run):
    m = load_preset("2xL4-pcie")  # bus 17 and 65
    fake_env = {"CUDA_VISIBLE_DEVICES": "0"}
    nvml_reversed = FakeNvml(m, nvml_order=[1, 0])  # NVML enumerates bus 65 first
    assert run(nvml_reversed, env=fake_env).gpu(0).pci_bus_id == "00000000:65:00.0"
    pci = run(FakeNvml(m, nvml_order=[1, 0]), env={**fake_env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert pci.gpu(0).pci_bus_id == "00000000:17:00.0"


def test_mixed_models_note_the_ambiguous_order(run):
    m = load_preset("2xL4-pcie")
    g1 = m.gpu(1)
    other = Gpu(1, g1.uuid, "NVIDIA RTX A4000", g1.pci_bus_id, 16376, 15900, 0)
    mixed = Machine(gpus=(m.gpu(0), other), links=m.links, driver=m.driver)
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in n for n in run(FakeNvml(mixed)).notes)
    assert run(FakeNvml(mixed), env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).notes == ()


# -- failures ----------------------------------------------------------------------------------------------


def test_library_not_found_is_one_actionable_line(run):
    fake = FakeNvml(load_preset("2xL4-pcie"), init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(ProbeError) as exc:
        run(fake)
    assert str(exc.value) == (
        "NVML could not be loaded: no NVIDIA driver on this machine (NVML_ERROR_LIBRARY_NOT_FOUND). "
        "Run on the GPU host, or replay a snapshot with --machine FILE / --gpulayout-machine FILE."
    )
    assert exc.value.exit_code == 3
    assert fake.shutdown_calls == 0  # never initialised, nothing to shut down


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not running (NVML_ERROR_DRIVER_NOT_LOADED)"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "refused access to the GPUs: this user may not open /dev/nvidia*"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "different versions"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML could not be initialised: Unknown Error (NVML_ERROR_UNKNOWN)"),
    ],
)
def test_init_failures(run, code, needle):
    with pytest.raises(ProbeError) as exc:
        run(FakeNvml(load_preset("2xL4-pcie"), init_error=code))
    assert needle in str(exc.value) and "--gpulayout-machine FILE" in str(exc.value)


def test_zero_gpus_is_an_error_not_an_empty_machine(run):
    fake = FakeNvml(Machine(gpus=()))
    with pytest.raises(ProbeError, match="NVML sees no GPU"):
        run(fake)
    assert fake.shutdown_calls == 1


def test_nvml_failure_mid_probe_still_shuts_down(run):
    fake = FakeNvml(load_preset("2xL4-pcie"))

    def lost(h):
        raise err(pynvml.NVML_ERROR_GPU_IS_LOST)

    fake.nvmlDeviceGetName = lost
    with pytest.raises(ProbeError, match=r"GPU is lost \(NVML_ERROR_GPU_IS_LOST\)"):
        run(fake)
    assert fake.shutdown_calls == 1 and fake.initialized == 0


def test_pynvml_missing_is_a_probe_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(ProbeError, match="pip install nvidia-ml-py"):
        probe(env={})



@pytest.mark.skipif(nvml_library_present(), reason="this host has an NVIDIA driver")
def test_real_pynvml_on_a_host_without_driver():
    with pytest.raises(ProbeError, match=r"NVML_ERROR_LIBRARY_NOT_FOUND\)\. Run on the GPU host"):
        probe(env={})


def test_each_gpus_nvlinks_are_read_once(run):
    fake = FakeNvml(dgx1())
    run(fake)
    states = [args[0].pos for name, args in fake.calls if name == "nvmlDeviceGetNvLinkState"]
    # 6 active links per GPU plus the call that finds the end: 7 per GPU, not 7 per pair
    assert sorted(states) == sorted(list(range(8)) * 7)
