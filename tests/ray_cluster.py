"""A real local Ray cluster for the tests: several nodes on this machine, each with its own facts.

Every node is a real raylet (``ray.cluster_utils.Cluster``) bound to its own loopback address
(127.0.0.1, 127.0.0.2, ...: vLLM refuses nodes that share an IP, and the whole 127/8 is loopback),
dashboard off. Ray's servers listen on every interface unless the node's address is exactly 127.0.0.1
(``src/ray/raylet/node_manager.cc``: ``config.node_manager_address == "127.0.0.1"``), so each node's
raylet also preloads ``fakes/bind_loopback`` (compiled here with the system's C compiler), which binds
every wildcard address to that node's own (``test_ray_cluster.py`` lists the cluster's listening sockets:
all on 127.0.0.x). Each node's raylet, and so every worker it starts, gets its own environment:

* ``PYTHONPATH`` starting with ``tests/fakes/nvml_node`` (a ``pynvml`` that is the snapshot-driven fake
  NVML, so the unchanged probe code runs on every node) and a ``site`` folder of ``.dist-info``
  entries (the vllm / NCCL versions that node reports);
* ``GPULAYOUT_HOST_ROOT``: that node's root, holding ``sys/class/infiniband``, ``dev/shm`` (a 64 MiB
  tmpfs for the small-shm fault) and its copy of the model directories;
* ``GPULAYOUT_TEST_BIND_IP``, the node's address, for the bind shim, which Ray preloads into the GCS, each
  raylet and every worker: Ray sets their ``LD_PRELOAD`` itself (its jemalloc,
  ``ray/_private/services.py``), to ``RAY_JEMALLOC_LIB_PATH`` when that is set, and keeps it for the
  workers with ``RAY_LD_PRELOAD_ON_WORKERS=1``.

Teardown stops the cluster and checks that no process of it is left (raylets, GCS, workers).
Without Ray the tests skip, unless ``GPULAYOUT_REQUIRE_RAY=1`` (CI), where a missing Ray fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.launch.proctree import pid_alive, process_table
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.snapshot import dump_snapshot

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHIM = HERE / "fakes" / "nvml_node"
BIND_SHIM_SOURCE = HERE / "fakes" / "bind_loopback" / "bind_loopback.c"
#: what makes Ray preload the bind shim into its processes (set while the cluster starts, then restored)
PRELOAD_ENV = ("RAY_JEMALLOC_LIB_PATH", "RAY_LD_PRELOAD_ON_WORKERS")

#: Ray turns a loopback bootstrap address into the machine's outward IP unless told it is not a cluster
#: member; the tests keep every byte on 127.0.0.x.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def require_ray() -> Any:
    os.environ.update(LOOPBACK_ENV)  # read when Ray is imported, so before it is
    try:
        import ray
        import ray._private.ray_constants as ray_constants
    except ImportError:
        if os.environ.get("GPULAYOUT_REQUIRE_RAY") == "1":
            pytest.fail("Ray is not installed but GPULAYOUT_REQUIRE_RAY=1: run .ci/setup (installs .[ray])")
        pytest.skip("Ray is not installed (pip install -e '.[ray]')")
    ray_constants.ENABLE_RAY_CLUSTER = False  # in case another test imported Ray already
    return ray


@dataclass(frozen=True)
class NodeSpec:
    """One node of the test cluster and the facts to give it."""

    name: str                      # short name for the test's own bookkeeping (a, b, c)
    ip: str
    gpus: int = 2
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    vllm: str | None = "0.32.0"
    nccl: str | None = "2.21.5"
    ib_state: str | None = "4: ACTIVE"   # None: no InfiniBand device at all
    small_shm: bool = False
    models: Mapping[str, str] = field(default_factory=dict)  # model dir -> "copy" | "differs" (absent: missing)
    env: Mapping[str, str] = field(default_factory=dict)


def node_machine(spec: NodeSpec) -> Machine:
    gpus = tuple(Gpu(index=i, uuid=f"GPU-{spec.name}{i}000000-0000-4000-8000-00000000000{i}", name=spec.gpu_name,
                     pci_bus_id=f"00000000:{0x18 + i * 0x20:02X}:00.0", memory_total_mib=81559,
                     memory_free_mib=81000, numa_node=0) for i in range(spec.gpus))
    links = {(i, j): "NV18" for i in range(spec.gpus) for j in range(i + 1, spec.gpus)}
    return Machine(gpus=gpus, links=links, host=f"fake-{spec.name}", driver="550.90.07", source="test")


def bind_shim(folder: Path) -> Path:
    """``fakes/bind_loopback`` built into ``folder`` (``cc``); without a C compiler the Ray tests skip, or fail
    where CI sets ``GPULAYOUT_REQUIRE_RAY=1``: a cluster listening on every interface is not run."""
    out = folder / "bind_loopback.so"
    compiler = shutil.which("cc") or shutil.which("gcc")
    done = None
    if compiler is not None:
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(BIND_SHIM_SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=120)
    if done is None or done.returncode != 0 or not out.is_file():
        why = ("cannot build the loopback bind shim for the Ray test cluster: "
               + ("no C compiler (cc)" if done is None else done.stderr.strip()[-300:]))
        if os.environ.get("GPULAYOUT_REQUIRE_RAY") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return out


def _dist_info(site: Path, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _mount_small_shm(path: Path) -> bool:
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(path)], capture_output=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def build_node(base: Path, spec: NodeSpec) -> tuple[dict[str, str], list[Path]]:
    """The node's folders; returns (its raylet environment, tmpfs mounts to undo)."""
    node = base / spec.name
    site, root = node / "site", node / "root"
    site.mkdir(parents=True)
    if spec.vllm:
        _dist_info(site, "vllm", spec.vllm)
    if spec.nccl:
        _dist_info(site, "nvidia-nccl-cu12", spec.nccl)
    snap = node / "gpus.yaml"
    snap.write_text(dump_snapshot(node_machine(spec)))
    if spec.ib_state is not None:
        port = root / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(spec.ib_state + "\n")
        (port / "rate").write_text("200 Gb/sec (4X HDR)\n")
        (port / "link_layer").write_text("InfiniBand\n")
    shm = root / "dev" / "shm"
    shm.mkdir(parents=True)
    mounts: list[Path] = []
    if spec.small_shm:
        if not _mount_small_shm(shm):
            why = "cannot mount a 64 MiB tmpfs for the small /dev/shm fault (needs root)"
            if os.environ.get("GPULAYOUT_REQUIRE_RAY") == "1":
                pytest.fail(why)
            pytest.skip(why)
        mounts.append(shm)
    for model_dir, how in spec.models.items():
        target = root / Path(model_dir).relative_to("/")
        shutil.copytree(model_dir, target)
        if how == "differs":
            cfg = target / "config.json"
            cfg.write_text(cfg.read_text().replace('"rms_norm_eps": 1e-5', '"rms_norm_eps": 1e-6'))
    env = {
        "PYTHONPATH": os.pathsep.join([str(SHIM), str(site), str(REPO)]),
        "GPULAYOUT_TEST_NVML_SNAPSHOT": str(snap),
        "GPULAYOUT_HOST_ROOT": str(root),
        "GPULAYOUT_TEST_BIND_IP": spec.ip,
        **LOOPBACK_ENV,
        **spec.env,
    }
    return env, mounts


