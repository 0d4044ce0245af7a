"""The Ray machine source and the ``cluster`` check against a real local Ray cluster (``@pytest.mark.ray``).

Three nodes (``tests/ray_cluster.py``): ``a`` (head) and ``b`` are alike; ``c`` carries the faults: another
vLLM (a ``.dist-info`` on its path), another NCCL, its InfiniBand port down, a 64 MiB ``/dev/shm``, one
model missing and another with a different config.json. The same probe code runs on every node, each
with its own fake NVML. One cluster for the module; teardown checks that no Ray process is left.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from leaks import _socket_owners, is_loopback, listeners
from ray_cluster import LOOPBACK_ENV, REPO, NodeSpec, _node_pids, start_cluster  # noqa: F401  (fixture)

from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import ProbeError
from pytest_gpulayout.machine.sources import load_machine

pytestmark = pytest.mark.ray

TINY = REPO / "tests" / "data" / "models" / "tiny-llama"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("models")
    out = {}
    for name in ("llama-a", "llama-b"):
        shutil.copytree(TINY, base / name)
        out[name] = str(base / name)
    return out


@pytest.fixture(scope="module")
def cluster(start_cluster, models):  # noqa: F811
    both = {models["llama-a"]: "copy", models["llama-b"]: "copy"}
    return start_cluster([
        NodeSpec("a", "127.0.0.1", models=both),
        NodeSpec("b", "127.0.0.2", models=both),
        NodeSpec("c", "127.0.0.3", vllm="0.31.0", nccl="2.18.3", ib_state="1: DOWN", small_shm=True,
                 models={models["llama-b"]: "differs"}),
    ])


def host(ip: str) -> str:
    """The host key the merged machine gives a node: every test node has this machine's hostname."""
    return f"{socket.gethostname()}-{ip}"


A, B, C = host("127.0.0.1"), host("127.0.0.2"), host("127.0.0.3")


def gpus(node: str, *idx: int) -> list[str]:
    return [f"GPU-{node}{i}000000" for i in idx]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory, cluster, models) -> Path:
    def dep(model: str, ids: list[str], tp: int, pp: int) -> dict[str, object]:
        return {"model": models[model], "gpus": ids, "tensor_parallel_size": tp, "pipeline_parallel_size": pp,
                "max_model_len": 1024}

    data = {
        "version": 1,
        "machine": f"ray:{cluster.address}",
        "defaults": {"engine": "vllm", "engine_version": "0.32.0"},
        "deployments": {
            "right-tp2-pp2": dep("llama-a", gpus("a", 0, 1) + gpus("b", 0, 1), 2, 2),
            "tp-across": dep("llama-a", gpus("a", 0) + gpus("b", 0), 2, 1),
            "pp-across": dep("llama-a", gpus("a", 0) + gpus("b", 0), 1, 2),
            "onto-c-missing": dep("llama-a", gpus("a", 0) + gpus("c", 0), 1, 2),
            "onto-c-differs": dep("llama-b", gpus("a", 0) + gpus("c", 0), 1, 2),
        },
    }
    path = tmp_path_factory.mktemp("manifest") / "gpulayout.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*argv: str, ray_address: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=180, cwd=REPO)


