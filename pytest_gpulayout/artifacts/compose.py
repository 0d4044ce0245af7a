"""docker-compose files: each service whose ``entrypoint`` + ``command`` runs an engine (a string is split as
the shell would, a list taken as is; an engine image's own entry point when the service gives only flags),
with its ``environment`` (list or mapping), the GPUs its ``deploy.resources.reservations.devices`` reserve
(``count``, ``device_ids``; ``all``: every GPU of the machine), and ``/dev/shm`` (``shm_size`` or
``ipc: host``). ``${VAR:-default}`` takes the default; an unset ``${VAR}`` stays as written."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.origin import Pod

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def _services(doc: Mapping[str, object]) -> Mapping[object, object]:
    services = doc.get("services")
    return services if isinstance(services, Mapping) else {}


def is_compose(doc: object) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("services"), Mapping) and "apiVersion" not in doc


def _sub(text: str) -> str:
    return _VAR.sub(lambda m: m.group(2) if m.group(2) is not None else m.group(0), text)


def _words(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [_sub(str(v)) for v in value]
    return shlex.split(_sub(str(value)), comments=False)


def _env(value: object) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): _sub(str(v)) for k, v in value.items() if v is not None}
    out = {}
    for item in value if isinstance(value, list) else []:
        k, eq, v = str(item).partition("=")
        if eq:
            out[k] = _sub(v)
    return out


def _gpus(service: Mapping[str, Any]) -> int | None:
    devices = ((((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices"))
    total, seen = 0, False
    for d in devices or []:
        if not isinstance(d, Mapping) or "gpu" not in [str(c) for c in d.get("capabilities") or []]:
            continue
        seen = True
        if d.get("device_ids"):
            total += sum(len(str(i).split(",")) for i in d["device_ids"])
        elif str(d.get("count", "all")) == "all":
            return None  # every GPU of the machine
        else:
            total += int(d["count"])
    return total if seen else 0


def find(doc: Mapping[str, Any], where: str) -> list[tuple[Invocation, Pod]]:
    out: list[tuple[Invocation, Pod]] = []
    for name, service in (doc.get("services") or {}).items():
        if not isinstance(service, Mapping):
            continue
        argv = _words(service.get("entrypoint")) + _words(service.get("command"))
        env = _env(service.get("environment"))
        gpus = _gpus(service)
        shm = service.get("ipc") == "host" or bool(service.get("shm_size"))
        info = Pod(f"services/{name}", str(name), f"services.{name}", gpus, shm,
                   gpus_field=f"services.{name}.deploy.resources.reservations.devices",
                   shm_field=f"services.{name}.shm_size (or ipc: host)",
                   host_network=service.get("network_mode") == "host", env=MappingProxyType(env))
        out += [(i, info) for i in find_in_argv(argv, f"services/{name}", env, _sub(str(service.get("image", ""))))]
    return out


@dataclass(frozen=True)
class ComposeReader:
    kind: str = "docker-compose services"

    def read(self, artifact: Artifact) -> Read:
        docs = [d for d in artifact.mappings() if is_compose(d)]  # services: a mapping (is_compose)
        found = [f for d in docs for f in find(d, artifact.where)]
        seen = tuple(f"docker-compose services {', '.join(map(str, _services(d)))}" for d in docs)
        return Read(tuple(found), seen)


READER = ComposeReader()
