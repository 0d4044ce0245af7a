"""Finding the model a deployment names, the way a deploy pipeline has it.

A ``model:`` (or an engine's ``--model`` / first argument) is, in the order tried:

1. an entry of the **model map** (``GPULAYOUT_MODEL_MAP``, a YAML file ``{reference: path or id}``): any
   reference, a Hub id, a KServe ``pvc://`` / ``s3://`` URI or a container path such as ``/mnt/models``, mapped
   to a local folder (relative to the map's own folder) or to another id;
2. a **local path**: a folder holding ``config.json``, the file itself, or a ``.gguf``;
3. for a Hub id ``org/name`` (``@rev`` or ``:rev`` pins a branch, tag or commit; KServe's ``hf://org/name[:rev]``
   and ``https://huggingface.co/org/name`` are the same id): a **models folder** (``GPULAYOUT_MODELS``,
   folders separated by ``os.pathsep``) holding ``org/name``, ``name``, ``org--name`` or a Hugging Face cache
   layout; then the **Hugging Face cache** (``model/hfcache.py``); then the bundled **catalog** (unpinned ids
   only), so the examples and the 19 catalog models read the same on and off line and ask no network; then
   the **Hub** (``model/hub.py``), unless ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set.

Anything else is a ``ModelNotFound``: an ``InputError`` (so a command still stops with one line naming the
file and the key) that also carries why (``NotFound``) and what was tried, for a deployment's finding.

The environment is the process's unless a ``ModelSources`` is handed in: the variables are the ones the
engines read (``HF_HUB_CACHE``, ``HF_HOME``, ``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_OFFLINE``), so where this
finds a model the engine started in the same environment finds the same files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import DIRECTORY, LOOP_MESSAGE, not_regular, read_text, symlink_loop
from pytest_gpulayout.inputs.yaml import load_yaml
from pytest_gpulayout.model import catalog
from pytest_gpulayout.model.hfcache import Snapshot, find_snapshot, hub_cache_dir, read_weights_record

DEFAULT_ENDPOINT = "https://huggingface.co"
#: seconds a Hub request may take (``HF_HUB_ETAG_TIMEOUT`` overrides): a check must not hang on a dead network
DEFAULT_TIMEOUT_S = 5.0

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
#: a Hub id (``huggingface_hub.utils.validate_repo_id``: word characters, ``-`` and ``.``, one optional ``/``)
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
_PINNED = re.compile(r"^(?P<id>(?:[\w.-]+/)?[\w.-]+)(?:[@:](?P<rev>[\w./-]+))?$")
_VARIABLE = re.compile(r"\$(\{?[A-Za-z_][A-Za-z0-9_]*|\(|\{)")
_HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")
#: storage KServe's initializer downloads to /mnt/models, which no check here can read (kserve_storage.py)
_STORAGE = {"pvc": "a PersistentVolumeClaim", "s3": "an S3 bucket", "gs": "a Google Cloud Storage bucket",
            "oci": "an OCI image (modelcar)", "hdfs": "HDFS", "webhdfs": "HDFS", "azure": "Azure storage",
            "http": "a web server", "https": "a web server"}


class Origin(Enum):
    """Where a model's config was found."""

    PATH = "path"
    MODELS_DIR = "models_dir"
    HF_CACHE = "hf_cache"
    HUB = "hub"
    CATALOG = "catalog"


class NotFound(Enum):
    """Why a model could not be found."""

    NO_SUCH_PATH = "no_such_path"          # a path that is not on this machine
    NO_CONFIG = "no_config"                # a folder (or a Hub repository) without config.json
    STORAGE_URI = "storage_uri"            # pvc:// s3:// gs:// oci:// ... not mapped
    UNSET_VARIABLE = "unset_variable"      # ``$MODEL``: a shell variable nobody set
    NOT_LOCAL = "not_local"                # an id in no local source, and the Hub not asked (offline)
    HUB_UNREACHABLE = "hub_unreachable"
    NO_SUCH_REPO = "no_such_repo"
    GATED = "gated"
    NO_SUCH_REVISION = "no_such_revision"