def test_every_node_is_probed_and_merged_into_one_machine(cluster, models) -> None:
    m = load_machine(f"ray:{cluster.address}", model_dirs=(models["llama-a"], models["llama-b"]),
                     engines=ENGINES.values())
    assert m.source == f"ray:{cluster.address}"
    assert m.hosts == (A, B, C)                      # head first, then by host name
    assert [g.host for g in m.gpus] == [A, A, B, B, C, C]
    assert [g.uuid[:10] for g in m.gpus] == ["GPU-a00000", "GPU-a10000", "GPU-b00000", "GPU-b10000",
                                              "GPU-c00000", "GPU-c10000"]
    assert m.link(0, 1) == "NV18" and m.link(2, 3) == "NV18" and m.link(1, 2) == "NET"
    a, c = m.nodes[A], m.nodes[C]
    assert a.head and not c.head and a.ip == "127.0.0.1" and c.ip == "127.0.0.3" and a.ray_gpus == 2
    assert a.cuda == "12.4" and a.driver == "550.90.07"
    assert a.version("vllm") == "0.32.0" and c.version("vllm") == "0.31.0"
    assert a.nccl == "nvidia-nccl-cu12 2.21.5" and c.nccl == "nvidia-nccl-cu12 2.18.3"
    assert [p.state for p in a.infiniband] == ["ACTIVE"] and [p.state for p in c.infiniband] == ["DOWN"]
    assert c.shm_mib == 64 and (a.shm_mib or 0) > 1024
    assert a.models[models["llama-a"]].exists and not c.models[models["llama-a"]].exists
    assert a.models[models["llama-b"]].config_sha256 != c.models[models["llama-b"]].config_sha256
    assert a.version("ray") == c.version("ray") is not None


def test_every_listener_of_the_test_cluster_is_on_loopback(cluster, models) -> None:
    """Round 4, item 4: 5 of the cluster's 12 listeners (the raylets of 127.0.0.2 and .3, a worker) were on
    every interface: Ray binds 0.0.0.0 for a node whose address is not exactly 127.0.0.1. Every node's
    processes are started here (the probe runs a task on each), then every socket they listen on, TCP or
    UDP, is listed: each on its node's 127.0.0.x."""
    load_machine(f"ray:{cluster.address}", model_dirs=(models["llama-a"],), engines=ENGINES.values())
    pids = {p for p, _ in _node_pids(cluster.cluster.head_node, *cluster.cluster.worker_nodes)}
    sockets = listeners()
    owners = _socket_owners(set(sockets))
    ours = {ino: where for ino, where in sockets.items() if owners.get(ino) in pids}
    raylets = {owners[ino] for ino in ours if b"raylet" in Path(f"/proc/{owners[ino]}/cmdline").read_bytes()}
    assert len(raylets) == 3, "a listener of every node's raylet was expected"
    off = [f"{address}:{port} (pid {owners[ino]})" for ino, (address, port) in ours.items() if not is_loopback(address)]
    assert off == [], f"listening off loopback: {off}"
    assert len(ours) >= 9


def _check(manifest: Path, *extra: str) -> dict[str, dict[str, dict[str, object]]]:
    r = cli("check", str(manifest), "--json", *extra)
    assert r.returncode == 1, r.stderr           # the faulty deployments fail
    return {name: d["checks"] for name, d in json.loads(r.stdout)["deployments"].items()}


def test_verdicts_on_the_live_cluster(cluster, manifest) -> None:
    checks = _check(manifest)
    right = checks["right-tp2-pp2"]
    assert right["cluster"]["status"] == "pass", right["cluster"]["message"]
    assert right["links"]["status"] == "pass"                # TP inside each host, PP across them
    assert right["cluster"]["data"]["transport"] == "ib" and right["cluster"]["data"]["nodes"] == [A, B]
    assert checks["tp-across"]["links"]["status"] == "warn"   # TP across hosts starts (slower than NVLink)
    assert checks["tp-across"]["links"]["data"]["worst_link"] == "NET"
    assert checks["pp-across"]["links"]["status"] == "pass"
    assert checks["pp-across"]["cluster"]["status"] == "pass"

    missing = checks["onto-c-missing"]["cluster"]
    msg = str(missing["message"])
    assert missing["status"] == "fail"
    assert f"vllm differs: {A} has 0.32.0, {C} has 0.31.0" in msg and "install vllm==0.32.0 there" in msg
    assert f"is missing on {C}: copy it there" in msg
    assert f"no active InfiniBand port on {C} (its ports: mlx5_0:1 DOWN): NCCL will use sockets" in msg
    assert "NCCL_IB_HCA" in msg and "NCCL_SOCKET_IFNAME" in msg
    assert f"/dev/shm on {C} is 64 MiB" in msg and "--shm-size" in msg
    assert f"NCCL differs: {A} has nvidia-nccl-cu12 2.21.5, {C} has nvidia-nccl-cu12 2.18.3" in msg
    whats = {m["what"]: m["values"] for m in missing["data"]["mismatches"]}  # type: ignore[index, union-attr]
    assert whats["vllm"] == {A: "0.32.0", C: "0.31.0"} and whats["model"][C] == "missing"
    assert missing["data"]["transport"] == "socket"  # type: ignore[index]

    differs = checks["onto-c-differs"]["cluster"]
    assert differs["status"] == "fail"
    assert "differs between nodes (sha256 of config.json" in str(differs["message"])
    assert C in str(differs["message"]) and "copy the head's files to every node" in str(differs["message"])


