"""The ``cluster`` rule on node facts (no Ray): each fault alone gives its verdict, naming the node and the
fix; the ``nodes:`` snapshot section round-trips and is read strictly; the Ray source's pure parts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import subject

from pytest_gpulayout.deployment import Deployment, Require
from pytest_gpulayout.errors import InputError, ProbeError
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine import ray as ray_source
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.node_probe import infiniband_ports, model_files, shm_mib
from pytest_gpulayout.machine.nodes import IbPort, ModelFiles, NodeFacts
from pytest_gpulayout.machine.snapshot import machine_from_dict, machine_to_dict
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.cluster import check_cluster
from pytest_gpulayout.runner import evaluate

TINY = Path(__file__).parents[1] / "data" / "models" / "tiny-llama"
MODEL = load_model(str(TINY))
KEY = str(TINY)
IB = (IbPort("mlx5_0", 1, "ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand"),)


def node(host: str, **kw: object) -> NodeFacts:
    base: dict[str, object] = dict(
        host=host, hostname=host, ip=f"10.0.0.{len(host)}{host[-1:]}", head=host == "n1", ray_gpus=2,
        python="3.11.7", packages={"vllm": "0.32.0", "torch": "2.5.1", "ray": "2.40.0", "sglang": None,
                                   "nvidia-nccl-cu12": "2.21.5"},
        infiniband=IB, shm_mib=65536, models={KEY: ModelFiles(True, "ab" * 32, None)})
    base.update(kw)
    return NodeFacts(**base)  # type: ignore[arg-type]


def machine(*nodes: NodeFacts) -> Machine:
    gpus = tuple(Gpu(index=2 * k + i, uuid=f"GPU-{k}{i}", name="NVIDIA H100", memory_total_mib=81559,
                     memory_free_mib=81000, host=n.host) for k, n in enumerate(nodes) for i in range(2))
    links = {(a.index, b.index): ("NV18" if a.host == b.host else "NET") for a in gpus for b in gpus
             if a.index < b.index}
    return Machine(gpus=gpus, links=links, host=nodes[0].host, source="test", nodes={n.host: n for n in nodes})


def dep(tp: int = 1, pp: int = 2, gpus: tuple[int, ...] = (0, 2), engine: str = "vllm") -> Deployment:
    return Deployment(name="d", model=KEY, engine=engine, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                      gpus=gpus)


def verdict(*nodes: NodeFacts, d: Deployment | None = None):
    return check_cluster(subject(d or dep(), machine(*nodes), MODEL))


def test_nodes_that_agree_pass_with_the_facts_named() -> None:
    f = verdict(node("n1"), node("n2"))
    assert f.status is Status.PASS
    assert "vllm 0.32.0, torch 2.5.1, python 3.11.7, ray 2.40.0" in f.message
    assert f.data["nodes"] == ["n1", "n2"] and f.data["mismatches"] == [] and f.data["transport"] == "ib"


def test_one_host_is_skipped() -> None:
    m = machine(node("n1"))
    assert check_cluster(subject(dep(gpus=(0, 1)), m, MODEL)).status is Status.SKIP
    one = Machine(gpus=(Gpu(0), Gpu(1)), links={(0, 1): "PHB"}, host="box")
    f = check_cluster(subject(dep(gpus=(0, 1)), one, MODEL))
    assert f.status is Status.SKIP and f.data == {"nodes": ["box"], "mismatches": [], "transport": None}


@pytest.mark.parametrize("what, kw, text", [
    ("vllm", {"packages": {"vllm": "0.31.0", "torch": "2.5.1", "ray": "2.40.0", "nvidia-nccl-cu12": "2.21.5"}},
     "vllm differs: n1 has 0.32.0, n2 has 0.31.0 (the engine hangs or refuses at join): install vllm==0.32.0 there"),
    ("torch", {"packages": {"vllm": "0.32.0", "torch": "2.4.0", "ray": "2.40.0", "nvidia-nccl-cu12": "2.21.5"}},
     "torch differs: n1 has 2.5.1, n2 has 2.4.0"),
    ("ray", {"packages": {"vllm": "0.32.0", "torch": "2.5.1", "ray": None, "nvidia-nccl-cu12": "2.21.5"}},
     "ray differs: n1 has 2.40.0, n2 has not installed"),
    ("python", {"python": "3.10.12"}, "python differs: n1 has 3.11.7, n2 has 3.10.12 (the engine hangs or refuses "
                                      "at join): use Python 3.11.7 there"),
    ("model", {"models": {KEY: ModelFiles(False)}}, f"the model directory {KEY} (config.json) is missing on n2: "
                                                    f"copy it there (rsync -a {KEY}/ NODE:{KEY}/)"),
    ("model", {"models": {KEY: ModelFiles(True, "cd" * 32, None)}}, "differs between nodes (sha256 of config.json"),
])
def test_each_mismatch_fails_naming_the_node_and_the_fix(what: str, kw: dict[str, object], text: str) -> None:
    f = verdict(node("n1"), node("n2", **kw))
    assert f.status is Status.FAIL, f.message
    assert text in f.message
    assert [m["what"] for m in f.data["mismatches"]] == [what]


def test_sglang_deployments_compare_sglang() -> None:
    pk = {"vllm": "0.1", "torch": "2.5.1", "ray": "2.40.0", "sglang": "0.5.23", "nvidia-nccl-cu12": "2.21.5"}
    f = verdict(node("n1", packages=pk), node("n2", packages={**pk, "sglang": "0.5.9", "vllm": "9.9"}),
                d=dep(engine="sglang"))
    assert f.status is Status.FAIL and "sglang differs: n1 has 0.5.23, n2 has 0.5.9" in f.message
    assert "vllm" not in f.message


@pytest.mark.parametrize("kw, text", [
    ({"infiniband": (IbPort("mlx5_0", 1, "DOWN"),)},
     "no active InfiniBand port on n2 (its ports: mlx5_0:1 DOWN): NCCL will use sockets: not efficient for "
     "cross-node tensor parallel; set NCCL_IB_HCA"),
    ({"infiniband": ()}, "no active InfiniBand port on n2 (it has no InfiniBand device)"),
    ({"env": {"NCCL_IB_DISABLE": "1"}}, "NCCL_IB_DISABLE=1 on n2: NCCL will use sockets: unset it there"),
    ({"shm_mib": 64}, "/dev/shm on n2 is 64 MiB (under 1024 MiB"),
    ({"packages": {"vllm": "0.32.0", "torch": "2.5.1", "ray": "2.40.0", "nvidia-nccl-cu12": "2.18.3"}},
     "NCCL differs: n1 has nvidia-nccl-cu12 2.21.5, n2 has nvidia-nccl-cu12 2.18.3"),
])
def test_each_network_or_shm_fault_warns_naming_the_node_and_the_fix(kw: dict[str, object], text: str) -> None:
    f = verdict(node("n1"), node("n2", **kw))
    assert f.status is Status.WARN, f.message
    assert text in f.message


def test_socket_transport_is_reported_only_across_hosts() -> None:
    down = node("n2", infiniband=())
    assert verdict(node("n1"), down).data["transport"] == "socket"
    inside = verdict(node("n1"), down, d=dep(tp=2, pp=1, gpus=(2, 3)))   # both GPUs on n2: no NCCL over the net
    assert inside.status is Status.PASS and inside.data["transport"] is None


def test_vllm_refuses_nodes_sharing_an_ip_and_more_gpus_than_ray_offers() -> None:
    f = verdict(node("n1", ip="10.0.0.1"), node("n2", ip="10.0.0.1"))
    assert f.status is Status.FAIL and "share the IP 10.0.0.1: vLLM refuses" in f.message
    g = verdict(node("n1"), node("n2", ray_gpus=1), d=dep(tp=2, pp=2, gpus=(0, 1, 2, 3)))
    assert g.status is Status.FAIL and "puts 2 GPUs on n2 but Ray offers 1 there" in g.message


def test_missing_node_facts_warn_instead_of_passing() -> None:
    m = machine(node("n1"), node("n2"))
    bare = Machine(gpus=m.gpus, links=m.links, host="n1", source="snapshot:x")
    f = check_cluster(subject(dep(), bare, MODEL))
    assert f.status is Status.WARN and "no node facts for n1, n2" in f.message and "snapshot --ray" in f.message
    unprobed = verdict(node("n1"), node("n2", models={}))
    assert unprobed.status is Status.WARN and f"{KEY} was not looked up on n2" in unprobed.message


def test_tp_across_hosts_warns_in_links_and_pp_across_passes() -> None:
    """No engine refuses a TP group across nodes (issue 19 item 6: vLLM's ``ray_executor.py`` and SGLang's
    ``--nnodes`` place TP ranks on any node; Kimi-K2's and DeepSeek's guides serve TP=16 on two nodes):
    over InfiniBand ``links`` warns (NCCL on IB verbs); ``require.tp_links`` still makes it a failure."""
    m = machine(node("n1"), node("n2"))
    tp = evaluate(dep(tp=2, pp=1, gpus=(0, 2)), m, MODEL)
    links = tp["links"]
    assert links.status is Status.WARN and links.data["worst_link"] == "NET" and links.data["transport"] == "ib"
    assert "InfiniBand verbs" in links.message and "require.tp_links" in links.message
    assert tp["cluster"].status is Status.PASS
    pp = evaluate(dep(tp=1, pp=2, gpus=(0, 2)), m, MODEL)
    assert pp["links"].status is Status.PASS and pp["cluster"].status is Status.PASS
    strict = replace(dep(tp=2, pp=1, gpus=(0, 2)), require=Require(tp_links=("NV",)))
    assert evaluate(strict, m, MODEL)["links"].status is Status.FAIL


def test_tp_across_hosts_over_sockets_warns_louder_naming_why() -> None:
    m = machine(node("n1"), node("n2", infiniband=()))
    f = evaluate(dep(tp=2, pp=1, gpus=(0, 2)), m, MODEL)["links"]
    assert f.status is Status.WARN and f.data["transport"] == "socket"
    assert "TCP sockets (no active InfiniBand port on n2)" in f.message and "crawl" in f.message
    off = machine(node("n1", env={"NCCL_IB_DISABLE": "1"}), node("n2"))
    f = evaluate(dep(tp=2, pp=1, gpus=(0, 2)), off, MODEL)["links"]
    assert f.data["transport"] == "socket" and "NCCL_IB_DISABLE=1 on n1" in f.message


def test_nodes_section_round_trips_and_files_without_it_stay_valid() -> None:
    m = machine(node("n1", env={"NCCL_SOCKET_IFNAME": "eth0"}), node("n2", shm_mib=64))
    back = machine_from_dict(machine_to_dict(m), where="x.yaml", source="snapshot:x.yaml")
    assert dict(back.nodes) == dict(m.nodes)
    plain = machine_to_dict(machine(node("n1")))
    plain.pop("nodes")
    assert machine_from_dict(plain, where="x.yaml", source="s").nodes == {}


@pytest.mark.parametrize("patch, key", [
    ({"shm_mib": "64"}, "nodes.n1.shm_mib"),
    ({"packgaes": {}}, "nodes.n1.packgaes"),
    ({"infiniband": [{"device": "mlx5_0", "port": "1", "state": "ACTIVE"}]}, "nodes.n1.infiniband[0].port"),
    ({"models": {"/m": {"exists": "yes"}}}, "nodes.n1.models./m.exists"),
])
def test_bad_nodes_section_names_the_file_and_key(patch: dict[str, object], key: str) -> None:
    d = machine_to_dict(machine(node("n1"), node("n2")))
    d["nodes"]["n1"].update(patch)
    with pytest.raises(InputError) as info:
        machine_from_dict(d, where="cluster.yaml", source="s")
    assert str(info.value).startswith(f"cluster.yaml: {key}: ")
    if "packgaes" in patch:
        assert "did you mean 'packages'" in str(info.value)


# -- the node probe's readers and the Ray source's pure parts -------------------------------------


def test_node_probe_reads_infiniband_shm_and_model_files_under_its_root(tmp_path: Path) -> None:
    for dev, state in (("mlx5_0", "4: ACTIVE"), ("mlx5_1", "1: DOWN")):
        p = tmp_path / "sys/class/infiniband" / dev / "ports/1"
        p.mkdir(parents=True)
        (p / "state").write_text(state + "\n")
        (p / "rate").write_text("400 Gb/sec (4X NDR)\n")
    assert [(p.device, p.state, p.active) for p in infiniband_ports(tmp_path)] == [
        ("mlx5_0", "ACTIVE", True), ("mlx5_1", "DOWN", False)]
    assert infiniband_ports(tmp_path / "nowhere") == []
    assert shm_mib(tmp_path / "nowhere") is None
    (tmp_path / "dev/shm").mkdir(parents=True)
    assert (shm_mib(tmp_path) or 0) > 0
    m = tmp_path / "models/x"
    m.mkdir(parents=True)
    (m / "config.json").write_text("{}")
    got = model_files(tmp_path, "/models/x")
    assert got.exists and got.config_sha256 == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert got.index_sha256 is None and not model_files(tmp_path, "/models/y").exists


@pytest.mark.parametrize("spec, env, address", [
    ("ray", {}, "auto"), ("ray", {"RAY_ADDRESS": "10.0.0.1:6379"}, "10.0.0.1:6379"),
    ("ray:auto", {}, "auto"), ("ray:10.0.0.2:6379", {}, "10.0.0.2:6379"),
    ("ray://head:10001", {}, "ray://head:10001"),
])
def test_ray_machine_spellings(spec: str, env: dict[str, str], address: str) -> None:
    assert ray_source.is_ray_spec(spec)
    assert ray_source.address_of(spec, env) == address


def test_not_ray_specs_and_a_bare_prefix() -> None:
    assert not ray_source.is_ray_spec("rays.yaml") and not ray_source.is_ray_spec("preset:8xH100-sxm")
    with pytest.raises(InputError):
        ray_source.address_of("ray:")


def _answer(host: str, gpus: int, error: str | None = None) -> dict[str, object]:
    m = Machine(gpus=tuple(Gpu(index=i, uuid=f"GPU-{host}{i}", name="L4", memory_total_mib=23034,
                               memory_free_mib=22000) for i in range(gpus)),
                links={(0, 1): "PHB"} if gpus > 1 else {}, host=host, driver="550.1")
    return {"hostname": host, "node": {"hostname": host, "python": "3.11.7"},
            "machine": machine_to_dict(m) if gpus else None, "gpu_error": error}


def _ray_node(nid: str, ip: str, gpus: int, head: bool = False) -> dict[str, object]:
    res: dict[str, float] = {"CPU": 8.0, "GPU": float(gpus)} if gpus else {"CPU": 8.0}
    if head:
        res["node:__internal_head__"] = 1.0
    return {"NodeID": nid, "NodeManagerAddress": ip, "NodeManagerHostname": "x", "Resources": res, "Alive": True}


def test_merge_numbers_head_first_and_keeps_cpu_only_nodes_as_facts() -> None:
    m = ray_source.merge([
        (_ray_node("bb" * 14, "10.0.0.2", 2), _answer("gpu-b", 2)),
        (_ray_node("cc" * 14, "10.0.0.3", 0, head=True), _answer("cpu-head", 0, "NVML: no driver")),
        (_ray_node("aa" * 14, "10.0.0.1", 2), _answer("gpu-a", 2)),
    ], source="ray:auto")
    assert m.hosts == ("gpu-a", "gpu-b", "cpu-head")
    assert [g.host for g in m.gpus] == ["gpu-a", "gpu-a", "gpu-b", "gpu-b"]
    assert m.link(0, 1) == "PHB" and m.link(1, 2) == "NET" and m.link(2, 3) == "PHB"
    assert m.nodes["cpu-head"].head and m.nodes["cpu-head"].ray_gpus == 0
    assert any("cpu-head: no GPU on this node" in n for n in m.notes)
    assert m.host == "cpu-head"


def test_merge_refuses_a_node_ray_says_has_gpus_but_nvml_did_not_see() -> None:
    with pytest.raises(ProbeError) as info:
        ray_source.merge([(_ray_node("aa" * 14, "10.0.0.1", 2), _answer("gpu-a", 2)),
                          (_ray_node("bb" * 14, "10.0.0.2", 4), _answer("gpu-b", 0, "NVML failed: GPU is lost"))],
                         source="ray:auto")
    assert "gpu-b (10.0.0.2)" in str(info.value) and "Ray offers 4 GPU(s) there" in str(info.value)
    assert "GPU is lost" in str(info.value)


def test_nodes_sharing_a_hostname_are_told_apart_by_ip_then_id() -> None:
    nodes = [_ray_node("aa" * 14, "10.0.0.1", 1), _ray_node("bb" * 14, "10.0.0.2", 1),
             _ray_node("cc" * 14, "10.0.0.2", 1)]
    keys = ray_source.host_keys(nodes, {"aa" * 14: "box", "bb" * 14: "box", "cc" * 14: "box"})
    assert keys == {"aa" * 14: "box-10.0.0.1", "bb" * 14: "box-bbbbbbbb", "cc" * 14: "box-cccccccc"}
    unique = ray_source.host_keys(nodes[:2], {"aa" * 14: "a", "bb" * 14: "b"})
    assert unique == {"aa" * 14: "a", "bb" * 14: "b"}


def test_timeout_from_the_environment() -> None:
    assert ray_source.timeout_from_env({}) == ray_source.DEFAULT_TIMEOUT_S
    assert ray_source.timeout_from_env({ray_source.TIMEOUT_ENV: "5"}) == 5.0
    with pytest.raises(InputError):
        ray_source.timeout_from_env({ray_source.TIMEOUT_ENV: "soon"})


def test_replace_keeps_node_facts_frozen() -> None:
    n = node("n1")
    with pytest.raises(AttributeError):
        n.host = "x"  # type: ignore[misc]
    assert replace(n, shm_mib=1).shm_mib == 1 and n.shm_mib == 65536
