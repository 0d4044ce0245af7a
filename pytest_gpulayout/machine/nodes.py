"""What each host of a multi-node machine reports beyond its GPUs: software, network, model files.

A multi-node start fails for reasons no GPU fact shows: another vLLM or torch on one node (the engine
hangs or refuses at join), the model missing or different on one node, NCCL falling back to sockets
because no InfiniBand port is up, a 64 MiB ``/dev/shm`` in a container. The Ray machine source
(``machine/ray.py``) gathers these facts on every node; snapshots keep them in a ``nodes:`` section
keyed by host, so the ``cluster`` check replays anywhere. Plain frozen data, read strictly (one line
naming the file and the key for anything wrong), like the rest of the snapshot.

Snapshot form (all keys but the host key optional; ``null`` means not known)::

    nodes:
      gpu-a:
        hostname: gpu-a
        node_id: 5f3c...           # Ray node id
        ip: 10.0.0.11
        head: true                 # the node the driver (and vLLM's head) runs on
        ray_gpus: 8                # GPUs Ray offers there (vLLM's Ray workers get only these)
        driver: "550.90.07"
        cuda: "12.4"               # the CUDA version the driver supports
        python: "3.11.7"
        packages: {torch: "2.5.1", vllm: "0.6.6", sglang: null, ray: "2.40.0", nvidia-nccl-cu12: "2.21.5"}
        infiniband: [{device: mlx5_0, port: 1, state: ACTIVE, rate: "200 Gb/sec (4X HDR)", link_layer: InfiniBand}]
        infiniband_sysfs: true     # /sys/class/infiniband exists (null: not recorded)
        env: {NCCL_SOCKET_IFNAME: eth0}
        shm_mib: 65536             # size of /dev/shm
        models: {/models/llama: {exists: true, config_sha256: "...", index_sha256: null}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.suggest import close_matches

#: The NCCL wheels (``nvidia-nccl-cu*``), matched by prefix among each node's packages.
NCCL_PREFIX = "nvidia-nccl-cu"

#: The environment the engines and NCCL read to pick interfaces and transports on each node.
NCCL_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "GLOO_SOCKET_IFNAME", "VLLM_HOST_IP",
            "NCCL_DEBUG")

NODE_KEYS = ("hostname", "node_id", "ip", "head", "ray_gpus", "driver", "cuda", "python", "packages",
             "infiniband", "infiniband_sysfs", "env", "shm_mib", "models")
IB_KEYS = ("device", "port", "state", "rate", "link_layer")
MODEL_KEYS = ("exists", "config_sha256", "index_sha256")


@dataclass(frozen=True)
class IbPort:
    """One InfiniBand (or RoCE) port as ``/sys/class/infiniband/<device>/ports/<n>`` describes it."""

    device: str
    port: int
    state: str                  # ACTIVE, DOWN, INIT, ARMED (the word after "4: " in the state file)
    rate: str | None = None     # "200 Gb/sec (4X HDR)"
    link_layer: str | None = None  # InfiniBand | Ethernet (RoCE)

    @property
    def active(self) -> bool:
        return self.state.upper() == "ACTIVE"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "port": self.port, "state": self.state, "rate": self.rate,
                "link_layer": self.link_layer}


@dataclass(frozen=True)
class ModelFiles:
    """A model directory the manifest names, as one node sees it."""

    exists: bool
    config_sha256: str | None = None
    index_sha256: str | None = None   # model.safetensors.index.json, when the directory has one

    def to_json(self) -> dict[str, Any]:
        return {"exists": self.exists, "config_sha256": self.config_sha256, "index_sha256": self.index_sha256}


def model_dir_key(model_source: str) -> str | None:
    """The key a model's files are kept under in ``NodeFacts.models``: the directory of the config.json
    the spec was read from (``ModelSpec.source``); ``None`` for catalog models, which have no files."""
    if not model_source or model_source.startswith("catalog:"):
        return None
    from pathlib import PurePath

    return str(PurePath(model_source).parent)


def _ro(d: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class NodeFacts:
    """One host's software, network and model-file facts (its GPUs are in ``Machine.gpus`` with ``host``)."""

    host: str
    hostname: str | None = None
    node_id: str | None = None
    ip: str | None = None
    head: bool = False
    ray_gpus: int | None = None
    driver: str | None = None
    cuda: str | None = None
    python: str | None = None
    packages: Mapping[str, str | None] = field(default_factory=_ro)
    infiniband: tuple[IbPort, ...] = ()
    #: whether ``/sys/class/infiniband`` exists on the host (SGLang's IB device check tells a missing directory from
    #: an empty one); None: not said (a snapshot written before the probe recorded it)
    infiniband_sysfs: bool | None = None
    env: Mapping[str, str] = field(default_factory=_ro)
    shm_mib: int | None = None
    models: Mapping[str, ModelFiles] = field(default_factory=_ro)

    def __post_init__(self) -> None:
        for name in ("packages", "env", "models"):
            object.__setattr__(self, name, _ro(getattr(self, name)))

    def version(self, what: str) -> str | None:
        """``python`` or a package's version on this node (None: not installed)."""
        return self.python if what == "python" else self.packages.get(what)

    @property
    def nccl(self) -> str | None:
        """The NCCL wheels on this node, ``nvidia-nccl-cu12 2.21.5`` (several joined), or None."""
        found = sorted((k, v) for k, v in self.packages.items() if k.startswith(NCCL_PREFIX) and v)
        return ", ".join(f"{k} {v}" for k, v in found) or None

    @property
    def active_ib_ports(self) -> tuple[IbPort, ...]:
        return tuple(p for p in self.infiniband if p.active)

    @property
    def label(self) -> str:
        """How messages name the node: its host key, with the IP where it is known."""
        return f"{self.host} ({self.ip})" if self.ip and self.ip != self.host else self.host

    def to_json(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname, "node_id": self.node_id, "ip": self.ip, "head": self.head,
            "ray_gpus": self.ray_gpus,
            "driver": self.driver, "cuda": self.cuda, "python": self.python,
            "packages": dict(sorted(self.packages.items())),
            "infiniband": [p.to_json() for p in self.infiniband], "infiniband_sysfs": self.infiniband_sysfs,
            "env": dict(sorted(self.env.items())), "shm_mib": self.shm_mib,
            "models": {k: m.to_json() for k, m in sorted(self.models.items())},
        }