def test_snapshot_of_the_cluster_replays_to_the_same_verdicts(cluster, manifest, tmp_path) -> None:
    out = tmp_path / "cluster.yaml"
    r = cli("snapshot", "--ray", "--manifest", str(manifest), "-o", str(out), ray_address=cluster.address)
    assert r.returncode == 0, r.stderr
    assert f"(ray:{cluster.address})" in r.stderr              # plain --ray took $RAY_ADDRESS
    snap = yaml.safe_load(out.read_text())
    assert set(snap["nodes"]) == {A, B, C} and snap["nodes"][C]["packages"]["vllm"] == "0.31.0"
    live = _check(manifest)
    replay = _check(manifest, "--machine", str(out))
    for name in live:
        for check in ("placement", "links", "cluster", "kv_pool", "balance", "heads"):
            assert replay[name][check]["status"] == live[name][check]["status"], (name, check)
            assert replay[name][check]["message"] == live[name][check]["message"], (name, check)
            assert replay[name][check]["data"] == live[name][check]["data"], (name, check)


def test_pytest_suite_runs_the_cluster_check_against_the_cluster(cluster, manifest) -> None:
    env = {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gpulayout",
                        "--gpulayout-manifest", str(manifest), "--gpulayout-machine", f"ray:{cluster.address}",
                        "-k", "cluster", "-v"], capture_output=True, text=True, env=env, timeout=240,
                       cwd=manifest.parent)
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    for name in ("right-tp2-pp2", "tp-across", "pp-across"):
        assert f"pytest_gpulayout/checks/test_cluster.py::test_cluster[{name}] PASSED" in out, out
    for name in ("onto-c-missing", "onto-c-differs"):
        assert f"pytest_gpulayout/checks/test_cluster.py::test_cluster[{name}] FAILED" in out, out
    assert f"is missing on {C}: copy it there" in out    # the finding's message is the failure text
    assert "2 failed, 3 passed" in out


def test_a_node_that_does_not_answer_fails_the_whole_probe(cluster) -> None:
    cluster.add(NodeSpec("d", "127.0.0.4", env={"GPULAYOUT_TEST_NVML_HANG": "600"}))
    try:
        with pytest.raises(ProbeError) as info:
            from pytest_gpulayout.machine.ray import probe_cluster

            probe_cluster(cluster.address, timeout_s=8)
        msg = str(info.value)
        assert "127.0.0.4" in msg and "no answer within 8 s" in msg and "never a partial machine" in msg
        named = msg.split("never a partial machine): ", 1)[1]
        assert all(ip not in named for ip in ("127.0.0.1,", "127.0.0.2", "127.0.0.3"))  # only the silent node
    finally:
        cluster.remove("d")