@dataclass
class TestCluster:
    cluster: Any
    address: str
    nodes: dict[str, Any]          # spec name -> ray node object
    specs: dict[str, NodeSpec]
    base: Path

    def add(self, spec: NodeSpec) -> Any:
        env, _ = build_node(self.base, spec)
        node = self.cluster.add_node(node_ip_address=spec.ip, num_cpus=1, num_gpus=spec.gpus, env_vars=env)
        self.nodes[spec.name] = node
        self.specs[spec.name] = spec
        return node

    def remove(self, name: str) -> None:
        """Stop one node; its raylet and workers must be gone."""
        node = self.nodes.pop(name)
        self.specs.pop(name)
        pids = _node_pids(node)
        self.cluster.remove_node(node)
        left = _wait_gone(pids)
        assert not left, f"node {name}'s processes are still running after remove_node: {left}"


def _node_pids(*nodes: Any) -> set[tuple[int, int]]:
    """(pid, start time) of every process the nodes started, and all their descendants (the workers)."""
    roots: set[int] = set()
    for node in nodes:
        for infos in node.all_processes.values():
            roots.update(i.process.pid for i in infos)
    table = process_table()
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for st in table.values():
            if st.ppid in found and st.pid not in found:
                found.add(st.pid)
                grew = True
    return {(p, table[p].start) for p in found if p in table}