class ModelNotFound(InputError):
    """A model reference that names nothing this machine can read. ``message`` says how to supply it."""

    def __init__(self, ref: str, reason: NotFound, message: str, *, where: str | Path | None = None,
                 tried: Sequence[str] = ()):
        self.ref = ref
        self.reason = reason
        self.tried = tuple(tried)
        super().__init__(message, where=where)


@dataclass(frozen=True)
class ModelSources:
    """Everywhere a model may be found, and how the Hub is asked (``from_environ`` reads them)."""

    hub_cache: Path
    offline: bool = False
    endpoint: str = DEFAULT_ENDPOINT
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: this tool's own cache: a Hub cache where the Hugging Face one cannot be written, and weight records
    facts_dir: Path | None = None
    models_dirs: tuple[Path, ...] = ()
    model_map: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the map's file (its relative paths resolve against its folder), for messages
    map_file: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, models_dirs: Sequence[Path] = (),
                     model_map: Path | None = None, base_dir: Path | None = None) -> ModelSources:
        """The sources ``environ`` names, plus ``models_dirs`` and a ``model_map`` file given on a command line
        or in a manifest (relative to ``base_dir``); those come before ``GPULAYOUT_MODELS`` /
        ``GPULAYOUT_MODEL_MAP``."""
        base = base_dir or Path.cwd()
        dirs = [base / d for d in models_dirs]
        dirs += [Path(p).expanduser() for p in environ.get("GPULAYOUT_MODELS", "").split(os.pathsep) if p.strip()]
        map_file = base / model_map if model_map is not None else None
        if map_file is None and environ.get("GPULAYOUT_MODEL_MAP"):
            map_file = Path(environ["GPULAYOUT_MODEL_MAP"]).expanduser()
        offline = any(environ.get(k, "").strip().upper() in ("1", "ON", "YES", "TRUE")
                      for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
        try:
            timeout = float(environ.get("HF_HUB_ETAG_TIMEOUT", "") or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
        cache_home = environ.get("GPULAYOUT_CACHE") or str(
            Path(environ.get("XDG_CACHE_HOME") or Path(environ.get("HOME") or Path.home()) / ".cache")
            / "pytest-gpulayout")
        return cls(hub_cache=hub_cache_dir(environ), offline=offline,
                   endpoint=(environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
                   token=environ.get("HF_TOKEN") or environ.get("HUGGING_FACE_HUB_TOKEN") or None,
                   timeout_s=timeout if timeout > 0 else DEFAULT_TIMEOUT_S, facts_dir=Path(cache_home) / "hub",
                   models_dirs=tuple(dirs), model_map=MappingProxyType(read_model_map(map_file) if map_file else {}),
                   map_file=map_file)


def read_model_map(path: Path) -> dict[str, str]:
    """A model map file: a YAML mapping of references to local paths or ids (one line naming the file and
    the key when it is not)."""
    data = load_yaml(read_text(path), where=str(path))
    if not isinstance(data, dict):
        raise InputError("a model map must be a mapping of model references to local paths or ids "
                         "(Qwen/Qwen3-8B: /models/qwen3-8b)", where=path)
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"must be a local path or a model id, got {value!r}", where=path, key=str(key))
        out[str(key).strip().rstrip("/")] = value.strip()
    return out


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model reference led: a config on this machine (or a catalog entry) and how it was found."""

    ref: str
    origin: Origin
    #: the ``config.json`` (or ``.gguf``) read; None for a catalog model
    config: Path | None = None
    catalog_id: str | None = None
    repo_id: str | None = None
    #: the commit of a cached or fetched snapshot
    commit: str | None = None
    #: checkpoint bytes where no file beside ``config`` gives them (a single-file repository from the Hub)
    weight_bytes: int | None = None
    #: one line: how it was found (``Qwen/Qwen3-8B: the Hugging Face cache /root/.cache/..., main = 0a1b2c3d``)
    via: str = ""

    @property
    def name(self) -> str:
        if self.catalog_id:
            return self.catalog_id
        if self.repo_id:
            return self.repo_id
        assert self.config is not None
        path = self.config.resolve()
        return path.parent.name if path.name == "config.json" else path.stem


@dataclass(frozen=True)
class _Ref:
    """A reference read: a Hub id (with its pinned revision) or not."""

    text: str
    repo_id: str | None = None
    revision: str | None = None
    storage: str | None = None     # the storage a URI names (``a PersistentVolumeClaim``), not mapped


def _parse(text: str, revision: str | None) -> _Ref:
    m = _SCHEME.match(text)
    if m is not None:
        scheme, rest = m.group(1).lower(), m.group(2).strip("/")
        if scheme == "hf":
            pinned = _PINNED.match(rest)
            if pinned is not None:
                return _Ref(text, pinned.group("id"), revision or pinned.group("rev"))
        if scheme in ("http", "https"):
            host, _, path = rest.partition("/")
            parts = path.split("/")
            if host.lower() in _HUB_HOSTS and len(parts) >= 2 and _REPO_ID.match("/".join(parts[:2])):
                rev = parts[3] if len(parts) >= 4 and parts[2] == "tree" else None
                return _Ref(text, "/".join(parts[:2]), revision or rev)
        return _Ref(text, storage=_STORAGE.get(scheme, f"{scheme}:// storage"))
    pinned = _PINNED.match(text)
    if pinned is not None and ".." not in text and "--" not in pinned.group("id"):
        return _Ref(text, pinned.group("id"), revision or pinned.group("rev"))
    return _Ref(text)


def _looks_like_path(ref: str, path: Path) -> bool:
    return (ref.startswith((".", "/", "~")) or ref.endswith((".json", ".gguf")) or ref.count("/") > 1
            or "\\" in ref or path.is_symlink())


def _supply_hint(sources: ModelSources) -> str:
    where = f"the model map {sources.map_file}" if sources.map_file else "a model map (GPULAYOUT_MODEL_MAP=FILE)"
    return (f"Give a folder holding config.json (or the file itself) at that path, or map the reference to one in "
            f"{where}, or put it under a models folder (GPULAYOUT_MODELS=DIR)")


def _local(path: Path, ref: str, via: str, origin: Origin = Origin.PATH) -> ResolvedModel | None:
    """The model at an existing ``path``, or None where nothing is there. A FIFO or a device is refused
    before it is opened: it would be waited on, or never end."""
    kind = not_regular(path)
    if kind is not None and kind != DIRECTORY:
        raise InputError(f"the model is not a regular file: {kind}", where=path)
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            kind = not_regular(config)
            if kind is not None:
                raise InputError(f"the model's config.json is not a regular file: {kind}", where=config)
            if symlink_loop(config):
                raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=config)
            raise ModelNotFound(ref, NotFound.NO_CONFIG, "no config.json in this directory (a model directory must "
                                "hold the Hugging Face config.json)", where=path, tried=(str(path),))
        return ResolvedModel(ref, origin, config=config, via=via)
    if path.is_file():
        return ResolvedModel(ref, origin, config=path, via=via)
    return None


def _from_snapshot(ref: str, snap: Snapshot, origin: Origin, where: str, facts_dir: Path | None) -> ResolvedModel:
    weight_bytes = None
    if facts_dir is not None and not any(snap.has(f) for f in ("model.safetensors.index.json",
                                                               "pytorch_model.bin.index.json", "model.safetensors")):
        weight_bytes = read_weights_record(facts_dir / "weights", snap.repo_id, snap.commit)
    return ResolvedModel(ref, origin, config=snap.folder / "config.json", repo_id=snap.repo_id, commit=snap.commit,
                         weight_bytes=weight_bytes,
                         via=f"{snap.repo_id}: {where}, {snap.revision} = {snap.commit[:12]}")


def _in_models_dirs(ref: _Ref, sources: ModelSources) -> ResolvedModel | None:
    assert ref.repo_id is not None
    org, _, name = ref.repo_id.rpartition("/")
    for d in sources.models_dirs:
        snap = find_snapshot(d, ref.repo_id, ref.revision)
        if snap is not None:
            return _from_snapshot(ref.text, snap, Origin.MODELS_DIR, f"the models folder {d}", sources.facts_dir)
        for sub in ([Path(org, name), Path(name), Path(f"{org}--{name}")] if org else [Path(name)]):
            found = _local(d / sub, ref.text, f"{ref.text}: the models folder {d} ({sub})", Origin.MODELS_DIR)
            if found is not None:
                return found
    return None


def _ask_hub(ref: _Ref, sources: ModelSources, hint: str) -> ResolvedModel:
    # huggingface_hub's download module and its HTTP client cost 0.3-0.6 s to import: only a reference that
    # reaches the Hub pays it (every other way of finding a model is a few path look-ups)
    from pytest_gpulayout.model.hub import HubError, HubFailure, fetch

    assert ref.repo_id is not None
    reasons = {HubFailure.UNREACHABLE: NotFound.HUB_UNREACHABLE, HubFailure.NO_SUCH_REPO: NotFound.NO_SUCH_REPO,
               HubFailure.GATED: NotFound.GATED, HubFailure.NO_SUCH_REVISION: NotFound.NO_SUCH_REVISION,
               HubFailure.NO_CONFIG: NotFound.NO_CONFIG}
    facts = sources.facts_dir or sources.hub_cache.parent / "pytest-gpulayout"
    caches = [sources.hub_cache, facts / "cache"]
    for i, cache in enumerate(caches):
        try:
            got = fetch(ref.repo_id, ref.revision, endpoint=sources.endpoint, token=sources.token, cache_dir=cache,
                        facts_dir=facts / "weights", timeout_s=sources.timeout_s)
        except PermissionError:
            if i + 1 < len(caches):
                continue  # a read-only Hugging Face cache (a mounted volume): keep what is fetched in ours
            raise ModelNotFound(ref.text, NotFound.HUB_UNREACHABLE, f"{ref.text}: neither {sources.hub_cache} nor "
                                f"{cache} can be written, so the Hub's config.json has nowhere to go") from None
        except HubError as err:
            tried = (f"the Hugging Face cache {sources.hub_cache}", f"the Hub {sources.endpoint}")
            raise ModelNotFound(ref.text, reasons[err.reason], f"{err.message}.{hint} {_supply_hint(sources)}",
                                tried=tried) from None
        return ResolvedModel(ref.text, Origin.HUB, config=got.folder / "config.json", repo_id=got.repo_id,
                             commit=got.commit, weight_bytes=got.weight_bytes,
                             via=f"{got.repo_id}: fetched from {sources.endpoint} into {cache}, "
                                 f"{ref.revision or 'main'} = {got.commit[:12]}")
    raise AssertionError("unreachable")


def resolve_model(ref: str, base_dir: Path | None = None, sources: ModelSources | None = None, *,
                  revision: str | None = None) -> ResolvedModel:
    """Where ``ref`` (a manifest's ``model:``) is on this machine, or a ``ModelNotFound`` saying how to supply it.

    ``base_dir`` is the folder relative paths resolve against (the manifest's); ``revision`` pins a Hub
    revision the reference does not (an engine's ``--revision``); ``sources`` default to the process's
    environment (``ModelSources.from_environ``)."""
    if not isinstance(ref, str) or not ref.strip():
        raise InputError("the model reference is empty: give a directory with config.json, a config.json "
                         "path or a model id such as Qwen/Qwen3-8B")
    ref = ref.strip()
    sources = sources or ModelSources.from_environ(os.environ)
    mapped = sources.model_map.get(ref.rstrip("/"))
    if mapped is not None:
        return _mapped(ref, mapped, sources, revision)
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    found = _local(path, ref, str(path))
    if found is not None:
        return found
    parsed = _parse(ref, revision)
    tried = [str(path)]
    if _VARIABLE.search(ref):
        raise ModelNotFound(ref, NotFound.UNSET_VARIABLE, f"{ref!r} is a shell variable that nothing set: give its "
                            f"value in the environment the command runs with (the container's env, or the script), "
                            f"or write the model in its place", tried=tried)
    if parsed.storage is not None:
        raise ModelNotFound(ref, NotFound.STORAGE_URI, f"{ref} is {parsed.storage}, which cannot be read from here. "
                            f"{_supply_hint(sources)}", tried=tried)
    close = catalog.suggest(ref)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    if parsed.repo_id is None or (not _SCHEME.match(ref) and _looks_like_path(ref, path)):
        if symlink_loop(path):
            raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=str(path))
        # ``where`` names the path; the text does not repeat it (evaluate.load_models prefixes ``where``)
        raise ModelNotFound(ref, NotFound.NO_SUCH_PATH, f"no such file or directory.{hint} {_supply_hint(sources)}",
                            where=str(path), tried=tried)
    return _by_id(parsed, sources, tried, hint)


def _by_id(ref: _Ref, sources: ModelSources, tried: list[str], hint: str) -> ResolvedModel:
    assert ref.repo_id is not None
    found = _in_models_dirs(ref, sources)
    if found is not None:
        return found
    tried += [f"the models folder {d}" for d in sources.models_dirs]
    for cache, what in ((sources.hub_cache, "the Hugging Face cache"),
                        *(((sources.facts_dir / "cache", "this tool's Hub cache"),) if sources.facts_dir else ())):
        snap = find_snapshot(cache, ref.repo_id, ref.revision)
        if snap is not None:
            return _from_snapshot(ref.text, snap, Origin.HF_CACHE, f"{what} {cache}", sources.facts_dir)
    tried.append(f"the Hugging Face cache {sources.hub_cache}")
    entry = catalog.find(ref.repo_id) if ref.revision is None else None
    if entry is not None:
        return ResolvedModel(ref.text, Origin.CATALOG, catalog_id=entry, via=f"{ref.text}: the bundled catalog")
    if not sources.offline:
        return _ask_hub(ref, sources, hint)
    pinned = f" at {ref.revision}" if ref.revision else ""
    raise ModelNotFound(ref.text, NotFound.NOT_LOCAL, f"{ref.text!r}{pinned} is neither a local path, in the "
                        f"Hugging Face cache ({sources.hub_cache}) nor a bundled catalog model, and HF_HUB_OFFLINE "
                        f"keeps the Hub from being asked.{hint} Download its config.json (`hf download "
                        f"{ref.repo_id} config.json`), or unset HF_HUB_OFFLINE. {_supply_hint(sources)}",
                        tried=tried)


def _mapped(ref: str, target: str, sources: ModelSources, revision: str | None) -> ResolvedModel:
    """A model map's entry: a local path (relative to the map's folder) or another reference, read without the
    map (an entry does not lead to another)."""
    base = sources.map_file.parent if sources.map_file else Path.cwd()
    where = f"{sources.map_file}: {ref}" if sources.map_file else ref
    path = Path(target).expanduser()
    local = _local(path if path.is_absolute() else base / path, ref, f"{ref}: the model map ({where} -> {target})")
    if local is not None:
        return local
    if _looks_like_path(target, path) or _parse(target, revision).repo_id is None:
        raise ModelNotFound(ref, NotFound.NO_SUCH_PATH, f"maps {ref} to {target}, which is not on this machine",
                            where=where, tried=(str(base / path),))
    inner = ModelSources(sources.hub_cache, sources.offline, sources.endpoint, sources.token, sources.timeout_s,
                         sources.facts_dir, sources.models_dirs)
    return resolve_model(target, base, inner, revision=revision)
