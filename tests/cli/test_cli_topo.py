"""``gpulayout topo`` / ``gpulayout snapshot``: output, JSON shape, exit codes (0, 2 bad input, 3 no NVML)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fake_pynvml import FakeNvml, nvml_library_present

import pytest_gpulayout.machine.probe as probe_mod
from pytest_gpulayout.cli import main
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.machine.snapshot import load_snapshot

DATA = Path(__file__).parents[1] / "data"



no_driver_here = pytest.mark.skipif(nvml_library_present(), reason="this host has an NVIDIA driver")


def test_topo_preset_text(capsys):
    assert main(["topo", "--machine", "preset:8xL40S-2socket"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split("\t")[1:] == [f"GPU{i}" for i in range(8)] + ["NUMA Affinity"]
    assert lines[1].split("\t")[:6] == ["GPU0", " X ", "NODE", "NODE", "NODE", "SYS"]
    assert "machine: preset:8xL40S-2socket: 8 x NVIDIA L40S, driver 550.127.05" in out
    assert "GPU0: NVIDIA L40S, 45595 of 46068 MiB free" in out


def test_topo_json_is_the_snapshot_shape(capsys):
    assert main(["topo", "--machine", "preset:2xL4-pcie", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["links"] == {"0-1": "PHB"}
    assert [g["index"] for g in d["gpus"]] == [0, 1]
    assert d["gpus"][0]["memory_total_mib"] == 23034 and d["gpus"][0]["name"] == "NVIDIA L4"
    assert {"version", "host", "driver", "gpus", "links"} <= set(d)


def test_topo_json_output_replays_as_a_snapshot(capsys, tmp_path):
    assert main(["topo", "--machine", "preset:4xA100-80gb-sxm", "--json"]) == 0
    f = tmp_path / "m.json"
    f.write_text(capsys.readouterr().out)
    assert load_snapshot(f).gpus == load_preset("4xA100-80gb-sxm").gpus


def test_topo_from_pasted_text_says_memory_is_unknown(capsys, tmp_path):
    paste = (DATA / "topo" / "003.txt").read_text().partition("\n---\n")[2]
    f = tmp_path / "topo.txt"
    f.write_text(paste)
    assert main(["topo", "--machine", str(f)]) == 0
    out = capsys.readouterr().out
    assert "memory: unknown (topo text has none)" in out
    assert f"machine: topo:{f}: 5 x unknown GPU" in out
    assert out.splitlines()[2].split("\t")[:4] == ["GPU1", "SYS", " X ", "PHB"]


def test_topo_json_from_text_keeps_memory_null(capsys, tmp_path):
    f = tmp_path / "topo.txt"
    f.write_text("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n")
    assert main(["topo", "--machine", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["links"] == {"0-1": "NV4"}
    assert all(g["memory_total_mib"] is None and g["memory_free_mib"] is None for g in d["gpus"])


def test_topo_snapshot_with_unknown_memory_names_the_gpus(capsys, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(
        "gpus:\n  - {index: 0, name: NVIDIA L4, memory_total_mib: 23034, memory_free_mib: 22478}\n"
        '  - {index: 1, name: NVIDIA L4}\nlinks: {"0-1": PHB}\n'
    )
    assert main(["topo", "--machine", str(f)]) == 0
    assert "memory: unknown for GPU1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("machine", "needle"),
    [
        ("preset:nope", "unknown preset 'nope'"),
        ("does-not-exist.yaml", "does-not-exist.yaml: machine file not found"),
    ],
)
def test_topo_bad_input_exits_2_with_one_line(capsys, machine, needle):
    assert main(["topo", "--machine", machine]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err.strip()
    assert needle in err and "\n" not in err and err.startswith("gpulayout: ")


def test_topo_bad_snapshot_names_file_and_key(capsys, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("gpus:\n  - {index: 0}\n  - {index: 1, memory_free_mib: lots}\n")
    assert main(["topo", "--machine", str(f)]) == 2
    assert f"{f}: gpus[1].memory_free_mib: must be a whole number" in capsys.readouterr().err


@no_driver_here
def test_topo_auto_without_nvml_exits_3(capsys):
    assert main(["topo"]) == 3
    err = capsys.readouterr().err.strip()
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in err and "\n" not in err


@no_driver_here
def test_snapshot_without_nvml_exits_3_with_one_line(capsys):
    assert main(["snapshot"]) == 3
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == (
        "gpulayout: NVML could not be loaded: no NVIDIA driver on this machine "
        "(NVML_ERROR_LIBRARY_NOT_FOUND). "
        "Run on the GPU host, or replay a snapshot with --machine FILE / --gpulayout-machine FILE."
    )


@pytest.fixture
def fake_probe(monkeypatch, tmp_path):
    """Route the CLI's live probe to a fake NVML of the 2 x L4 preset."""
    real = probe_mod.probe

    def fake(nvml=None, env=None, **kw):
        return real(nvml=FakeNvml(load_preset("2xL4-pcie")), env={}, host_root=tmp_path)

    monkeypatch.setattr(probe_mod, "probe", fake)


def test_snapshot_to_stdout_and_file(capsys, tmp_path, fake_probe):
    assert main(["snapshot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gpulayout machine snapshot") and "name: NVIDIA L4" in out
    f = tmp_path / "snap.yaml"
    assert main(["snapshot", "-o", str(f)]) == 0
    assert f"wrote {f}: 2 x NVIDIA L4 (nvml)" in capsys.readouterr().err
    m = load_snapshot(f)
    # the snapshot keeps what NVML's v2 struct says the driver reserves (the fake's 500 MiB), which
    # the preset does not know
    assert [g.memory_reserved_mib for g in m.gpus] == [500, 500]
    assert "memory_reserved_mib: 500" in f.read_text()
    assert [replace(g, memory_reserved_mib=None) for g in m.gpus] == list(load_preset("2xL4-pcie").gpus)
    assert m.link(0, 1) == "PHB"


def test_snapshot_json(capsys, tmp_path, fake_probe):
    assert main(["snapshot", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["links"] == {"0-1": "PHB"} and len(d["gpus"]) == 2
    f = tmp_path / "snap.json"
    assert main(["snapshot", "-o", str(f)]) == 0
    assert json.loads(f.read_text())["gpus"][1]["memory_free_mib"] == 22478


def test_snapshot_unwritable_output_exits_2(capsys, tmp_path, fake_probe):
    assert main(["snapshot", "-o", str(tmp_path / "no-such-dir" / "s.yaml")]) == 2
    assert "cannot write the snapshot" in capsys.readouterr().err
