"""``gpulayout plan``: the layouts it ranks first, the GPUs it picks, what it refuses and why.

Expectations come from the field's decision rules (design.md, issue 5), not from the planner's own
output: copies when one GPU holds the model with room; TP inside NVLink; PP over PCIe / sockets /
hosts; TP sizes that do not divide the heads refused; fewest GPUs per replica, then more replicas.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from pytest_gpulayout.cli import main
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.machine.sources import load_machine
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.planner.plan import choose_gpus, layouts, plan

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QWEN3_8B = "Qwen/Qwen3-8B"  # 32 attention heads, 8 KV heads, 36 layers, ~15.3 GiB bf16


@pytest.fixture(scope="module")
def qwen() -> object:
    return load_model(QWEN3_8B)


def shape(row) -> tuple[int, int, int]:
    return (row.tp, row.pp, row.dp)


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# -- enumeration --------------------------------------------------------------------------------


def test_enumerates_every_layout_that_fits_the_gpu_count_including_fewer_gpus():
    got = set(layouts(4))
    assert (1, 1, 1) in got and (1, 1, 4) in got and (2, 2, 1) in got and (3, 1, 1) in got
    assert all(tp * pp * dp <= 4 for tp, pp, dp in got)
    brute = {(t, p, d) for t in range(1, 5) for p in range(1, 5) for d in range(1, 5) if t * p * d <= 4}
    assert got == brute


# -- reference scenarios ------------------------------------------------------------------------


def test_model_that_fits_one_80gb_gpu_on_8_nvswitch_gpus_is_copied(qwen):
    p = plan(qwen, load_preset("8xH100-sxm"), max_model_len=8192, concurrency=64)
    best = p.best
    assert best is not None
    assert shape(best) == (1, 1, 8)
    assert sorted(best.gpus) == list(range(8))
    assert best.status is Status.PASS
    assert "independent copies" in best.why
    # each copy holds its share (8 of the 64 users) with room to spare
    assert min(best.full_length_requests) >= 8
    # splits come after every copy layout
    first_split = next(i for i, r in enumerate(p.candidates) if r.world_size > 1)
    assert all(r.world_size == 1 for r in p.candidates[:first_split])
    # on NVSwitch, TP=2 ranks before PP=2 for the same replica size (TP where NVLink joins the group)
    order = [shape(r) for r in p.candidates]
    assert order.index((2, 1, 4)) < order.index((1, 2, 4))
    assert p.measurement is None


def test_model_that_needs_two_pcie_l4_lists_pp2_and_tp2_with_the_pcie_caveat(qwen, capsys):
    # Qwen3-8B's own 40,960-token context: one L4 cannot hold one full request next to 15 GiB of weights
    p = plan(qwen, load_preset("2xL4-pcie"))
    top = [shape(r) for r in p.candidates[:2]]
    assert top == [(1, 2, 1), (2, 1, 1)]  # PP over PCIe first, TP=2 right behind
    pp2, tp2 = p.candidates[0], p.candidates[1]
    assert pp2.verdicts["links"] is Status.PASS and pp2.status is Status.PASS
    assert tp2.verdicts["links"] is Status.WARN
    assert "PHB" in tp2.why and "slower than NVLink" in tp2.why
    assert "only at stage boundaries" in pp2.why
    # TP shards the KV heads, PP the layers: both halve the KV bytes per token per rank
    single = p.find(1, 1, 1)
    assert single is not None and single.refused and "one 40,960-token request" in single.refused
    assert tp2.kv_bytes_per_token_per_rank * 2 == single.kv_bytes_per_token_per_rank
    assert pp2.kv_bytes_per_token_per_rank * 2 == single.kv_bytes_per_token_per_rank
    # the rules cannot choose between them over PCIe: say so, and give the manifest that measures both
    m = p.measurement
    assert m is not None and set(m.candidates) == {"TP=1 PP=2 DP=1", "TP=2 PP=1 DP=1"}
    assert "cannot decide" in m.text and "PHB" in m.text
    import yaml

    from pytest_gpulayout.manifest.load import parse_manifest

    manifest = parse_manifest(yaml.safe_load(m.manifest), path=EXAMPLES / "gpulayout.yaml")
    deps = {d.name: d for d in manifest.deployments}
    assert {(d.tp, d.pp) for d in deps.values()} == {(1, 2), (2, 1)}
    assert all(d.launch.enabled for d in deps.values())
    assert all(list(d.gpus or ()) == [0, 1] for d in deps.values())
    assert manifest.machine == "preset:2xL4-pcie"


def test_two_l4_text_output_shows_table_why_refusals_and_measurement(capsys):
    code = main(["plan", QWEN3_8B, "--machine", "preset:2xL4-pcie", "--max-model-len", "8192", "--concurrency", "8"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    header = next(ln for ln in lines if ln.startswith("#"))
    assert "layout" in header and "KV tokens/replica" in header and "full-length reqs" in header
    row1 = next(ln for ln in lines if ln.startswith("1 "))
    row2 = next(ln for ln in lines if ln.startswith("2 "))
    assert "TP=1 PP=2 DP=1" in row1 and "pass" in row1
    assert "TP=2 PP=1 DP=1" in row2 and "links warn" in row2
    # 8 users over DP=2 is 4 per card: one L4 holds fewer, so the copies are refused, with the numbers
    assert "TP=1 PP=1 DP=2: kv_pool:" in out and "each replica's share of the 8 needed" in out
    assert "why:" in out and "measure:" in out and "launch: {enabled: true}" in out


def test_tp_sizes_that_do_not_divide_the_heads_are_refused_with_the_reason(qwen):
    for preset in ("4xA100-80gb-sxm", "8xH100-sxm"):
        p = plan(qwen, load_preset(preset), max_model_len=8192)
        tp3 = p.find(3, 1, 1)
        assert tp3 is not None, preset
        assert tp3.refused and "32 attention heads do not divide by TP=3" in tp3.refused
        assert tp3.status is Status.FAIL and tp3.verdicts["heads"] is Status.FAIL
        assert tp3 in p.refused and tp3 not in p.candidates
        assert all(r.tp not in (3, 5, 6, 7) for r in p.candidates)
        # refused layouts come after every candidate
        assert p.layouts.index(tp3) > max(p.layouts.index(r) for r in p.candidates)


def test_gemma3_on_two_32gb_cards_tp_shards_kv_dp_keeps_a_pool_per_card(capsys):
    code, out = run_json(capsys, "google/gemma-3-12b-it", "--machine", "preset:2x32gb-pcie", "--max-model-len", "2048")
    assert code == 0
    rows = {
        (r["tensor_parallel_size"], r["pipeline_parallel_size"], r["data_parallel_size"]): r for r in out["layouts"]
    }
    tp2, dp2 = rows[(2, 1, 1)], rows[(1, 1, 2)]
    assert tp2["checks"]["heads"]["data"]["kv_heads_per_rank"] == 4
    assert dp2["checks"]["heads"]["data"]["kv_heads_per_rank"] == 8
    assert tp2["kv_bytes_per_token_per_rank"] * 2 == dp2["kv_bytes_per_token_per_rank"]
    assert len(dp2["predicted_kv_tokens_per_replica"]) == 2 and len(tp2["predicted_kv_tokens_per_replica"]) == 1
    # one sharded pool holds more users than two copies' pools together (weights are halved too)
    assert tp2["full_length_requests"][0] > sum(dp2["full_length_requests"])


def test_gemma3_64_users_nothing_fits_then_fp8_kv_makes_the_split_fit(capsys):
    args = [
        "google/gemma-3-12b-it",
        "--machine",
        "preset:2x32gb-pcie",
        "--max-model-len",
        "2048",
        "--concurrency",
        "64",
    ]
    code, out = run_json(capsys, *args)
    assert code == 1  # no layout serves 64 users: say so
    assert all(r["refused"] for r in out["layouts"])
    assert any("the most any layout holds" in n for n in out["notes"])
    code, out = run_json(capsys, *args, "--kv-cache-dtype", "fp8")
    assert code == 0
    top = out["layouts"][0]
    assert top["data_parallel_size"] == 1 and top["tensor_parallel_size"] * top["pipeline_parallel_size"] == 2
    assert top["full_length_requests"][0] >= 64


def test_busy_second_l4_refuses_sglang_tp2_on_the_balance_rule():
    machine = load_machine(str(DATA / "snapshots" / "two-l4-busy.yaml"))
    p = plan(load_model(QWEN3_8B), machine, engine="sglang", engine_version="0.5.23", max_model_len=8192)
    tp2 = p.find(2, 1, 1)
    assert tp2 is not None and tp2.refused and tp2.refused.startswith("balance:")
    assert "1.25 GiB" in tp2.refused
    assert p.best is not None and shape(p.best) == (1, 2, 1)  # PP has no balance rule between stages


# -- GPU choice ---------------------------------------------------------------------------------


def test_tp2_lands_on_a_phb_pair_not_on_the_gpu_across_the_socket(qwen):
    machine = load_machine(str(DATA / "topo" / "003.txt"))  # GPU0 SYS to all; PHB pairs {1,2}, {3,4}
    p = plan(qwen, machine, max_model_len=8192)
    tp2 = p.find(2, 1, 1)
    assert tp2 is not None and set(tp2.gpus) in ({1, 2}, {3, 4})
    assert tp2.findings["links"].data["worst_link"] == "PHB"
    tp2x2 = p.find(2, 1, 2)
    assert tp2x2 is not None and {frozenset(g[0]) for g in tp2x2.replicas} == {
        frozenset({1, 2}),
        frozenset({3, 4}),
    }
    pp2 = p.find(1, 2, 1)
    assert pp2 is not None and 0 not in pp2.gpus
    # topo text has no memory: the plan says so instead of pretending to know the pools
    assert any("memory is unknown" in n for n in p.notes)
    assert not tp2.pool_predicted and tp2.verdicts["kv_pool"] is not Status.PASS


def test_tp_groups_stay_inside_a_socket_and_tp8_across_sockets_starts_slow():
    machine = load_preset("8xL40S-2socket")  # NODE inside a socket, SYS across
    model = load_model("Qwen/Qwen3-32B")
    p = plan(model, machine, max_model_len=8192)
    tp8 = p.find(8, 1, 1)
    # the engines start TP over SYS: listed as "starts, slow" after every layout that keeps TP in a socket
    assert tp8 is not None and tp8.refused is None and tp8.slow_link == "SYS"
    # check and plan agree (issue 19 item 6): links warns for what the plan lists as "starts, slow"
    assert tp8.verdicts["links"] is Status.WARN and tp8.status is Status.WARN and tp8.why.startswith("starts, slow")
    assert all(r.slow_link for r in p.candidates[p.candidates.index(tp8):])
    for tp, pp, dp in ((4, 1, 2), (4, 2, 1), (2, 2, 2)):
        row = p.find(tp, pp, dp)
        assert row is not None
        for group in (g for rep in row.replicas for g in rep):
            assert set(group) <= {0, 1, 2, 3} or set(group) <= {4, 5, 6, 7}, (row.layout, group)
    # over PCIe, the candidate with the least TP ranks first among equal replica sizes
    same = [
        r
        for r in p.candidates
        if (r.independent_replicas, r.group_size) == (p.candidates[0].independent_replicas, p.candidates[0].group_size)
    ]
    assert same[0].tp == min(r.tp for r in same)


def _two_islands() -> Machine:
    """4 GPUs: NVLink pairs {0,2} and {1,3} (not index-adjacent), PCIe between the pairs."""
    gpus = tuple(
        Gpu(i, uuid=f"GPU-{i}", name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920, memory_free_mib=81000)
        for i in range(4)
    )
    links = {(0, 1): "SYS", (0, 2): "NV12", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "NV12", (2, 3): "SYS"}
    return Machine(gpus=gpus, links=links, source="test")


def test_tp_groups_follow_nvlink_not_index_order():
    m = _two_islands()
    assert set(choose_gpus(m, 2, 1, 1)) == {0, 2}
    gpus = choose_gpus(m, 2, 1, 2)
    assert {frozenset(gpus[:2]), frozenset(gpus[2:])} == {frozenset({0, 2}), frozenset({1, 3})}
    p = plan(load_model("meta-llama/Llama-3.1-70B-Instruct"), m, max_model_len=8192)
    best = p.best
    assert best is not None and shape(best) == (2, 1, 2)  # 70B needs two 80 GB cards: TP on NVLink
    assert best.verdicts["links"] is Status.PASS
    tp4 = p.find(4, 1, 1)
    assert tp4 is not None and tp4.refused is None and tp4.slow_link == "SYS"
    assert p.candidates.index(tp4) > p.candidates.index(best)


def test_pp_across_hosts_only_after_layouts_inside_one_host():
    gpus = tuple(
        Gpu(
            i,
            uuid=f"GPU-{i}",
            name="NVIDIA H100 80GB HBM3",
            memory_total_mib=81559,
            memory_free_mib=81000,
            host=f"node{i // 2}",
        )
        for i in range(4)
    )
    links = {(0, 1): "NV18", (2, 3): "NV18"}
    m = Machine(gpus=gpus, links=links, source="test")
    p = plan(load_model("meta-llama/Llama-3.1-70B-Instruct"), m, max_model_len=8192)
    assert p.best is not None and shape(p.best) == (2, 1, 2)  # one replica per host
    assert all(len({m.gpu(g).host for g in rep[0]}) == 1 for rep in p.best.replicas)
    tp4 = p.find(4, 1, 1)  # TP across hosts: the engines start it; listed "starts, slow", after the rest
    assert tp4 is not None and tp4.refused is None and tp4.slow_link == "NET"
    assert tp4.why.startswith("starts, slow") and "inside a host" in tp4.why
    assert p.candidates[-1] is tp4
    cross = p.find(2, 2, 1)  # TP inside each host, PP across
    assert cross is not None and cross.refused is None
    assert p.candidates.index(cross) > p.candidates.index(p.best)
    assert "NET" in cross.why


# -- CLI ----------------------------------------------------------------------------------------


def test_json_has_the_design_shape(capsys):
    code, out = run_json(capsys, QWEN3_8B, "--machine", "preset:2xL4-pcie")
    assert code == 0
    assert set(out) >= {"model", "machine", "layouts"}
    assert out["machine"]["source"] == "preset:2xL4-pcie"
    for row in out["layouts"]:
        assert set(row) >= {
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "gpus",
            "status",
            "predicted_kv_tokens_per_replica",
            "why",
            "weights_gib_per_gpu",
            "kv_bytes_per_token_per_rank",
            "full_length_requests",
            "verdicts",
        }
        assert row["status"] in ("pass", "warn", "fail", "skip")
        assert len(row["gpus"]) == (
            row["tensor_parallel_size"] * row["pipeline_parallel_size"] * row["data_parallel_size"]
        )
        assert row["why"]


def test_gpus_limits_the_plan(capsys):
    code, out = run_json(capsys, QWEN3_8B, "--machine", "preset:8xH100-sxm", "--gpus", "4")
    assert code == 0
    assert max(len(r["gpus"]) for r in out["layouts"]) == 4
    assert out["layouts"][0]["data_parallel_size"] == 4


def exit_code(argv: list[str]) -> int:
    """What the shell sees: argparse usage errors exit through SystemExit, the rest return."""
    try:
        return main(argv)
    except SystemExit as done:
        return int(done.code or 0)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--machine", "preset:2xL4-pcie", "--gpus", "4"], "--gpus 4: the machine shows only 2 GPUs"),
        (["--machine", "preset:2xL4-pcie", "--concurrency", "4", "--kv-tokens", "100"], "not allowed with"),
        (
            ["--machine", "preset:2xL4-pcie", "--memory-fraction", "1.5"],
            "--memory-fraction must be in (0, 1]",
        ),
        (["--machine", "preset:2xL4-pcie", "--max-model-len", "0"], "--max-model-len must be at least 1"),
        (["--machine", "preset:2xl4"], "unknown preset"),
        (["--machine", "preset:2xL4-pcie", "--engine-version", "banana"], "--engine-version: not a version: 'banana'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert exit_code(["plan", QWEN3_8B, *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unknown_model_is_exit_2(capsys):
    assert main(["plan", "Qwen/Qwen9-8B", "--machine", "preset:2xL4-pcie"]) == 2
    err = capsys.readouterr().err
    assert "Qwen9-8B" in err and len(err.strip().splitlines()) == 1


def test_auto_machine_without_nvml_is_exit_3(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert main(["plan", QWEN3_8B]) == 3
    assert "NVML" in capsys.readouterr().err


def test_html_written_with_plan(tmp_path, capsys):
    out = tmp_path / "plan.html"
    assert main(["plan", QWEN3_8B, "--machine", "preset:2xL4-pcie", "--html", str(out)]) == 0
    page = out.read_text()
    assert "Layouts, best first" in page and "TP=1 PP=2 DP=1" in page and "Needs a measurement" in page
    assert "http://" not in page and "https://" not in page


# -- speed --------------------------------------------------------------------------------------


def test_plan_on_8_gpus_answers_well_under_a_second(qwen):
    machine = load_preset("8xH100-sxm")
    start = time.process_time()  # CPU seconds: other work on a shared machine takes wall time, not these
    p = plan(qwen, machine, max_model_len=8192, concurrency=64)
    elapsed = time.process_time() - start
    assert len(p.layouts) == len(layouts(8))
    assert elapsed < 0.5, f"plan took {elapsed:.2f} s of CPU"


# -- review findings: ranking, default need, hidden ranks, bad flags, memory fraction, memory unknown --


def test_two_socket_l40s_70b_uses_every_gpu_before_leaving_some_idle(capsys):
    """Llama 70B on 8 L40S (no NVLink): with one replica either way, PP=7/6/5 leave GPUs idle and rank
    after the layouts that put all 8 to work; the rank order follows replicas, then GPUs used."""
    p = plan(load_model("meta-llama/Llama-3.1-70B-Instruct"), load_preset("8xL40S-2socket"))
    order = [shape(r) for r in p.candidates]
    for full in ((2, 4, 1), (4, 2, 1), (1, 8, 1)):
        for idle in ((1, 7, 1), (1, 6, 1), (1, 5, 1)):
            assert order.index(full) < order.index(idle), (full, idle, order)
    assert p.best is not None and p.best.gpu_count == 8
    # the rule holds over the whole list: more replicas first, then (as many) more GPUs used
    fast = [r for r in p.candidates if not r.slow_link]  # TP over SYS: "starts, slow", after the rest
    assert all(r.slow_link for r in p.candidates[len(fast):])
    room = [min(r.full_length_requests) >= 2 for r in fast]
    keys = [(not ok, -r.independent_replicas, -r.gpu_count) for ok, r in zip(room, fast, strict=True)]
    assert keys == sorted(keys)
    # the why lines agree with the order: no "fewer replicas" where no more replicas were possible
    assert "fewer replicas" not in p.best.why and "idle" in p.best.why
    pp7 = p.find(1, 7, 1)
    assert pp7 is not None and "uses 7 of 8 GPUs, 1 idle" in pp7.why and "ranked after" in pp7.why


def test_without_a_need_layouts_with_room_for_a_few_requests_rank_first(capsys):
    """70B on 4 A100 at 32k: TP=2 x DP=2 holds one request per copy, TP=4 fifteen; with no need
    given the plan assumes a few per replica, says so, and ranks TP=4 first."""
    args = ["meta-llama/Llama-3.1-70B-Instruct", "--machine", "preset:4xA100-80gb-sxm", "--max-model-len", "32768"]
    code, out = run_json(capsys, *args)
    assert code == 0
    assumed = out["assumed_need"]["full_length_requests_per_replica"]
    rows = [r for r in out["layouts"] if not r["refused"]]
    order = [(r["tensor_parallel_size"], r["pipeline_parallel_size"], r["data_parallel_size"]) for r in rows]
    assert order[0] == (4, 1, 1)
    held = {k: min(r["full_length_requests"]) for k, r in zip(order, rows, strict=True)}
    assert held[(1, 2, 1)] < assumed <= held[(4, 1, 1)]
    # TP=2 (x DP=2) held one request per copy until vLLM's CUDA-graph estimate (0.20+, ~2 GiB per GPU for
    # 80 layers: engines/vllm/cudagraphs.py) took it below one 32k request: refused, not ranked
    everything = {(r["tensor_parallel_size"], r["pipeline_parallel_size"], r["data_parallel_size"]): r
                  for r in out["layouts"]}
    assert "less than one 32,768-token request" in everything[(2, 1, 2)]["refused"]
    # every layout with room for the assumed need comes before every one without
    ok = [min(r["full_length_requests"]) >= assumed for r in rows]
    assert ok == sorted(ok, reverse=True)
    pp2 = rows[order.index((1, 2, 1))]
    assert f"fewer than the {assumed} assumed" in pp2["why"]
    assert main(["plan", *args]) == 0
    text = capsys.readouterr().out
    assert f"needs: none given; assumed room for {assumed} full-length requests per replica" in text
    # a need the user gives replaces the assumption: 2 users fit the two copies, and copies win
    code, out = run_json(capsys, *args, "--concurrency", "2")
    assert code == 0 and out["assumed_need"] is None
    top = out["layouts"][0]
    assert top["data_parallel_size"] == 2


def test_hidden_rows_are_counted_the_shown_ones_numbered_without_gaps_and_all_shows_them(capsys):
    argv = ["plan", QWEN3_8B, "--machine", "preset:8xH100-sxm", "--max-model-len", "8192"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table = out.split("why:")[0]
    shown = [int(ln.split()[0]) for ln in table.splitlines() if ln.strip()[:1].isdigit()]
    assert shown == list(range(1, len(shown) + 1))  # issue 24 item 13: no gaps in the default view
    note = next(ln for ln in table.splitlines() if "more layouts not shown" in ln)
    assert "--all" in note
    hidden = int(note.split("(", 1)[1].split()[0])
    n_candidates = len(plan(load_model(QWEN3_8B), load_preset("8xH100-sxm"), max_model_len=8192).candidates)
    assert len(shown) + hidden == n_candidates
    assert main([*argv, "--all"]) == 0
    full = capsys.readouterr().out.split("why:")[0]
    ranks = [int(ln.split()[0]) for ln in full.splitlines() if ln.strip()[:1].isdigit()]
    assert ranks == list(range(1, n_candidates + 1)) and "not shown" not in full


@pytest.mark.parametrize("where", ["missing-folder", "directory"])
def test_bad_html_path_is_one_line_exit_2_before_any_work(where, tmp_path, capsys, monkeypatch):
    target = tmp_path / "nope" / "x.html" if where == "missing-folder" else tmp_path
    monkeypatch.setitem(sys.modules, "pynvml", None)  # --machine auto would exit 3: the path is checked first
    assert exit_code(["plan", QWEN3_8B, "--html", str(target)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err and "--html" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_sglang_refusal_names_the_default_fraction_and_the_one_that_serves(capsys):
    """Qwen3-8B on one L4 under SGLang: the default mem_fraction_static, not the weights, leaves no
    KV room; the refusal says so with the smallest --memory-fraction that serves, and that works."""
    model, machine = load_model(QWEN3_8B), load_preset("2xL4-pcie")
    p = plan(model, machine, engine="sglang", max_model_len=8192)
    dp2 = p.find(1, 1, 2)
    assert dp2 is not None and dp2.refused
    fraction = dp2.fits_with_memory_fraction
    assert fraction is not None and 0.7 < fraction <= 0.95
    assert "mem_fraction_static" in dp2.refused and f"--memory-fraction {fraction:.2f}" in dp2.refused
    assert any(f"--memory-fraction {fraction:.2f}" in n and "TP=1 PP=1 DP=2" in n for n in p.notes)
    with_it = plan(model, machine, engine="sglang", max_model_len=8192, memory_fraction=fraction)
    ok = with_it.find(1, 1, 2)
    assert ok is not None and ok.refused is None and ok.need_met == "with room"
    assert min(ok.full_length_requests) >= with_it.assumed_requests * 1.1
    assert with_it.best is not None and shape(with_it.best) == (1, 1, 2)  # copies win once they fit
    below = plan(model, machine, engine="sglang", max_model_len=8192, memory_fraction=round(fraction - 0.01, 2))
    short = below.find(1, 1, 2)
    # one hundredth less: refused, or holding the assumed need without the kv_pool margin (ranked lower)
    assert short is not None and (short.refused or short.need_met != "with room")
    assert below.best is not None and shape(below.best) != (1, 1, 2)
    # a fraction the user set is not second-guessed
    assert below.find(1, 1, 1).fits_with_memory_fraction is None


def test_unknown_memory_never_reads_as_pass_and_exits_1(tmp_path, capsys):
    text = (DATA / "topo" / "003.txt").read_text().split("\n---\n", 1)[1]
    topo = tmp_path / "topo.txt"
    topo.write_text(text)
    assert main(["plan", QWEN3_8B, "--machine", str(topo)]) == 1
    out = capsys.readouterr().out
    table = out.split("why:")[0]
    rows = [ln for ln in table.splitlines() if ln.strip()[:1].isdigit()]
    assert rows and "all pass" not in out and " pass " not in " ".join(rows)
    assert all("unknown" in ln and "KV pool NOT predicted" in ln for ln in rows)
    assert "no layout is known to fit" in out
    code, data = run_json(capsys, QWEN3_8B, "--machine", str(topo))
    assert code == 1
    cands = [r for r in data["layouts"] if not r["refused"]]
    assert cands and not any(r["pool_predicted"] for r in cands)
    # the ranking still works on heads and links: TP=3 refused, PP over PHB before TP over PHB
    refused = {(r["tensor_parallel_size"], r["pipeline_parallel_size"]) for r in data["layouts"] if r["refused"]}
    assert (3, 1) in refused
    order = [(r["tensor_parallel_size"], r["pipeline_parallel_size"], r["data_parallel_size"]) for r in cands]
    assert order.index((1, 2, 2)) < order.index((2, 1, 2))


# -- expert parallel, a layout of its own for MoE models (issue 19 item 7) ----------------------------------

def test_moe_plans_offer_expert_parallel_as_its_own_layout():
    """SGLang 0.5.23 ``model_runner_components/moe_ep_setup.py``: ``moe_tp_size = tp_size // ep_size``, so
    with EP each rank holds whole experts; without it TP=8 splits Qwen3-30B-A3B-FP8's 768-wide experts into
    96-wide shares its 128-wide FP8 blocks refuse. The plan lists both; only EP serves."""
    model = load_model(str(DATA / "models" / "qwen3-30b-a3b-fp8"))
    p = plan(model, load_preset("8xH100-sxm"), engine="sglang", engine_version="0.5.23", max_model_len=8192)
    split, ep = p.find(8), p.find(8, ep=True)
    assert split is not None and split.refused_by == "heads"
    assert ep is not None and ep.refused is None and ep.layout == "TP=8 PP=1 DP=1 EP"
    assert ep.deployment is not None and ep.deployment.enable_expert_parallel
    assert ep.why.startswith("expert parallel: the 128 experts spread whole over 8 ranks")
    assert ep.to_json()["expert_parallel"] is True and "expert_parallel" not in split.to_json()
    # TP=1 without DP: SGLang's EP is inside the TP group, so there is no EP layout of one GPU
    assert p.find(1, ep=True) is None


def test_dense_plans_list_no_expert_parallel_layout():
    p = plan(load_model("Qwen/Qwen3-8B"), load_preset("2xL4-pcie"), max_model_len=8192)
    assert not any(r.expert_parallel for r in p.layouts)
