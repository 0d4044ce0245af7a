"""Snapshot files: the design.md format, round trips, and one clear line for every kind of bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.facts import Gpu, GpuProcess, Machine
from pytest_gpulayout.machine.presets import list_presets, load_preset
from pytest_gpulayout.machine.snapshot import dump_snapshot, load_snapshot, machine_from_dict, machine_to_dict
from pytest_gpulayout.machine.sources import load_machine

DATA = Path(__file__).parents[1] / "data"

DESIGN_EXAMPLE = """\
version: 1
host: gpu-node-17
driver: "580.95.05"
gpus:
  - index: 0                 # CUDA index as the engine will see it
    uuid: GPU-5b2c...
    name: NVIDIA L4
    pci_bus_id: "00000000:01:00.0"
    memory_total_mib: 23034
    memory_free_mib: 22478
    numa_node: 0
    mig: false
    processes:               # other tenants on this GPU
      - {pid: 4242, name: python3, used_mib: 3900}
  - index: 1
    uuid: GPU-9e41...
    name: NVIDIA L4
    pci_bus_id: "00000000:02:00.0"
    memory_total_mib: 23034
    memory_free_mib: 22478
    numa_node: 0
    mig: false
    processes: []
links:                       # every pair, nvidia-smi topo -m vocabulary
  "0-1": PHB                 # NV<n> | PIX | PXB | PHB | NODE | SYS