def test_a_node_whose_gpus_cannot_be_read_fails_the_whole_probe(cluster) -> None:
    cluster.add(NodeSpec("e", "127.0.0.5", env={"GPULAYOUT_TEST_NVML_INIT_ERROR": "12"}))  # LIBRARY_NOT_FOUND
    try:
        r = cli("check", "--machine", f"ray:{cluster.address}", str(REPO / "examples" / "01-two-l4-pcie"
                                                                    / "gpulayout.yaml"))
        assert r.returncode == 3, r.stdout + r.stderr
        line = r.stderr.strip()
        assert "\n" not in line and "127.0.0.5" in line and "Ray offers 2 GPU(s) there but the probe saw none" in line
    finally:
        cluster.remove("e")


def test_no_cluster_at_the_address_is_exit_3_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]            # a port nobody listens on once the socket closes
    r = cli("snapshot", "--ray", f"127.0.0.1:{port}")
    assert r.returncode == 3 and f"no Ray cluster answers at 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr


def test_without_ray_the_error_names_the_extra(tmp_path) -> None:
    block = ("import sys, importlib.abc\n"
             "class B(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'ray' or name.startswith('ray.'):\n"
             "            raise ImportError('No module named ray')\n"
             "sys.meta_path.insert(0, B())\n"
             "from pytest_gpulayout.cli import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", block, "snapshot", "--ray"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "pip install 'pytest-gpulayout[ray]'" in r.stderr


def test_an_engine_per_node_is_started_and_every_process_of_it_stopped(cluster, tmp_path) -> None:
    """SGLang's way across nodes: one server per node through an actor pinned there. The stand-in engine
    forks a child in its group and one that leaves it with setsid(), and all of them ignore SIGTERM."""
    import time

    import ray

    from pytest_gpulayout.deployment import Deployment, Launch
    from pytest_gpulayout.engines.sglang.engine import SGLANG
    from pytest_gpulayout.launch.multinode import node_argvs, start_on_nodes
    from pytest_gpulayout.launch.proctree import pid_alive

    fake = REPO / "tests" / "fakes" / "fake_engine.py"
    log = REPO / "tests" / "data" / "logs" / "nccl" / "socket-two-nodes.log"
    dep = Deployment(name="s", model=str(TINY), engine="sglang", pipeline_parallel_size=2,
                     launch=Launch(command=(sys.executable, str(fake), "--fake-log", str(log), "--fake-mode",
                                            "replay,fork,ignore-term")))
    argvs = node_argvs(SGLANG.launch, dep, str(TINY), 30000, head_ip="127.0.0.1", dist_port=5000, nnodes=2)
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        ids = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
        plan = []
        for k, (ip, argv) in enumerate(zip(("127.0.0.1", "127.0.0.2"), argvs, strict=True)):
            pid_dir = tmp_path / f"pids{k}"
            pid_dir.mkdir()
            plan.append((ids[ip], [*argv, "--fake-pid-dir", str(pid_dir)], {"FAKE_ENGINE_SCALE": "0.001"},
                         str(tmp_path / f"node{k}.log")))
        launch = start_on_nodes(ray, plan)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pids = [p for k in range(2) for p in (tmp_path / f"pids{k}").glob("*.pid")]
                if len(pids) >= 8:      # main, child, escaped, escaped-grandchild on each node
                    break
                time.sleep(0.2)
            running = launch.alive()
            assert all(len(v) >= 4 for v in running.values()), running
            logs = launch.log_lines()
            assert all(any("via NET/Socket" in ln for ln in lines) for lines in logs.values())
        finally:
            left = launch.stop(grace_s=2.0)
        assert left == {ids["127.0.0.1"]: [], ids["127.0.0.2"]: []}
        recorded = [int(p.read_text().split()[0]) for k in range(2) for p in (tmp_path / f"pids{k}").glob("*.pid")]
        assert len(recorded) == 8 and not [p for p in recorded if pid_alive(p)]
        argv0 = plan[1][1]
        assert argv0[argv0.index("--node-rank") + 1] == "1"
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------------------------
# The startup check across the cluster's hosts (launch/across.py), with the fake engine
# ------------------------------------------------------------------------------------------------
FAKE = REPO / "tests" / "fakes" / "fake_engine.py"
MULTI = REPO / "tests" / "data" / "logs" / "multinode"


def node_processes(address: str, needle: str) -> dict[str, set[tuple[int, int, str]]]:
    """Each node's processes of one test, listed by a task pinned to that node: (pid, start, command line)
    of every process whose command line or environment names ``needle`` (the test's own folder), and the
    fake engine's Ray workers. Other tests on this machine run the fake engine too; they are not ours."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def listing(needle: str) -> set[tuple[int, int, str]]:
        from pytest_gpulayout.launch.proctree import process_table

        out = set()
        for pid, st in process_table().items():
            if st.state in ("Z", "X"):
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if needle in cmd or needle in env or "FakeEngineWorker" in cmd:
                out.add((pid, st.start, cmd))
        return out

    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        task = ray.remote(num_cpus=0)(listing)
        refs = {n["NodeManagerAddress"]: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote(needle) for n in ray.nodes() if n["Alive"]}
        return {ip: ray.get(ref, timeout=60) for ip, ref in refs.items()}
    finally:
        ray.shutdown()


def recorded(pid_dir: Path, role: str) -> list[int]:
    return [int(p.read_text().split()[0]) for p in pid_dir.glob(f"{role}-[0-9]*.pid")]


def fake_dep(name: str, engine: str, models, ids: list[str], tp: int, pp: int, log: str, mode: str,
             pid_dir: Path):
    from pytest_gpulayout.deployment import Deployment, Launch

    return Deployment(name=name, model=models["llama-a"], engine=engine, tensor_parallel_size=tp,
                      pipeline_parallel_size=pp, gpus=tuple(ids), max_model_len=4096,
                      launch=Launch(command=(sys.executable, str(FAKE)), timeout_s=120,
                                    env={"FAKE_ENGINE_LOG": str(MULTI / log), "FAKE_ENGINE_MODE": mode,
                                         "FAKE_ENGINE_PID_DIR": str(pid_dir), "FAKE_ENGINE_SCALE": "0.001"}))


@pytest.fixture(scope="module")
def ray_machine(cluster):
    return load_machine(f"ray:{cluster.address}", engines=ENGINES.values())


def _launch_across(cluster, ray_machine, dep, tmp_path):
    from pytest_gpulayout.launch.proctree import pid_alive
    from pytest_gpulayout.launch.startup import launch_deployment

    before = node_processes(cluster.address, str(tmp_path))
    assert before == {ip: set() for ip in ("127.0.0.1", "127.0.0.2", "127.0.0.3")}
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch,
                               machine=ray_machine, log_dir=tmp_path / "logs", engine_version="0.32.0",
                               grace_s=1.0)
    after = node_processes(cluster.address, str(tmp_path))
    assert after == before, "engine processes left on a node after the stop"
    return report, pid_alive


def test_vllm_across_hosts_runs_on_the_head_and_no_worker_is_left_on_any_node(cluster, models, ray_machine,
                                                                              tmp_path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    dep = fake_dep("v", "vllm", models, gpus("a", 0, 1) + gpus("b", 0, 1), 2, 2, "vllm-ray-ib.log",
                   "replay,ray-workers", pid_dir)
    report, pid_alive = _launch_across(cluster, ray_machine, dep, tmp_path)
    f = report.finding
    assert f.status.value == "pass", f.message
    assert report.kv_tokens == 619_202 and "across 2 hosts" in f.message and "InfiniBand" in f.message
    d = f.data
    assert d["nodes"] == [A, B] and d["transport"]["cross_host"] == "ib" and d["transport"]["gdrdma"] is True
    assert d["node_leftovers"] == {}
    argv = d["node_commands"][A]
    assert argv[-2:] == ["--distributed-executor-backend", "ray"] and "--pipeline-parallel-size" in argv
    seen = json.loads((pid_dir / "argv.json").read_text())
    marker = d["launch_marker"].split("=", 1)[1]
    assert seen["env"]["RAY_ADDRESS"] == cluster.address and seen["env"]["NCCL_DEBUG"] == "INFO"
    assert seen["env"]["GPULAYOUT_LAUNCH_ID"] == marker
    workers = recorded(pid_dir, "ray-worker")
    assert len(workers) == 3                     # one Ray actor on each node, as vLLM's workers
    assert not [p for p in workers + recorded(pid_dir, "main") if pid_alive(p)]


def test_vllm_workers_that_outlive_the_head_are_found_by_the_marker_killed_and_reported(cluster, models, ray_machine,
                                                                                        tmp_path, monkeypatch) -> None:
    from pytest_gpulayout.launch import across

    # detached actors never exit by themselves: each node's sweep waits its whole WORKER_EXIT_S (10 s)
    # before it kills them. 3 s is as long a wait to outlive (non-detached workers exit in 1-3 s).
    monkeypatch.setattr(across, "WORKER_EXIT_S", 3.0)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    dep = fake_dep("leaky", "vllm", models, gpus("a", 0) + gpus("b", 0), 1, 2, "vllm-ray-ib.log",
                   "replay,ray-detached", pid_dir)
    report, pid_alive = _launch_across(cluster, ray_machine, dep, tmp_path)
    f = report.finding
    workers = recorded(pid_dir, "ray-worker")
    assert len(workers) == 3 and not [p for p in workers if pid_alive(p)]
    assert f.status.value == "warn", f.message
    for host in (A, B, C):             # each node's sweep kills its own worker, not its neighbours'
        assert f"1 process(es) of this launch were still running on {host} after the stop" in f.message
    assert "detached Ray actor" in f.message
    left = f.data["node_leftovers"]
    assert set(left) == {A, B, C} and sorted(p for pids in left.values() for p in pids) == sorted(workers)


def test_sglang_starts_one_server_per_node_reads_rank0s_pool_and_warns_on_sockets(cluster, models, ray_machine,
                                                                                  tmp_path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    dep = fake_dep("s", "sglang", models, gpus("a", 0) + gpus("b", 1), 1, 2, "sglang-socket.log",
                   "replay,fork,rendezvous", pid_dir)  # each server forks a child, and one that leaves its session
    report, pid_alive = _launch_across(cluster, ray_machine, dep, tmp_path)
    f = report.finding
    assert f.status.value == "warn", f.message
    assert report.kv_tokens == 367_404
    assert "NCCL uses TCP sockets between the hosts" in f.message
    assert "NCCL_IB_HCA" in f.message and "NCCL_SOCKET_IFNAME" in f.message
    d = f.data
    assert d["nodes"] == [A, B] and d["transport"]["cross_host"] == "socket" and d["node_leftovers"] == {}
    runs = [json.loads(p.read_text()) for p in pid_dir.glob("argv-*.json")]
    by_rank = {r["argv"][r["argv"].index("--node-rank") + 1]: r for r in runs}
    assert set(by_rank) == {"0", "1"} and len(runs) == 2
    addr = {r["argv"][r["argv"].index("--dist-init-addr") + 1] for r in runs}
    assert len(addr) == 1 and addr.pop().startswith("127.0.0.1:")      # rank 0's node
    assert all(r["argv"][r["argv"].index("--nnodes") + 1] == "2" for r in runs)
    assert by_rank["0"]["env"]["CUDA_VISIBLE_DEVICES"] == "0" and by_rank["1"]["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert all(r["env"]["NCCL_DEBUG"] == "INFO" for r in runs)
    assert d["node_commands"][B] == [str(a) for a in [sys.executable, str(FAKE)]] + by_rank["1"]["argv"]
    pids = [p for role in ("main", "child", "escaped", "escaped-grandchild") for p in recorded(pid_dir, role)]
    assert len(pids) == 8 and not [p for p in pids if pid_alive(p)]
