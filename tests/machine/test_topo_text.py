"""Pasted ``nvidia-smi topo -m`` text: real pastes from issue threads, mangled variants, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.presets import list_presets, load_preset
from pytest_gpulayout.machine.topo_text import has_topo_matrix, parse_topo, render_topo

TOPO = Path(__file__).parents[1] / "data" / "topo"


def paste(name: str) -> str:
    """The paste itself: the data files carry a provenance header above a ``---`` line."""
    head, sep, body = (TOPO / name).read_text(encoding="utf-8").partition("\n---\n")
    assert sep, f"{name} has no --- separator"
    return body


def matrix(m: Machine) -> list[list[str]]:
    return [[" X " if i == j else (m.link(i, j) or "?") for j in m.indices] for i in m.indices]


# -- the real pastes -----------------------------------------------------------------------------


def test_001_eight_4090s_all_sys_two_numa_nodes_nic_columns_ignored():
    m = parse_topo(paste("001.txt"), where="001.txt")
    assert len(m.gpus) == 8
    assert set(m.links.values()) == {"SYS"}
    assert len(m.links) == 28  # every pair known
    assert [g.numa_node for g in m.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert m.source == "topo:001.txt"


def test_003_space_aligned_five_gpus_mixed_pcie():
    m = parse_topo(paste("003.txt"))
    assert len(m.gpus) == 5
    assert m.link(1, 2) == "PHB"
    assert m.link(3, 4) == "PHB"
    assert m.link(0, 3) == "SYS"
    assert m.link(1, 3) == "NODE" and m.link(2, 4) == "NODE"
    assert all(m.link(0, j) == "SYS" for j in range(1, 5))
    assert [g.numa_node for g in m.gpus] == [1, 0, 0, 0, 0]


def test_005_prompt_above_and_glued_nic_cells_all_nv18():
    m = parse_topo(paste("005.txt"))
    assert len(m.gpus) == 8
    assert set(m.links.values()) == {"NV18"}
    assert len(m.links) == 28
    # GPU4-7 rows have "NODENODE" glued in NIC columns; their NUMA column is still found
    assert [g.numa_node for g in m.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_007_indented_broken_alignment_wrapped_legend():
    m = parse_topo(paste("007.txt"))
    assert len(m.gpus) == 2
    assert m.link(0, 1) == "NODE"
    assert [g.numa_node for g in m.gpus] == [0, 0]


def test_009_cut_off_row_recovered_from_the_other_rows():
    text = paste("009.txt")
    assert "GPU3\t" not in text.replace("\tGPU3\t", "")  # the paste really lacks GPU3's row
    m = parse_topo(text)
    assert len(m.gpus) == 4
    for i in range(3):
        assert m.link(i, 3) == "NV18"  # read from GPU0..2's GPU3 column
    assert set(m.links.values()) == {"NV18"} and len(m.links) == 6
    assert [g.numa_node for g in m.gpus] == [0, 0, 1, None]  # GPU3's row, and its NUMA cell, are gone


@pytest.mark.parametrize("name", sorted(p.name for p in TOPO.glob("*.txt")))
def test_topo_text_never_invents_memory_or_models(name):
    m = parse_topo(paste(name), where=name)
    assert not m.memory_known
    assert all(g.memory_total_mib is None and g.memory_free_mib is None and g.name == "" for g in m.gpus)
    assert m.source == f"topo:{name}"


@pytest.mark.parametrize("name", sorted(p.name for p in TOPO.glob("*.txt")))
def test_whole_data_file_with_provenance_header_parses_the_same(name):
    # The header above --- mentions GPUs in prose; it must not be taken for the matrix.
    whole = (TOPO / name).read_text(encoding="utf-8")
    assert dict(parse_topo(whole).links) == dict(parse_topo(paste(name)).links)


# -- mangled variants ----------------------------------------------------------------------------


def test_tabs_turned_into_spaces():
    spaced = paste("001.txt").replace("\t", "    ")
    m = parse_topo(spaced)
    assert set(m.links.values()) == {"SYS"} and len(m.gpus) == 8
    assert [g.numa_node for g in m.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize("esc", ["\x1b", "^["])
def test_ansi_colour_codes_real_and_written_out(esc):
    text = (
        f"{esc}[4m\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity{esc}[0m\n"
        f"{esc}[0;36mGPU0{esc}[0m\t X \t{esc}[1mNV12{esc}[0m\t0-31\t0\n"
        f"{esc}[0;36mGPU1{esc}[0m\tNV12\t X \t0-31\t0\n"
    )
    m = parse_topo(text)
    assert m.link(0, 1) == "NV12"
    assert [g.numa_node for g in m.gpus] == [0, 0]


def test_label_on_the_same_line_and_old_driver_format():
    # SGLang check_env style label; old driver: SOC instead of SYS, mlx5 NIC column, CPU Affinity only
    text = (
        "NVIDIA Topology: \n"
        "\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tPIX\tSOC\tSOC\tPHB\t0-9,20-29\n"
        "GPU1\tPIX\t X \tSOC\tSOC\tPHB\t0-9,20-29\n"
        "GPU2\tSOC\tSOC\t X \tPXB\tSOC\t10-19,30-39\n"
        "GPU3\tSOC\tSOC\tPXB\t X \tSOC\t10-19,30-39\n"
        "mlx5_0\tPHB\tPHB\tSOC\tSOC\t X \n"
        "\nLegend:\n\n  X   = Self\n"
        "  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)\n"
    )
    m = parse_topo(text)
    assert m.link(0, 1) == "PIX" and m.link(2, 3) == "PXB"
    assert m.link(0, 2) == "SYS" and m.link(1, 3) == "SYS"  # SOC is the old name of SYS
    assert [g.numa_node for g in m.gpus] == [None] * 4  # no NUMA Affinity column: unknown, not guessed
    same_line = "GPU Topology: GPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n"
    assert parse_topo(same_line).link(0, 1) == "NV4"


def test_empty_cpu_affinity_cell_does_not_shift_the_numa_column():
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPHB\t\t1\t\tN/A\n"
        "GPU1\tPHB\t X \t0-7\t0\t\tN/A\n"
    )
    m = parse_topo(text)
    assert [g.numa_node for g in m.gpus] == [1, 0]


def test_numa_affinity_spanning_nodes_is_unknown():
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-63\t0-1\nGPU1\tSYS\t X \t0-63\tN/A\n"
    assert [g.numa_node for g in parse_topo(text).gpus] == [None, None]


def test_dgx1_hybrid_cube_mesh_mixed_nv1_nv2_sys():
    rows = [
        "X NV1 NV1 NV2 NV2 SYS SYS SYS",
        "NV1 X NV2 NV1 SYS NV2 SYS SYS",
        "NV1 NV2 X NV2 SYS SYS NV1 SYS",
        "NV2 NV1 NV2 X SYS SYS SYS NV1",
        "NV2 SYS SYS SYS X NV1 NV1 NV2",
        "SYS NV2 SYS SYS NV1 X NV2 NV1",
        "SYS SYS NV1 SYS NV1 NV2 X NV2",
        "SYS SYS SYS NV1 NV2 NV1 NV2 X",
    ]
    text = "        " + "  ".join(f"GPU{i}" for i in range(8)) + "  CPU Affinity\n"
    text += "".join(
        f"GPU{i}    " + "   ".join(r.split()) + f"   {'0-19' if i < 4 else '20-39'}\n"
        for i, r in enumerate(rows)
    )
    m = parse_topo(text)
    assert m.link(0, 1) == "NV1" and m.link(0, 3) == "NV2" and m.link(0, 5) == "SYS"
    assert m.link(6, 7) == "NV2" and m.link(2, 6) == "NV1"


def test_a_single_gpu_matrix():
    m = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n")
    assert m.indices == (0,) and dict(m.links) == {} and m.gpus[0].numa_node == 0


# -- refusals ------------------------------------------------------------------------------------


def _msg(text: str, where: str = "paste.txt") -> str:
    with pytest.raises(InputError) as exc:
        parse_topo(text, where=where)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{where}: ")
    return msg


def test_cut_off_matrix_with_a_pair_no_row_gives_is_refused_naming_it():
    body = paste("009.txt")
    cut = "\n".join(line for line in body.splitlines() if not line.startswith("GPU2"))  # rows GPU2, GPU3 gone
    msg = _msg(cut)
    assert "GPU2-GPU3" in msg and "GPU2, GPU3" in msg and "cut off" in msg


def test_asymmetric_matrix_is_refused_naming_both_rows():
    text = "\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tPHB\t X \n"
    msg = _msg(text)
    assert "GPU0-GPU1" in msg and "NV12" in msg and "PHB" in msg and "not symmetric" in msg


def test_garbage_cell_in_a_gpu_column_names_line_and_pair():
    msg = _msg("\tGPU0\tGPU1\nGPU0\t X \tFAST\nGPU1\tFAST\t X \n")
    assert "line 2" in msg and "GPU0-GPU1" in msg and "'FAST'" in msg


@pytest.mark.parametrize("cell", ["NV0", "nv0", "NV00"])
def test_nv0_is_not_nvlink_and_names_line_and_pair(cell):
    # zero bonded NVLinks is a PCIe pair: taken as NVLink it would rank as the fastest link there is
    msg = _msg(f"\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV12\tSYS\nGPU1\tNV12\t X \t{cell}\nGPU2\tSYS\t{cell}\t X \n")
    assert msg.startswith(f"paste.txt: line 3: GPU1-GPU2: {cell} means no NVLink") and "PCIe kind" in msg


def test_nv_counts_are_kept_and_leading_zeros_dropped():
    m = parse_topo("\tGPU0\tGPU1\nGPU0\t X \tNV04\nGPU1\tNV4\t X \n")
    assert m.link(0, 1) == "NV4"


def test_p2p_matrix_gets_a_hint():
    msg = _msg("\tGPU0\tGPU1\nGPU0\tX\tOK\nGPU1\tOK\tX\n")
    assert "topo -p2p" in msg


def test_no_matrix_at_all():
    assert "no `nvidia-smi topo -m` matrix" in _msg("Driver Version: 550.54\nGPU 0: NVIDIA L4\n")


def test_header_without_rows_and_short_rows():
    assert "no GPU rows" in _msg("\tGPU0\tGPU1\tCPU Affinity\n\nLegend:\n")
    assert "1 of the 2 GPU cells" in _msg("\tGPU0\tGPU1\nGPU0\t X\n")


def test_row_beyond_the_header_and_duplicate_rows():
    assert "only GPU0..GPU1" in _msg("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU2\tPHB\tPHB\n")
    assert "appears twice" in _msg("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU0\t X \tPHB\n")


def test_self_cell_must_be_x():
    assert "own cell should be X" in _msg("\tGPU0\tGPU1\nGPU0\tPHB\tPHB\nGPU1\tPHB\t X \n")


def test_has_topo_matrix():
    assert has_topo_matrix(paste("005.txt"))
    assert not has_topo_matrix("version: 1\ngpus: []\n")


# -- rendering -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_presets())
def test_render_parse_round_trip_keeps_links_and_numa_for_presets(name):
    m = load_preset(name)
    back = parse_topo(render_topo(m))
    assert dict(back.links) == dict(m.links)
    assert [g.numa_node for g in back.gpus] == [g.numa_node for g in m.gpus]


@pytest.mark.parametrize("name", sorted(p.name for p in TOPO.glob("*.txt")))
def test_render_parse_round_trip_for_pastes(name):
    m = parse_topo(paste(name))
    assert dict(parse_topo(render_topo(m)).links) == dict(m.links)


def test_render_looks_like_nvidia_smi():
    text = render_topo(load_preset("8xL40S-2socket"))
    lines = text.splitlines()
    assert lines[0].split("\t") == ["", *[f"GPU{i}" for i in range(8)], "NUMA Affinity"]
    assert lines[1].split("\t") == ["GPU0", " X ", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS", "0"]
    assert lines[8].split("\t")[-1] == "1"
    assert any(line.startswith("Legend:") for line in lines)


def test_render_marks_unknown_links_and_has_no_numa_column_when_none_known():
    m = Machine(gpus=(Gpu(0), Gpu(1), Gpu(2)), links={(0, 1): "PHB"})
    text = render_topo(m)
    assert matrix(m)[0][2] == "?"
    assert text.splitlines()[1].split("\t") == ["GPU0", " X ", "PHB", "?"]
    assert "NUMA" not in text.splitlines()[0]