"""


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def good() -> dict:
    return {
        "version": 1,
        "host": "h",
        "driver": "550.90.07",
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-a",
                "name": "NVIDIA L4",
                "memory_total_mib": 23034,
                "memory_free_mib": 22478,
            },
            {
                "index": 1,
                "uuid": "GPU-b",
                "name": "NVIDIA L4",
                "memory_total_mib": 23034,
                "memory_free_mib": 18719,
            },
            {
                "index": 2,
                "uuid": "GPU-c",
                "name": "NVIDIA L4",
                "memory_total_mib": 23034,
                "memory_free_mib": 22478,
            },
        ],
        "links": {"0-1": "PHB", "1-2": "SYS"},
    }


def bad(d: object) -> str:
    with pytest.raises(InputError) as exc:
        machine_from_dict(d, where="m.yaml", source="snapshot:m.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("m.yaml: ")
    return msg


# -- reading ---------------------------------------------------------------------------------------


def test_design_example_loads(tmp_path):
    m = load_snapshot(write(tmp_path, DESIGN_EXAMPLE))
    assert m.source == f"snapshot:{tmp_path / 'm.yaml'}"
    assert m.host == "gpu-node-17" and m.driver == "580.95.05"
    g0 = m.gpu(0)
    assert (g0.name, g0.memory_total_mib, g0.memory_free_mib, g0.numa_node, g0.mig) == (
        "NVIDIA L4",
        23034,
        22478,
        0,
        False,
    )
    assert g0.pci_bus_id == "00000000:01:00.0"
    assert g0.processes == (GpuProcess(pid=4242, name="python3", used_mib=3900),)
    assert m.link(0, 1) == "PHB"


def test_missing_links_are_refused_unless_the_probe_said_why_and_null_memory_stays_unknown():
    d = good()
    with pytest.raises(InputError) as err:  # a hand-trimmed or cut-off file: named, like a cut topo paste
        machine_from_dict(d, where="m.yaml", source="snapshot:m.yaml")
    assert str(err.value).startswith("m.yaml: links: no link kind for the GPU pairs 0-2:")
    d["notes"] = ["GPU0-GPU2: NVML gave no topology for this pair; link unknown"]  # the probe's own word
    d["gpus"][2]["memory_free_mib"] = None
    m = machine_from_dict(d, where="m.yaml", source="snapshot:m.yaml")
    assert m.link(0, 2) is None  # never guessed
    assert m.link(1, 2) == "SYS"
    assert m.gpu(2).memory_free_mib is None and not m.memory_known


def test_minimal_gpu_needs_only_an_index():
    m = machine_from_dict({"gpus": [{"index": 0}]}, where="m.yaml", source="s")
    assert m.gpu(0) == Gpu(index=0) and m.driver is None and dict(m.links) == {}


def test_link_kinds_are_normalised():
    d = good()
    d["links"] = {"0-1": "soc", "2-1": "nv4", "0-2": "phb"}
    m = machine_from_dict(d, where="m.yaml", source="s")
    assert m.link(0, 1) == "SYS" and m.link(1, 2) == "NV4" and m.link(0, 2) == "PHB"


def test_multi_host_missing_cross_host_pairs_are_net():
    d = good()
    d["gpus"][2]["host"] = "other-node"
    d["links"] = {"0-1": "NV12"}
    m = machine_from_dict(d, where="m.yaml", source="s")
    assert m.link(0, 2) == "NET" and m.link(1, 2) == "NET" and m.link(0, 1) == "NV12"
    assert m.gpu(2).host == "other-node" and m.gpu(0).host is None
    # multi-node NVLink across hosts is allowed when stated
    d["links"] = {"0-1": "NV12", "0-2": "NV18"}
    assert machine_from_dict(d, where="m.yaml", source="s").link(0, 2) == "NV18"


def test_multi_host_impossible_links_are_refused():
    d = good()
    d["gpus"][2]["host"] = "other-node"
    d["links"] = {"1-2": "PHB"}
    assert "different hosts" in bad(d) and "links.1-2" in bad(d)
    d = good()
    d["links"] = {"0-1": "NET"}
    assert "NET is for GPUs on different hosts" in bad(d)


# -- refusals --------------------------------------------------------------------------------------


def test_unknown_keys_suggest_the_right_one():
    d = good()
    d["gpu"] = d.pop("gpus")
    msg = bad(d)
    assert "m.yaml: gpu: unknown key 'gpu'" in msg and "did you mean 'gpus'" in msg
    d = good()
    d["gpus"][1]["memory_free"] = 1
    msg = bad(d)
    assert "gpus[1].memory_free:" in msg and "did you mean 'memory_free_mib'" in msg
    d = good()
    d["gpus"][0]["processes"] = [{"pid": 1, "used": 5}]
    assert "gpus[0].processes[0].used:" in bad(d)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("memory_free_mib", "lots", "gpus[1].memory_free_mib: must be a whole number or null, not a string"),
        ("memory_free_mib", 1.5, "gpus[1].memory_free_mib: must be a whole number"),
        ("memory_total_mib", True, "gpus[1].memory_total_mib: must be a whole number or null, not a boolean"),
        ("memory_free_mib", -1, "gpus[1].memory_free_mib: must be >= 0"),
        ("memory_total_mib", 0, "gpus[1].memory_total_mib: must be >= 1"),
        ("mig", "no", "gpus[1].mig: must be true or false"),
        ("name", 4090, "gpus[1].name: must be a string or null, not a number (4090); quote it"),
        ("numa_node", "0", "gpus[1].numa_node: must be a whole number"),
        ("processes", {"pid": 1}, "gpus[1].processes: must be a list"),
        ("index", "1", "gpus[1].index: must be a whole number, not a string"),
    ],
)
def test_wrong_types_name_file_and_key(field, value, needle):
    d = good()
    d["gpus"][1][field] = value
    assert needle in bad(d)


def test_free_above_total():
    d = good()
    d["gpus"][1]["memory_free_mib"] = 30000
    assert "gpus[1].memory_free_mib: free memory 30000 MiB is more than the total 23034 MiB" in bad(d)


def test_driver_reservation_round_trips_and_is_checked():
    """``memory_reserved_mib`` (NVML's v2 struct) is optional: read back where written, and refused
    when it and the free memory add up to more than the GPU has."""
    d = machine_to_dict(load_preset("2xL4-pcie"))
    d["gpus"][1]["memory_reserved_mib"] = 470
    m = machine_from_dict(d, "m.yaml", "snapshot:m.yaml")
    assert m.gpu(1).memory_reserved_mib == 470 and m.gpu(0).memory_reserved_mib is None
    assert m.gpu(1).cuda_total_mib == 23034 - 470 and m.gpu(0).cuda_total_mib == 23034 - 450
    assert machine_to_dict(m)["gpus"][1]["memory_reserved_mib"] == 470
    assert "memory_reserved_mib" not in machine_to_dict(m)["gpus"][0]
    d["gpus"][1]["memory_reserved_mib"] = 4000
    assert "gpus[1].memory_reserved_mib: free 22478 MiB plus reserved 4000 MiB is more than the total" in bad(d)


def test_duplicate_and_gapped_indices():
    d = good()
    d["gpus"][2]["index"] = 0
    assert "gpus[2].index: index 0 appears twice (gpus[0] and gpus[2])" in bad(d)
    d = good()
    d["gpus"][2]["index"] = 5
    msg = bad(d)
    assert "gpus[2].index" in msg and "0..2" in msg


def test_duplicate_uuid():
    d = good()
    d["gpus"][1]["uuid"] = "GPU-a"
    assert "gpus[1].uuid: uuid GPU-a appears twice" in bad(d)


@pytest.mark.parametrize(
    ("links", "needle"),
    [
        ({"0-7": "PHB"}, "links.0-7: GPU7 is not in gpus (indices: 0, 1, 2)"),
        ({"0-1": "FAST"}, "links.0-1: unknown link kind 'FAST'"),
        ({"0-1": 5}, "links.0-1: must be a link kind"),
        ({"0-0": "PHB"}, "links.0-0: a link joins two different GPUs"),
        ({"0:1": "PHB"}, 'links.0:1: link keys are "i-j"'),
        ({"0-1": "PHB", "1-0": "SYS"}, "the pair 0-1 is given twice"),
        ({"0-1": "NV0"}, "links.0-1: NV0 means no NVLink"),
        ({"0-1": "nv00"}, "links.0-1: nv00 means no NVLink"),  # any spelling of zero links
        (["0-1"], "links: must be a mapping"),
    ],
)
def test_bad_links(links, needle):
    d = good()
    d["links"] = links
    assert needle in bad(d)


def test_nv0_is_refused_in_a_snapshot_file_and_a_built_machine(tmp_path):
    path = tmp_path / "m.yaml"
    d = good()
    d["links"] = {"0-1": "NV0", "0-2": "SYS", "1-2": "SYS"}
    path.write_text(json.dumps(d))
    with pytest.raises(InputError) as exc:
        load_machine(str(path))
    msg = str(exc.value)
    assert msg.startswith(f"{path}: links.0-1: NV0 means no NVLink") and "\n" not in msg
    with pytest.raises(ValueError, match="NV0 means no NVLink"):
        Machine(gpus=(Gpu(0), Gpu(1)), links={(0, 1): "NV0"})


def test_top_level_problems():
    assert "this file holds a list" in bad([1, 2])
    d = good()
    del d["gpus"]
    assert "missing required key 'gpus'" in bad(d)
    d = good()
    d["gpus"] = []
    assert "gpus: is empty" in bad(d)
    d = good()
    d["version"] = 2
    assert "version: unsupported snapshot version 2" in bad(d)
    d = good()
    d["driver"] = 550.5
    assert "driver: must be a string or null, not a number (550.5); quote it in YAML" in bad(d)
    d = good()
    del d["gpus"][0]["index"]
    assert "gpus[0]: missing required key 'index'" in bad(d)


def test_file_level_problems(tmp_path):
    with pytest.raises(InputError, match=r"missing\.yaml: file not found"):
        load_snapshot(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match=r"m\.txt: a snapshot file ends in \.yaml, \.yml, \.json"):
        load_snapshot(write(tmp_path, "x", "m.txt"))
    with pytest.raises(InputError, match=r"m\.yaml: line 4: not valid YAML"):
        load_snapshot(write(tmp_path, "version: 1\ngpus:\n  - index: 0\n   name: x\n"))
    with pytest.raises(InputError, match=r"m\.json: line 1: not valid JSON"):
        load_snapshot(write(tmp_path, "{version: 1}", "m.json"))
    with pytest.raises(InputError, match=r"line 4: key '0-1' appears twice"):
        load_snapshot(
            write(tmp_path, 'gpus:\n  - {index: 0}\n  - {index: 1}\nlinks: {"0-1": PHB, "0-1": NV4}\n')
        )
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        load_snapshot(tmp_path / "d.yaml")


# -- writing ---------------------------------------------------------------------------------------


def multi_host() -> Machine:
    gpus = (
        Gpu(
            0,
            "GPU-0",
            "NVIDIA H100 80GB HBM3",
            "00000000:1B:00.0",
            81559,
            81042,
            0,
            False,
            (GpuProcess(7, "python3", None), GpuProcess(9, "", 1200)),
        ),
        Gpu(1, "GPU-1", "NVIDIA H100 80GB HBM3", "00000000:43:00.0", 81559, None, None, True),
        Gpu(
            2, "GPU-2", "NVIDIA H100 80GB HBM3", "00000000:1B:00.0", 81559, 81042, 0, False, (), host="node-b"
        ),
    )
    return Machine(
        gpus=gpus,
        links={(0, 1): "NV18", (0, 2): "NET", (1, 2): "NET"},
        host="node-a",
        driver="550.90.07",
        source="nvml",
        notes=("a caveat",),
    )


def test_machine_to_dict_shape():
    d = machine_to_dict(multi_host())
    assert list(d) == ["version", "host", "driver", "gpus", "links", "notes"]
    assert d["links"] == {"0-1": "NV18", "0-2": "NET", "1-2": "NET"}
    assert list(d["gpus"][0]) == [
        "index",
        "uuid",
        "name",
        "pci_bus_id",
        "memory_total_mib",
        "memory_free_mib",
        "numa_node",
        "mig",
        "processes",
    ]
    assert d["gpus"][0]["processes"] == [
        {"pid": 7, "name": "python3", "used_mib": None},
        {"pid": 9, "name": "", "used_mib": 1200},
    ]
    assert d["gpus"][2]["host"] == "node-b" and "host" not in d["gpus"][0]
    json.dumps(d)  # plain data


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dump_load_round_trip(tmp_path, fmt):
    m = multi_host()
    # a probe's machine carries each GPU's compute capability (one without it gets it from the name on reading)
    m = replace(m, gpus=tuple(replace(g, compute_capability=(9, 0)) for g in m.gpus))
    p = write(tmp_path, dump_snapshot(m, fmt), f"m.{fmt}")
    back = load_snapshot(p)
    assert back.gpus == m.gpus
    assert dict(back.links) == dict(m.links)
    assert (back.host, back.driver, back.notes) == (m.host, m.driver, m.notes)


def test_yaml_dump_quotes_what_yaml_would_misread(tmp_path):
    m = Machine(gpus=(Gpu(0, pci_bus_id="00000000:01:00.0"),), driver="550.50", source="nvml")
    text = dump_snapshot(m)
    assert text.startswith("# gpulayout machine snapshot")
    back = load_snapshot(write(tmp_path, text))
    assert back.driver == "550.50" and back.gpu(0).pci_bus_id == "00000000:01:00.0"


@pytest.mark.parametrize("name", list_presets())
def test_presets_round_trip_through_both_formats(tmp_path, name):
    m = load_preset(name)
    for fmt in ("yaml", "json"):
        back = load_snapshot(write(tmp_path, dump_snapshot(m, fmt), f"p.{fmt}"))
        assert back.gpus == m.gpus and dict(back.links) == dict(m.links)


def test_dump_rejects_unknown_format():
    with pytest.raises(ValueError):
        dump_snapshot(multi_host(), "toml")


# -- load_machine (sources.py) ----------------------------------------------------------------------


def test_load_machine_dispatches_on_the_spec(tmp_path):
    snap = write(tmp_path, DESIGN_EXAMPLE, "snap.yml")
    assert load_machine("snap.yml", base_dir=tmp_path).source == f"snapshot:{snap}"
    topo = write(tmp_path, "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n", "topo.txt")
    m = load_machine(str(topo))
    assert m.source == f"topo:{topo}" and m.link(0, 1) == "NV4"
    assert load_machine("preset:2xL4-pcie").source == "preset:2xL4-pcie"


def test_load_machine_reads_topo_saved_under_a_yaml_name(tmp_path):
    # tabs make it invalid YAML; a report with the matrix under a key is valid YAML without `gpus`
    as_yaml = write(tmp_path, "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n", "topo.yaml")
    assert load_machine(str(as_yaml)).link(0, 1) == "PHB"
    report = write(
        tmp_path, "nvidia_topology: |\n  \tGPU0\tGPU1\n  GPU0\t X \tSYS\n  GPU1\tSYS\t X \n", "r.yaml"
    )
    assert load_machine(str(report)).link(0, 1) == "SYS"


def test_load_machine_errors(tmp_path):
    with pytest.raises(InputError, match=r"nope\.yaml: machine file not found"):
        load_machine("nope.yaml", base_dir=tmp_path)
    with pytest.raises(InputError, match="presets are written preset:<name>"):
        load_machine("presets:2xL4-pcie", base_dir=tmp_path)
    with pytest.raises(InputError, match="empty machine"):
        load_machine("  ")
    with pytest.raises(InputError, match=r"unknown preset '2xl4'.*did you mean '2xL4-pcie'"):
        load_machine("preset:2xl4")
    with pytest.raises(InputError, match="gpus: is empty"):
        load_machine(str(write(tmp_path, "gpus: []\n")))


def test_lead_snapshot_fixtures_load():
    for p in sorted((DATA / "snapshots").glob("*.yaml")):
        m = load_snapshot(p)
        assert m.gpus and m.source == f"snapshot:{p}"
