"""Machine snapshots: the probe's result as a YAML/JSON file that can be replayed anywhere.

A snapshot is how a CPU-only CI job, a laptop or a bug report gets the exact machine a deploy will
meet, so reading one is strict: a typo in a key, a string where a number belongs, a link naming a
GPU that is not there, all stop with one line naming the file and the key (``gpus[1].memory_free_mib``)
instead of quietly producing a different machine. Nothing missing is filled in by guessing: a pair
with no link stays unknown, memory given as ``null`` stays unknown.

Format (``version: 1``), the same as ``gpulayout snapshot`` writes::

    version: 1
    host: gpu-node-17
    driver: "580.95.05"
    gpus:
      - {index: 0, uuid: GPU-..., name: NVIDIA L4, pci_bus_id: "00000000:01:00.0",
         memory_total_mib: 23034, memory_free_mib: 22478, memory_reserved_mib: 462,
         numa_node: 0, mig: false, processes: [{pid: 4242, name: python3, used_mib: 3900}]}
    links: {"0-1": PHB}

``compute_capability`` (optional, ``"9.0"``) is the GPU's CUDA compute capability as NVML reports it;
files without it (older snapshots) get it from the GPU's name (``machine/capability.py``) and a note
saying so, or leave it unknown for a name the table does not know.

``memory_reserved_mib`` (optional) is what the driver keeps for itself, from NVML's v2 memory struct:
CUDA's total, which vLLM multiplies by its fraction, is NVML's total less it. Where it is absent a
typical 450 MiB is assumed and the finding says so.

Multi-host snapshots give a GPU its own ``host``; a pair on two different hosts that the file does
not mention is ``NET`` (a fact, not a guess: no PCIe path crosses hosts, and NET is the slowest kind,
so filling it can never make a layout pass that should not). A ``nodes:`` section keyed by host holds
each node's software, network and model-file facts (``machine/nodes.py``, written by
``gpulayout snapshot --ray``); files without it stay valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import load_json, read_text
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.inputs.yaml import check_shape
from pytest_gpulayout.machine.capability import fill_from_names, format_capability, parse_capability
from pytest_gpulayout.machine.facts import PCIE_KINDS, Gpu, GpuProcess, Machine, normalize_link
from pytest_gpulayout.machine.nodes import nodes_from_dict

SNAPSHOT_VERSION = 1

TOP_KEYS = ("version", "host", "driver", "gpus", "links", "notes", "nodes")
GPU_KEYS = (
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "memory_total_mib",
    "memory_free_mib",
    "memory_reserved_mib",
    "numa_node",
    "compute_capability",
    "mig",
    "processes",
    "host",
)
PROCESS_KEYS = ("pid", "name", "used_mib")

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")

_LINK_KEY_RE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


# -- writing -----------------------------------------------------------------------------------


def machine_to_dict(m: Machine) -> dict[str, Any]:
    """The snapshot structure of a machine (plain dicts/lists, ready for YAML or JSON).

    Keys come out in the documented order so diffs between two snapshots of a host read well.
    Links are listed for every pair the machine knows, keyed ``"i-j"`` with ``i < j``.
    """
    gpus: list[dict[str, Any]] = []
    for g in m.gpus:
        d: dict[str, Any] = {
            "index": g.index,
            "uuid": g.uuid,
            "name": g.name,
            **({"compute_capability": format_capability(g.compute_capability)}
               if g.compute_capability is not None else {}),
            "pci_bus_id": g.pci_bus_id,
            "memory_total_mib": g.memory_total_mib,
            "memory_free_mib": g.memory_free_mib,
            **({"memory_reserved_mib": g.memory_reserved_mib} if g.memory_reserved_mib is not None else {}),
            "numa_node": g.numa_node,
            "mig": g.mig,
            "processes": [{"pid": p.pid, "name": p.name, "used_mib": p.used_mib} for p in g.processes],
        }
        if g.host is not None:
            d["host"] = g.host
        gpus.append(d)
    out: dict[str, Any] = {
        "version": SNAPSHOT_VERSION,
        "host": m.host,
        "driver": m.driver,
        "gpus": gpus,
        "links": {f"{i}-{j}": kind for (i, j), kind in sorted(m.links.items())},
    }
    if m.notes:
        out["notes"] = list(m.notes)
    if m.nodes:  # multi-node machines only: files without it stay what they were
        out["nodes"] = {host: n.to_json() for host, n in m.nodes.items()}
    return out


def dump_snapshot(machine: Machine, fmt: str = "yaml") -> str:
    """Text of a snapshot file: ``fmt`` is ``"yaml"`` (with a header comment) or ``"json"``."""
    data = machine_to_dict(machine)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt != "yaml":
        raise ValueError(f"unknown snapshot format {fmt!r} (yaml or json)")
    import yaml  # lazy: the plugin must not pay for YAML at start-up

    header = (
        "# gpulayout machine snapshot (replay with --machine FILE / --gpulayout-machine FILE)\n"
        f"# source: {machine.source}; memory in MiB as NVML reports it; links in nvidia-smi topo -m terms\n"
    )
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=110)
    return header + body


# -- reading -----------------------------------------------------------------------------------


def _did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = close_matches(word, choices)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_keys(d: Mapping[Any, Any], allowed: tuple[str, ...], where: str, prefix: str) -> None:
    for key in d:
        if not isinstance(key, str) or key not in allowed:
            hint = _did_you_mean(str(key), allowed)
            raise InputError(
                f"unknown key {str(key)!r}{hint}; expected one of: {', '.join(allowed)}",
                where=where,
                key=f"{prefix}{key}" if prefix else str(key),
            )


def _type_name(v: object) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
        type(v), "a mapping" if isinstance(v, Mapping) else type(v).__name__
    )


def _int(v: object, where: str, key: str, *, minimum: int | None = 0, nullable: bool = False) -> int | None:
    """A whole number (booleans are not numbers here, whatever YAML thinks)."""
    if v is None and nullable:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        want = "a whole number" + (" or null" if nullable else "")
        raise InputError(f"must be {want}, not {_type_name(v)} ({v!r})", where=where, key=key)
    if minimum is not None and v < minimum:
        raise InputError(f"must be >= {minimum}, not {v}", where=where, key=key)
    return v


def _str(v: object, where: str, key: str, *, nullable: bool = False) -> str | None:
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        hint = "; quote it in YAML" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
        want = "a string" + (" or null" if nullable else "")
        raise InputError(f"must be {want}, not {_type_name(v)} ({v!r}){hint}", where=where, key=key)
    return v


def _process(d: object, where: str, key: str) -> GpuProcess:
    if not isinstance(d, Mapping):
        raise InputError(
            f"must be a mapping with pid, name, used_mib, not {_type_name(d)}", where=where, key=key
        )
    _check_keys(d, PROCESS_KEYS, where, key + ".")
    if "pid" not in d:
        raise InputError("missing required key 'pid'", where=where, key=key)
    pid = _int(d["pid"], where, f"{key}.pid", minimum=0)
    name = _str(d.get("name", ""), where, f"{key}.name", nullable=True) or ""
    used = _int(d.get("used_mib"), where, f"{key}.used_mib", nullable=True)
    assert pid is not None
    return GpuProcess(pid=pid, name=name, used_mib=used)


def _gpu(d: object, pos: int, where: str) -> Gpu:
    key = f"gpus[{pos}]"
    if not isinstance(d, Mapping):
        raise InputError(
            f"must be a mapping (index, name, memory_total_mib, ...), not {_type_name(d)}",
            where=where,
            key=key,
        )
    _check_keys(d, GPU_KEYS, where, key + ".")
    if "index" not in d:
        raise InputError(
            "missing required key 'index' (the CUDA index the engine will see)", where=where, key=key
        )
    index = _int(d["index"], where, f"{key}.index")
    assert index is not None
    total = _int(d.get("memory_total_mib"), where, f"{key}.memory_total_mib", minimum=1, nullable=True)
    free = _int(d.get("memory_free_mib"), where, f"{key}.memory_free_mib", nullable=True)
    if total is not None and free is not None and free > total:
        raise InputError(
            f"free memory {free} MiB is more than the total {total} MiB",
            where=where,
            key=f"{key}.memory_free_mib",
        )
    reserved = _int(d.get("memory_reserved_mib"), where, f"{key}.memory_reserved_mib", nullable=True)
    if total is not None and reserved is not None and (free or 0) + reserved > total:
        raise InputError(
            f"free {free or 0} MiB plus reserved {reserved} MiB is more than the total {total} MiB",
            where=where,
            key=f"{key}.memory_reserved_mib",
        )
    mig = d.get("mig", False)
    if not isinstance(mig, bool):
        raise InputError(
            f"must be true or false, not {_type_name(mig)} ({mig!r})", where=where, key=f"{key}.mig"
        )
    procs_raw = d.get("processes")
    if procs_raw is None:
        procs_raw = []
    if not isinstance(procs_raw, list):
        raise InputError(f"must be a list, not {_type_name(procs_raw)}", where=where, key=f"{key}.processes")
    processes = tuple(_process(p, where, f"{key}.processes[{k}]") for k, p in enumerate(procs_raw))
    cc_raw = d.get("compute_capability")
    cc = parse_capability(cc_raw)
    if cc_raw is not None and cc is None:
        raise InputError(f"must be the CUDA compute capability as \"<major>.<minor>\" (e.g. \"9.0\"), not {cc_raw!r}",
                         where=where, key=f"{key}.compute_capability")
    return Gpu(
        compute_capability=cc,
        index=index,
        uuid=_str(d.get("uuid", ""), where, f"{key}.uuid", nullable=True) or "",
        name=_str(d.get("name", ""), where, f"{key}.name", nullable=True) or "",
        pci_bus_id=_str(d.get("pci_bus_id"), where, f"{key}.pci_bus_id", nullable=True),
        memory_total_mib=total,
        memory_free_mib=free,
        memory_reserved_mib=reserved,
        numa_node=_int(d.get("numa_node"), where, f"{key}.numa_node", nullable=True),
        mig=mig,
        processes=processes,
        host=_str(d.get("host"), where, f"{key}.host", nullable=True),
    )


def _links(
    raw: object, gpus: dict[int, Gpu], default_host: str | None, where: str, notes: tuple[str, ...] = ()
) -> dict[tuple[int, int], str]:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InputError(
            f'must be a mapping like {{"0-1": PHB}}, not {_type_name(raw)}', where=where, key="links"
        )
    links: dict[tuple[int, int], str] = {}
    seen_as: dict[tuple[int, int], str] = {}
    for k, v in raw.items():
        key = f"links.{k}"
        m = _LINK_KEY_RE.match(str(k))
        if not m:
            raise InputError(
                f'link keys are "i-j" with two GPU indices (e.g. "0-1"), not {str(k)!r}', where=where, key=key
            )
        i, j = int(m.group(1)), int(m.group(2))
        if i == j:
            raise InputError(
                f"a link joins two different GPUs; {k!r} names GPU{i} twice", where=where, key=key
            )
        for n in (i, j):
            if n not in gpus:
                known = ", ".join(str(x) for x in sorted(gpus))
                raise InputError(f"GPU{n} is not in gpus (indices: {known})", where=where, key=key)
        if not isinstance(v, str):
            raise InputError(
                f"must be a link kind (NV<n>, PIX, PXB, PHB, NODE, SYS, NET), not {_type_name(v)}",
                where=where,
                key=key,
            )
        try:
            kind = normalize_link(v)  # refuses NV0 (and NV00): zero NVLinks is no NVLink
        except ValueError as err:
            raise InputError(str(err), where=where, key=key) from None
        pair = (min(i, j), max(i, j))
        if pair in links:
            raise InputError(
                f"the pair {pair[0]}-{pair[1]} is given twice ({seen_as[pair]!r} and {str(k)!r})",
                where=where,
                key=key,
            )
        host_i = gpus[i].host or default_host
        host_j = gpus[j].host or default_host
        same_host = host_i == host_j
        if not same_host and kind in PCIE_KINDS:
            raise InputError(
                f"GPU{i} ({host_i}) and GPU{j} ({host_j}) are on different hosts, so they cannot "
                f"be joined by PCIe ({kind}); use NET (or NV<n> for multi-node NVLink)",
                where=where,
                key=key,
            )
        if same_host and kind == "NET":
            raise InputError(
                f"NET is for GPUs on different hosts, and GPU{i} and GPU{j} are both on "
                f"{host_i or 'the same host'}",
                where=where,
                key=key,
            )
        links[pair] = kind
        seen_as[pair] = str(k)
    # Pairs across hosts the file left out: NET, the only thing they can be short of multi-node NVLink.
    idx = sorted(gpus)
    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            i, j = idx[a], idx[b]
            if (i, j) not in links and (gpus[i].host or default_host) != (gpus[j].host or default_host):
                links[(i, j)] = "NET"
    _refuse_missing_pairs(links, idx, notes, where)
    return links


def _refuse_missing_pairs(links: Mapping[tuple[int, int], str], idx: list[int], notes: tuple[str, ...],
                          where: str) -> None:
    """A pair on one host with no link is a cut-off or hand-trimmed file, like a cut-off topo paste:
    refused, naming the pairs. Only the probe's own word keeps a pair unknown: its note that NVML gave
    no topology for the pair, or that the two are MIG instances of one GPU (machine/probe.py)."""
    def explained(i: int, j: int) -> bool:
        return any(n.startswith(f"GPU{i}-GPU{j}:") or n.startswith(f"GPU{i} and GPU{j} are MIG") for n in notes)

    missing = [f"{i}-{j}" for a, i in enumerate(idx) for j in idx[a + 1:]
               if (i, j) not in links and not explained(i, j)]
    if missing:
        shown = ", ".join(missing[:30]) + (f" and {len(missing) - 30} more" if len(missing) > 30 else "")
        raise InputError(f"no link kind for the GPU pairs {shown}: every pair needs one (e.g. \"{missing[0]}\": "
                         "SYS); take the whole `gpulayout snapshot` output", where=where, key="links")


def machine_from_dict(d: object, where: str, source: str) -> Machine:
    """A Machine from the snapshot structure, checked strictly (see the module docstring).

    ``where`` names the file in error messages; ``source`` becomes ``Machine.source``.
    """
    if not isinstance(d, Mapping):
        raise InputError(
            f"a machine snapshot is a mapping with version, host, driver, gpus, links; "
            f"this file holds {_type_name(d)}",
            where=where,
        )
    _check_keys(d, TOP_KEYS, where, "")
    version = d.get("version", SNAPSHOT_VERSION)
    if isinstance(version, bool) or version != SNAPSHOT_VERSION:
        raise InputError(
            f"unsupported snapshot version {version!r} (this gpulayout reads version {SNAPSHOT_VERSION})",
            where=where,
            key="version",
        )
    host = _str(d.get("host"), where, "host", nullable=True)
    driver = _str(d.get("driver"), where, "driver", nullable=True)
    notes_raw = d.get("notes") or []
    if not isinstance(notes_raw, list) or not all(isinstance(n, str) for n in notes_raw):
        raise InputError("must be a list of strings", where=where, key="notes")
    if "gpus" not in d:
        raise InputError("missing required key 'gpus' (the list of GPUs)", where=where)
    gpus_raw = d["gpus"]
    if not isinstance(gpus_raw, list):
        raise InputError(f"must be a list of GPUs, not {_type_name(gpus_raw)}", where=where, key="gpus")
    if not gpus_raw:
        raise InputError("is empty: a machine needs at least one GPU", where=where, key="gpus")
    gpus: dict[int, Gpu] = {}
    first_pos: dict[int, int] = {}
    uuids: dict[str, int] = {}
    for pos, raw in enumerate(gpus_raw):
        g = _gpu(raw, pos, where)
        if g.index in gpus:
            raise InputError(
                f"index {g.index} appears twice (gpus[{first_pos[g.index]}] and gpus[{pos}])",
                where=where,
                key=f"gpus[{pos}].index",
            )
        if g.uuid and g.uuid in uuids:
            raise InputError(
                f"uuid {g.uuid} appears twice (gpus[{uuids[g.uuid]}] and gpus[{pos}])",
                where=where,
                key=f"gpus[{pos}].uuid",
            )
        gpus[g.index] = g
        first_pos[g.index] = pos
        if g.uuid:
            uuids[g.uuid] = pos
    expected = list(range(len(gpus)))
    if sorted(gpus) != expected:
        missing = [i for i in expected if i not in gpus]
        extra = [i for i in sorted(gpus) if i >= len(gpus)]
        raise InputError(
            f"CUDA numbers the visible GPUs 0..{len(gpus) - 1}, but the indices are "
            f"{sorted(gpus)} (missing {missing}, beyond the range {extra})",
            where=where,
            key=f"gpus[{first_pos[extra[0]]}].index" if extra else "gpus",
        )
    links = _links(d.get("links"), gpus, host, where, tuple(str(n) for n in notes_raw))

    nodes = nodes_from_dict(d.get("nodes"), where)
    filled, derived = fill_from_names(list(gpus.values()))
    if derived is not None:
        notes_raw = [*notes_raw, derived]
    return Machine(
        gpus=tuple(filled),
        links=links,
        host=host,
        driver=driver,
        source=source,
        notes=tuple(notes_raw),
        nodes=nodes,
    )


def _yaml_load(text: str, where: str) -> object:
    """``yaml.safe_load`` that refuses duplicate keys (YAML would silently keep the last one)."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise InputError(
                    f"line {key_node.start_mark.line + 1}: key {key!r} appears twice in one mapping",
                    where=where,
                )
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    check_shape(text, where)  # too deep, recursive, a billion laughs: one line before it is composed
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{line}not valid YAML: {problem}", where=where) from None


def parse_snapshot_text(text: str, where: str, fmt: str) -> object:
    """The raw structure of a snapshot file's text (``fmt`` ``"yaml"`` or ``"json"``)."""
    if fmt == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"line {err.lineno}: not valid JSON: {err.msg}", where=where) from None
        except RecursionError:
            return load_json(text, where)  # its one line for nesting past Python's reader
    return _yaml_load(text, where)


def load_snapshot(path: str | Path) -> Machine:
    """A snapshot file (``.yaml``, ``.yml`` or ``.json``) as a Machine with source ``snapshot:<path>``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SNAPSHOT_SUFFIXES:
        raise InputError(f"a snapshot file ends in {', '.join(SNAPSHOT_SUFFIXES)}", where=path)
    text = read_text(path)
    data = parse_snapshot_text(text, str(path), "json" if suffix == ".json" else "yaml")
    return machine_from_dict(data, where=str(path), source=f"snapshot:{path}")