def _wait_gone(pids: set[tuple[int, int]], timeout_s: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        table = process_table()
        alive = {(p, s) for p, s in alive if p in table and table[p].start == s and pid_alive(p)}
        if alive:
            time.sleep(0.2)
    return sorted(p for p, _ in alive)


@pytest.fixture(scope="module")
def start_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A factory: ``start_cluster([NodeSpec, ...])`` -> ``TestCluster`` (head first); torn down at module end."""
    saved = {k: os.environ.get(k) for k in (*LOOPBACK_ENV, "RAY_TMPDIR", *PRELOAD_ENV)}
    ray = require_ray()
    from ray.cluster_utils import Cluster

    made: list[tuple[TestCluster, list[Path]]] = []
    temps: list[Path] = []

    def start(specs: list[NodeSpec]) -> TestCluster:
        base = tmp_path_factory.mktemp("raycluster")
        os.environ.update({"RAY_JEMALLOC_LIB_PATH": str(bind_shim(base)), "RAY_LD_PRELOAD_ON_WORKERS": "1"})
        mounts: list[Path] = []
        head_env, m = build_node(base, specs[0])
        mounts += m
        # Ray's own session folder (logs, socket files) in a short folder of ours, removed at teardown:
        # its default /tmp/ray keeps every session's socket files (and AF_UNIX paths must stay short)
        # (RAY_TMPDIR too: Cluster writes its address file under the default folder whatever temp_dir says)
        root = Path(tempfile.mkdtemp(prefix="glray-", dir="/tmp"))
        temps.append(root)
        temp = root / "ray"
        temp.mkdir()
        os.environ["RAY_TMPDIR"] = str(root)
        cluster = Cluster(initialize_head=True, head_node_args={
            "node_ip_address": specs[0].ip, "include_dashboard": False, "num_cpus": 1, "num_gpus": specs[0].gpus,
            "env_vars": head_env, "temp_dir": str(temp)})
        tc = TestCluster(cluster, cluster.address, {specs[0].name: cluster.head_node}, {specs[0].name: specs[0]},
                         base)
        made.append((tc, mounts))
        for spec in specs[1:]:
            env, m = build_node(base, spec)
            mounts += m
            tc.nodes[spec.name] = cluster.add_node(node_ip_address=spec.ip, num_cpus=1, num_gpus=spec.gpus,
                                                   env_vars=env, temp_dir=str(temp))
            tc.specs[spec.name] = spec
        cluster.wait_for_nodes()
        return tc

    try:
        yield start
    finally:
        if ray.is_initialized():
            ray.shutdown()
        leftovers: list[str] = []
        for tc, mounts in made:
            pids = _node_pids(tc.cluster.head_node, *tc.cluster.worker_nodes)
            tc.cluster.shutdown()
            leftovers += [str(p) for p in _wait_gone(pids)]
            for m in mounts:
                subprocess.run(["umount", str(m)], capture_output=True, timeout=20)
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        assert not leftovers, f"Ray processes left running after the cluster was shut down: {leftovers}"