# -- reading (strict, like the rest of the snapshot) --------------------------------------------


def _kind(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "a mapping" if isinstance(v, Mapping) else type(v).__name__


def _keys(d: Mapping[Any, Any], allowed: tuple[str, ...], where: str, key: str) -> None:
    for k in d:
        if not isinstance(k, str) or k not in allowed:
            close = close_matches(str(k), allowed)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"unknown key {str(k)!r}{hint}; expected one of: {', '.join(allowed)}",
                             where=where, key=f"{key}.{k}")


def _opt_str(v: object, where: str, key: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        hint = "; quote it in YAML" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
        raise InputError(f"must be a string or null, not {_kind(v)} ({v!r}){hint}", where=where, key=key)
    return v


def _mapping(v: object, where: str, key: str) -> Mapping[Any, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise InputError(f"must be a mapping, not {_kind(v)}", where=where, key=key)
    return v


def _ib_port(d: object, where: str, key: str) -> IbPort:
    if not isinstance(d, Mapping):
        raise InputError(f"must be a mapping with {', '.join(IB_KEYS)}, not {_kind(d)}", where=where, key=key)
    _keys(d, IB_KEYS, where, key)
    for req in ("device", "port", "state"):
        if req not in d:
            raise InputError(f"missing required key {req!r}", where=where, key=key)
    port = d["port"]
    if isinstance(port, bool) or not isinstance(port, int) or port < 0:
        raise InputError(f"must be a port number, not {_kind(port)} ({port!r})", where=where, key=f"{key}.port")
    device = _opt_str(d["device"], where, f"{key}.device")
    state = _opt_str(d["state"], where, f"{key}.state")
    if not device or not state:
        raise InputError("device and state must be non-empty strings", where=where, key=key)
    return IbPort(device=device, port=port, state=state, rate=_opt_str(d.get("rate"), where, f"{key}.rate"),
                  link_layer=_opt_str(d.get("link_layer"), where, f"{key}.link_layer"))


def _model_files(d: object, where: str, key: str) -> ModelFiles:
    if not isinstance(d, Mapping):
        raise InputError(f"must be a mapping with {', '.join(MODEL_KEYS)}, not {_kind(d)}", where=where, key=key)
    _keys(d, MODEL_KEYS, where, key)
    exists = d.get("exists")
    if not isinstance(exists, bool):
        raise InputError(f"must be true or false, not {_kind(exists)}", where=where, key=f"{key}.exists")
    return ModelFiles(exists=exists, config_sha256=_opt_str(d.get("config_sha256"), where, f"{key}.config_sha256"),
                      index_sha256=_opt_str(d.get("index_sha256"), where, f"{key}.index_sha256"))


def node_from_dict(host: str, d: object, where: str) -> NodeFacts:
    key = f"nodes.{host}"
    if not isinstance(d, Mapping):
        raise InputError(f"must be a mapping ({', '.join(NODE_KEYS[:4])}, ...), not {_kind(d)}", where=where, key=key)
    _keys(d, NODE_KEYS, where, key)
    head = d.get("head", False)
    if not isinstance(head, bool):
        raise InputError(f"must be true or false, not {_kind(head)}", where=where, key=f"{key}.head")
    packages: dict[str, str | None] = {}
    for name, version in _mapping(d.get("packages"), where, f"{key}.packages").items():
        packages[str(name)] = _opt_str(version, where, f"{key}.packages.{name}")
    env: dict[str, str] = {}
    for name, value in _mapping(d.get("env"), where, f"{key}.env").items():
        text = _opt_str(value, where, f"{key}.env.{name}")
        if text is not None:
            env[str(name)] = text
    ib_raw = d.get("infiniband") or []
    if not isinstance(ib_raw, list):
        raise InputError(f"must be a list of ports, not {_kind(ib_raw)}", where=where, key=f"{key}.infiniband")
    sysfs = d.get("infiniband_sysfs")
    if sysfs is not None and not isinstance(sysfs, bool):
        raise InputError(f"must be true, false or null, not {_kind(sysfs)}", where=where, key=f"{key}.infiniband_sysfs")
    ray_gpus = d.get("ray_gpus")
    if ray_gpus is not None and (isinstance(ray_gpus, bool) or not isinstance(ray_gpus, int) or ray_gpus < 0):
        raise InputError(f"must be a whole number or null, not {_kind(ray_gpus)} ({ray_gpus!r})", where=where,
                         key=f"{key}.ray_gpus")
    shm = d.get("shm_mib")
    if shm is not None and (isinstance(shm, bool) or not isinstance(shm, int) or shm < 0):
        raise InputError(f"must be a whole number of MiB or null, not {_kind(shm)} ({shm!r})", where=where,
                         key=f"{key}.shm_mib")
    models = {str(p): _model_files(m, where, f"{key}.models.{p}")
              for p, m in _mapping(d.get("models"), where, f"{key}.models").items()}
    return NodeFacts(
        host=host,
        hostname=_opt_str(d.get("hostname"), where, f"{key}.hostname"),
        node_id=_opt_str(d.get("node_id"), where, f"{key}.node_id"),
        ip=_opt_str(d.get("ip"), where, f"{key}.ip"),
        head=head,
        ray_gpus=ray_gpus,
        driver=_opt_str(d.get("driver"), where, f"{key}.driver"),
        cuda=_opt_str(d.get("cuda"), where, f"{key}.cuda"),
        python=_opt_str(d.get("python"), where, f"{key}.python"),
        packages=packages,
        infiniband=tuple(_ib_port(p, where, f"{key}.infiniband[{k}]") for k, p in enumerate(ib_raw)),
        infiniband_sysfs=sysfs,
        env=env,
        shm_mib=shm,
        models=models,
    )


def nodes_from_dict(raw: object, where: str) -> dict[str, NodeFacts]:
    """The ``nodes:`` section of a snapshot (absent or null: no node facts)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"must be a mapping from host name to its facts, not {_kind(raw)}", where=where,
                         key="nodes")
    out: dict[str, NodeFacts] = {}
    for host, facts in raw.items():
        if not isinstance(host, str) or not host:
            raise InputError(f"host names are non-empty strings, not {host!r}", where=where, key="nodes")
        out[host] = node_from_dict(host, facts, where)
    return out
