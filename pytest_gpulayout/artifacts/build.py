"""An engine invocation found in an artifact as a ``Deployment``, built from what its release reads of it.

Each invocation becomes its own deployment, whatever is wrong with it: the line is read by the release its
image names (``Engine.resolve_args``: typed values by destination, ``128k`` as 131072), or, where the release
refuses it (a misspelt flag, an unknown ``$TP``), by the release's spelling table alone (``Engine.parse_args``)
for what can still be read. The words stay as the artifact wrote them (``Origin.args``): the ``config`` check
judges them with the release's own parser and says what is refused, in the release's words, and names what
nothing in the artifact sets (``Origin.unknown``). A model that cannot be found fails ``config`` too
(``runner.find_models``), and every other check of the deployment, and the other deployments of the file,
are still judged.

Nothing here goes through the manifest loader: its errors name ``deployments.<name>.<key>``, keys that are not
in the user's file. What can fail here is only what makes no deployment at all: a file that runs no engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.artifacts.commands import Invocation, image_release
from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engine import Engine
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.config_file import in_container, reader
from pytest_gpulayout.inputs.engine_args import ParsedArgs, ResolvedArgs
from pytest_gpulayout.manifest.fields import FLAG_KEYS, INTEGER_KEYS
from pytest_gpulayout.origin import Origin, Pod, Worker

#: flags that say where the engine listens or how its nodes meet: the artifact's business, not a check's
#: (the ``deploy`` check reads ``--nnodes``, ``--data-parallel-size-local`` and the address from ``Spread``)
_DROPPED = ("--host", "--port", "--nnodes", "--node-rank", "--dist-init-addr", "--data-parallel-address",
            "--data-parallel-rpc-port", "--data-parallel-size-local", "--headless", "--data-parallel-start-rank",
            "--served-model-name", "--load-format", "--revision")
#: a Hub id (``org/name``) a ``--revision`` pins; a path or an URI is not pinned by it
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*$")


@dataclass(frozen=True)
class Found:
    """A deployment found in an artifact, with where it stands and what the artifact says around it."""

    deployment: Deployment
    source: str
    invocation: Invocation
    #: the pod around it (Kubernetes): what the ``deploy`` check reads; None for bare command lines
    pod: Any = None
    machine: str = ""
    #: how the command line spans nodes: ``--nnodes`` (None: not given or not a number), the data-parallel
    #: ranks on this node (``--data-parallel-size-local``), the address the nodes meet at
    nodes: int | None = None
    local_dp: int | None = None
    master: str | None = None
    #: the engine's release image it runs (``vllm/vllm-openai:v0.10.1``), and the release its tag names (None:
    #: the tag names none, so the checks judged another release than the one that will run)
    image: str = ""
    image_release: str | None = None


@dataclass(frozen=True)
class Spread:
    """What a command line says about the nodes it spans (read before the flags are dropped)."""

    nodes: int | None = None
    local_dp: int | None = None
    master: str | None = None


def _int(value: object) -> int | None:
    """A whole number as the release typed it, or its text (None: not one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class Line:
    """One invocation's words as its release reads them: ``args`` (the release's parse, typed where it takes the
    line) and ``parsed`` (its spelling table alone: what a refused line still says)."""

    engine: Engine
    args: ResolvedArgs
    parsed: ParsedArgs

    def canonical(self, spelling: str) -> str:
        return self.parsed.table.canonical(spelling) or spelling

    def value(self, spelling: str) -> object:
        """What the line sets for the option ``spelling`` names: the release's typed value where it takes the
        line, else the text written (None: not set)."""
        if not spelling:
            return None
        canon = self.canonical(spelling)
        dest = self.args.dest(canon)
        if self.args.is_set(dest):  # a refused line has no values; refused fields keep theirs (Ray Serve LLM)
            return self.args.get(dest)
        return None if self.args.ok else self.parsed.value(canon)

    def model(self) -> str:
        """The model as the line names it (its flag, else the first positional; "" where it names none), pinned
        to ``--revision`` where that is given for a Hub id."""
        flags = self.engine.cli.flags
        written = self.parsed.value(self.canonical(flags.model)) if flags.model else None
        if written is None and self.parsed.positionals:
            written = self.parsed.positionals[0]
        if written is None:  # fields, not words (Ray Serve LLM, Triton): the model's own field
            typed = self.value(flags.model) if flags.model else (
                self.args.get("model") if self.args.is_set("model") else None)
            written = str(typed) if isinstance(typed, str) else None
        model = written or ""
        revision = self.parsed.value(self.canonical("--revision")) or (
            self.args.get("revision") if self.args.ok and self.args.is_set("revision") else None)
        if revision and _HUB_ID.match(model) and "@" not in model:
            model = f"{model}@{revision}"
        return model


def entry_words(engine: Engine, inv: Invocation) -> tuple[str, ...]:
    """``inv``'s words as the engine's entry command reads them. A module entry (``python -m
    vllm.entrypoints.openai.api_server``) has no positional model and takes it as ``--model``; the entry
    command takes it first (``vllm serve MODEL``; vLLM 0.8.3 - 0.11.0 refuse ``--model`` there:
    ``FlexibleArgumentParser.parse_args`` only looks at it after ``serve``), so the release's tables, which are
    the entry command's, read ``--model X`` moved to the front."""
    words = tuple(inv.args)
    flag = engine.cli.flags.model
    if not inv.entry.startswith("python -m ") or not flag or not engine.cli.parse_args([]).table.positionals:
        return words
    for i, w in enumerate(words):
        if w == flag and i + 1 < len(words):
            return (words[i + 1], *words[:i], *words[i + 2:])
        if w.startswith(flag + "="):
            return (w.split("=", 1)[1], *words[:i], *words[i + 1:])
    return words


def read_line(engine: Engine, words: Sequence[str], version: Version | None,
              resolved: ResolvedArgs | None = None, *, read: Callable[[str], str] | None = None) -> Line:
    """``words`` as release ``version`` reads them (``resolved``: the reader's own reading, Ray Serve LLM's;
    ``read``: how a ``--config FILE`` of the line is read, ``inputs/config_file.py``)."""
    return Line(engine, resolved if resolved is not None else engine.cli.resolve_args(words, version, read=read),
                engine.cli.parse_args(words, version))


def spread(inv: Invocation, line: Line | None = None) -> Spread:
    """``--nnodes``, ``--data-parallel-size-local`` and the address the nodes meet at, as ``inv`` sets them."""
    line = line or read_line(get_engine(inv.engine), inv.args, None)
    flags = line.engine.cli.flags
    master = line.value(flags.node_address) if flags.node_address else None
    text = str(master) if master is not None else None
    if text is not None:
        text = text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    nodes = _int(line.value(flags.nnodes)) if flags.nnodes else None
    local = _int(line.value(flags.data_parallel_size_local)) if flags.data_parallel_size_local else None
    return Spread(nodes, local, text or inv.env.get("MASTER_ADDR"))


def _visible(env: Mapping[str, str]) -> tuple[str, ...] | None:
    """``CUDA_VISIBLE_DEVICES``'s entries, where the artifact sets it to a list it spells out (None: not set, or
    set from something it does not say)."""
    text = env.get("CUDA_VISIBLE_DEVICES")
    if text is None or "$" in text or "`" in text:
        return None
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _gpus(visible: tuple[str, ...] | None, need: int) -> tuple[int | str, ...] | None:
    """The deployment's ``gpus``: the visible devices its ranks take (the first ``need``; all of them where
    there are fewer, so that the placement fails on the short list), None where they name no GPU."""
    if not visible:
        return None
    out: list[int | str] = []
    for p in visible:
        if p.isdigit():
            out.append(int(p))
        elif _UUID.match(p):
            out.append(p)
        else:
            return None  # "all", "none", "void": the container runtime's words, not CUDA's list
    if len(set(out)) != len(out):
        return None
    return tuple(out[:need])


def _unknown_judged(inv: Invocation, line: Line, words: Sequence[str]) -> tuple[str, ...]:
    """The unknown ``$VAR`` / ``$(...)`` of the line that reach what the checks judge (not only the address
    it listens on or the nodes meet at, which are the artifact's business)."""
    if not inv.unknown or inv.fields is not None:  # fields: every one the reader names reaches the engine
        return inv.unknown
    dropped = {line.canonical(f) for f in _DROPPED}
    skip: set[int] = set()
    for g in line.parsed.given:
        if g.flag in dropped:
            skip.update({g.index} if g.index < len(words) and "=" in words[g.index] else {g.index, g.index + 1})
    kept = [w for i, w in enumerate(words) if i not in skip]
    return tuple(u for u in inv.unknown if any(u in w for w in kept))


def _rest(line: Line) -> list[str]:
    """The flags no deployment key owns, as the release spells them (``launch.args``)."""
    flags = line.engine.cli.flags
    owned = {line.canonical(getattr(flags, k)) for k in FLAG_KEYS if getattr(flags, k)}
    dropped = {line.canonical(f) for f in _DROPPED} | ({line.canonical(flags.model)} if flags.model else set())
    rest: list[str] = []
    for g in line.parsed.given:
        if g.flag in owned or g.flag in dropped or g.flag in ("--enable-expert-parallel",):
            continue
        rest.append(g.flag if g.value is None else f"{g.flag}={g.value}")
    rest.extend(line.parsed.unknown_args)
    return rest


def _keys(line: Line) -> dict[str, Any]:
    """The deployment keys the line sets, from the release's values (the spelling table's text where the
    release refuses the line; a value that is no number there is left to ``config`` to report)."""
    flags = line.engine.cli.flags
    out: dict[str, Any] = {}
    for key in FLAG_KEYS:
        value = line.value(getattr(flags, key))
        if value is None:
            continue
        if key in INTEGER_KEYS:
            number = _int(value)
            if number is not None and number >= 1:
                out[key] = number
        elif key == "memory_fraction":
            fraction = _float(value)
            if fraction is not None and fraction > 0:
                out[key] = fraction
        elif isinstance(value, str) and value:
            out[key] = value
    known = line.parsed.table.canonical("--enable-expert-parallel") is not None
    ep = line.value("--enable-expert-parallel") if known else None
    if ep is True or (known and not line.args.ok and line.parsed.has(line.canonical("--enable-expert-parallel"))):
        out["enable_expert_parallel"] = True
    return out


def _release(engine: Engine, inv: Invocation, version: str | None) -> tuple[str | None, tuple[str, str | None]]:
    """The release the checks judge (``version`` given by the caller, else the one the image's tag names) and
    ``(image, release its tag names)`` where ``inv`` runs in its engine's own release image."""
    found = image_release(inv.image) if inv.image else None
    tagged = (inv.image, found[1]) if found is not None and found[0] == inv.engine else ("", None)
    return version or tagged[1], tagged


def _version(engine: Engine, text: str | None) -> Version | None:
    if text is None:
        return None
    try:
        return engine.parse_version(text)
    except (InputError, InvalidVersion):
        return None


def deployment_of(inv: Invocation, pod: Pod | None, *, name: str, path: Path, version: str | None = None,
                  workers: Sequence[Worker] = ()) -> Found:
    """``inv`` as a deployment named ``name``: its release's reading of the line (or the reader's, of arguments
    that are not words: ``Invocation.fields``), the pod around it."""
    engine = get_engine(inv.engine)
    release, (image, image_rel) = _release(engine, inv, version)
    resolved = inv.fields(_version(engine, release)) if inv.fields is not None else None
    via = inv.via
    words = entry_words(engine, inv)
    # a container reads its own file system; a script or a bare line, files next to it
    read = in_container(inv.source) if pod is not None or inv.image else reader(path.parent)
    line = read_line(engine, words, _version(engine, release), resolved, read=read)
    keys = _keys(line)
    s = spread(inv, line)
    env = {k: v for k, v in inv.env.items() if isinstance(v, str)}
    visible = _visible(env)
    env.pop("CUDA_VISIBLE_DEVICES", None)  # the deployment's gpus: the placement check judges them
    origin = Origin(file=path, source=inv.source, entry=inv.entry, args=words if resolved is None else (),
                    pod=pod, nodes=s.nodes, local_dp=s.local_dp, master=s.master, image=image,
                    image_release=image_rel, unknown=_unknown_judged(inv, line, words), visible=visible,
                    resolved=resolved, via=via, workers=tuple(workers))
    tp, pp, dp = (keys.get(k, 1) for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"))
    single = origin.node_gpus(tp, pp, dp) is None
    dep = Deployment(name=name, model=line.model(), engine=engine.name, tensor_parallel_size=tp,
                     pipeline_parallel_size=pp, data_parallel_size=dp,
                     gpus=_gpus(visible, tp * pp * dp) if single else None,
                     max_model_len=keys.get("max_model_len"), memory_fraction=keys.get("memory_fraction"),
                     kv_cache_dtype=keys.get("kv_cache_dtype", "auto"), engine_version=release,
                     enable_expert_parallel=bool(keys.get("enable_expert_parallel", False)),
                     launch=Launch(args=tuple(_rest(line)), env=MappingProxyType(env)),
                     base_dir=path.parent, manifest_path=path, origin=origin)
    return Found(dep, inv.source, inv, pod, "", s.nodes, s.local_dp, s.master, image, image_rel)


def _unique(source: str, taken: set[str]) -> str:
    name, n = source, 2
    while name in taken:
        name, n = f"{source}#{n}", n + 1
    taken.add(name)
    return name


def safe_name(source: str, taken: set[str]) -> str:
    """``source`` as a file name (``plan --emit`` and tests name files after deployments)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", source).strip("-.") or "deployment"
    return _unique(base, taken)


def _group(pod: object) -> str:
    return getattr(pod, "obj", "") if isinstance(pod, Pod) else ""


def build(invocations: Sequence[tuple[Invocation, Any]], *, machine: str, path: Path,
          version: str | None = None) -> tuple[list[Found], tuple[str, ...]]:
    """Each invocation as a deployment named after where it stands (a worker's line joins its leader's), and
    one note per invocation of an engine whose lines are not read into deployments (llama.cpp's)."""
    workers: dict[str, list[Worker]] = {}
    for inv, pod in invocations:
        if getattr(pod, "role", "") == "worker" and get_engine(inv.engine).cli.command_line_keys:
            workers.setdefault(_group(pod), []).append(Worker(inv.source, tuple(inv.args), inv.unknown))
    taken: set[str] = set()
    out: list[Found] = []
    notes: list[str] = []
    leaders = {_group(pod) for inv, pod in invocations if getattr(pod, "role", "") != "worker"}
    for inv, pod in invocations:
        engine = get_engine(inv.engine)
        if not engine.cli.command_line_keys:
            notes.append(f"{inv.source}: {inv.entry} is recognised, but its command line is not read into a "
                         f"deployment yet: describe it in a gpulayout.yaml (engine: {engine.name})")
            continue
        role = getattr(pod, "role", "")
        if role == "worker" and _group(pod) in leaders:
            continue  # the leader's engine, not one of its own: its line is judged with the leader's (config)
        found = deployment_of(inv, pod if isinstance(pod, Pod) else None, name=_unique(inv.source, taken), path=path,
                              version=version, workers=workers.get(_group(pod), []) if role != "worker" else ())
        out.append(Found(found.deployment, found.source, found.invocation, found.pod, machine, found.nodes,
                         found.local_dp, found.master, found.image, found.image_release))
    return out, tuple(notes)
