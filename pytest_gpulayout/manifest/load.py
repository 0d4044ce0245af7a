"""``gpulayout.yaml``: find it, read it, and turn it into validated :class:`Deployment` objects.

A manifest is what a deploy pipeline trusts to describe the rollout, so this module is strict on
purpose: an unknown key, a wrong type or an impossible value is an :class:`InputError` naming the
file and the dotted key (``deployments.qwen3-8b-tp2.tensor_parallel_size``), in one line, with a
"did you mean" where one is close. A typo such as ``gpu_memory_utilization`` that was silently
ignored would make every later check answer a question nobody asked.

Rules a user may need to know (the README repeats them):

- ``defaults`` is merged under every deployment. ``require``, ``launch`` and ``launch.env`` merge
  key by key; every other key (lists included: ``gpus``, ``launch.args``) is replaced as a whole.
- ``null`` is accepted only where the built-in default is "not set" (``gpus``, ``max_model_len``,
  ``memory_fraction``, ``engine_version``, ``require.kv_tokens``, ``require.concurrency``,
  ``require.tp_links``, ``launch.command``) and then means that default, overriding ``defaults``.
  For the mappings (``defaults``, ``require``, ``launch``, ``launch.env``) and ``launch.args`` it
  means empty. Anywhere else ``null`` is almost always a value left out by mistake, so it is an error.
- ``require.concurrency`` counts full-length requests of ``max_model_len`` tokens; without
  ``max_model_len`` the model's own maximum length is used.
- ``model`` strings that look like paths (``./``, ``../``, ``/``, ``~``, or that exist next to the
  manifest) become absolute paths against the manifest's directory; catalog ids stay as written.

YAML is imported inside the functions that need it, so importing this module costs nothing at
pytest start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.deployment import Deployment, Launch, Require
from pytest_gpulayout.engines.llamacpp import manifest as _llamacpp
from pytest_gpulayout.engines.llamacpp.flags import ARG_OWNERS as LLAMACPP_OWNERS
from pytest_gpulayout.engines.llamacpp.flags import LAUNCHER_ARGS as LLAMACPP_LAUNCHER
from pytest_gpulayout.engines.registry import ENGINE_KV_CACHE_DTYPES, LATEST_KNOWN
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_found
from pytest_gpulayout.inputs.values import (
    Ctx,
    describe,
    did_you_mean,
    show,
)
from pytest_gpulayout.inputs.yaml import load_yaml
from pytest_gpulayout.manifest import launch_args as _launch_args
from pytest_gpulayout.manifest import measure as _measure
from pytest_gpulayout.manifest.fields import (
    DEPLOYMENT_FIELDS,
    LAUNCH_FIELDS,
    REQUIRE_FIELDS,
    SECTIONS,
    Field,
    parsed,
)
from pytest_gpulayout.manifest.keys import (
    ARG_LAUNCHER,
    ARG_OWNERS,
    DEPLOYMENT_ALIASES,
    DEPLOYMENT_KEYS,
    LAUNCH_ALIASES,
    LAUNCH_KEYS,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    REQUIRE_ALIASES,
    REQUIRE_KEYS,
    TOP_ALIASES,
    TOP_KEYS,
    check_keys,
)

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "Manifest",
    "find_manifest",
    "load_manifest",
    "parse_manifest",
]

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UUID_RE = re.compile(r"(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")




# ------------------------------------------------------------------------------------------------
# The manifest
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Manifest:
    """A validated manifest.

    ``machine`` is kept as written (``auto``, ``preset:<name>`` or a path); a relative path is
    resolved by the caller (``sources.load_machine(spec, base_dir)``) against ``base_dir``, the
    manifest's own directory, so a manifest means the same thing from any working directory.
    """

    path: Path
    machine: str
    base_dir: Path
    deployments: tuple[Deployment, ...]
    #: one-line warnings about the manifest as a whole, printed with the verdicts (an engine_version
    #: newer than any release the rules were read from)
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.deployments)

    def deployment(self, name: str) -> Deployment:
        """The deployment called ``name``; an :class:`InputError` (with a "did you mean") if none is.

        It raises ``InputError`` rather than ``KeyError`` because the name usually comes from a
        user (a command-line selection), who should get the one-line message, not a traceback.
        """
        for dep in self.deployments:
            if dep.name == name:
                return dep
        raise InputError(
            f"no deployment named {show(name)}{did_you_mean(name, self.names)}"
            f" (deployments: {', '.join(self.names)})",
            where=self.path,
        )


def find_manifest(
    explicit: str | None,
    ini_value: str | None,
    rootdir: Path,
    *,
    flag: str = "--gpulayout-manifest PATH",
    also: Path | None = None,
) -> Path:
    """Where the manifest is: ``--gpulayout-manifest``, else ini ``gpulayout_manifest``, else
    ``<rootdir>/gpulayout.yaml``. Returns an absolute path to an existing file.

    A path the user named that does not exist is an error rather than a fall-through to the next
    source: checking a different manifest than the one asked for would be a silent wrong answer.
    ``explicit`` is relative to the working directory (it came from a command line); ``ini_value``
    relative to ``rootdir`` (it came from the ini file). ``flag`` is the option named in the hint
    (the CLI passes its own spelling). A directory named explicitly means its ``gpulayout.yaml``.
    ``also`` is a second directory to look in (pytest's invocation directory: a space-separated
    plugin option value can move pytest's rootdir away from it).
    """
    rootdir = Path(rootdir)
    if explicit:
        path = _absolute(Path(explicit).expanduser())
        if path.is_dir():
            inside = path / MANIFEST_NAME
            if not inside.is_file():
                raise InputError(f"is a directory without a {MANIFEST_NAME}", where=explicit)
            return inside
        if not path.is_file():
            raise InputError(not_found(path, "manifest"), where=explicit)
        return path
    if ini_value:
        path = Path(ini_value).expanduser()
        path = _absolute(path if path.is_absolute() else rootdir / path)
        if not path.is_file():
            raise InputError(not_found(path, "manifest") + " (named by ini option gpulayout_manifest)", where=path)
        return path
    for folder in (rootdir, also):
        if folder is not None and _absolute(folder / MANIFEST_NAME).is_file():
            return _absolute(folder / MANIFEST_NAME)
    message = f"no {MANIFEST_NAME} in {rootdir}; pass {flag}"
    if (rootdir / "gpulayout.yml").is_file():
        message += " (found gpulayout.yml: rename it to gpulayout.yaml)"
    raise InputError(message)


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate the manifest at ``path`` (errors name ``path`` as given)."""
    p = Path(path).expanduser()
    where = str(path)
    if not p.exists():
        raise InputError(not_found(p, "manifest"), where=where)
    if p.is_dir():
        hint = f"; did you mean {p / MANIFEST_NAME}?" if (p / MANIFEST_NAME).is_file() else ""
        raise InputError(f"is a directory, not a manifest file{hint}", where=where)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start}); is this really a manifest?",
                         where=where) from None
    except OSError as err:
        raise InputError(f"cannot read manifest: {err.strerror or err}", where=where) from None
    data = load_yaml(text, where)
    return parse_manifest(data, path=p, where=where)


def parse_manifest(data: object, *, path: Path, where: str | None = None) -> Manifest:
    """Validate already-loaded YAML ``data`` as if it were read from ``path``.

    ``path`` sets the directory relative paths resolve against; ``where`` is how errors name the
    file (default: ``path``).
    """
    ctx = Ctx(str(path) if where is None else where)
    manifest_path = _absolute(Path(path).expanduser())
    base_dir = manifest_path.parent
    _refuse_nul(ctx, data, "")

    if data is None:
        ctx.fail("", "the manifest is empty; it needs at least 'version: 1' and a 'deployments' mapping")
    if not isinstance(data, Mapping):
        ctx.fail("", f"the manifest must be a mapping with keys {', '.join(TOP_KEYS)}, not {describe(data)}")
    check_keys(ctx, data, TOP_KEYS, TOP_ALIASES, "", section="top")

    if "version" not in data:
        ctx.fail("version", f"missing: write 'version: {MANIFEST_VERSION}' at the top of the manifest")
    version = data["version"]
    if isinstance(version, str) and version.strip() == str(MANIFEST_VERSION):
        ctx.fail("version", f"must be the number {MANIFEST_VERSION}, not the string {show(version)}: "
                            f"write {MANIFEST_VERSION} without quotes")
    if type(version) is not int:
        ctx.fail("version", f"must be the number {MANIFEST_VERSION}, not {describe(version)}")
    if version != MANIFEST_VERSION:
        ctx.fail("version", f"unsupported manifest version {version}; "
                            f"this pytest-gpulayout reads version {MANIFEST_VERSION}")

    machine = _parse_machine(ctx, data.get("machine", "auto"))

    defaults_raw = data.get("defaults")
    if defaults_raw is None:
        defaults_raw = {}
    if not isinstance(defaults_raw, Mapping):
        ctx.fail("defaults", f"must be a mapping of deployment keys, not {describe(defaults_raw)}")
    defaults = _parse_deployment_fields(ctx, defaults_raw, "defaults")

    if "deployments" not in data:
        ctx.fail("deployments", "missing: add a 'deployments' mapping of name -> deployment")
    raw_deps = data["deployments"]
    if isinstance(raw_deps, list):
        ctx.fail("deployments", "must be a mapping keyed by deployment name, not a list: write "
                                "'deployments: {qwen3-8b-tp2: {model: ..., tensor_parallel_size: 2}}'")
    if raw_deps is None or (isinstance(raw_deps, Mapping) and not raw_deps):
        ctx.fail("deployments", "is empty: add at least one deployment (name -> mapping with 'model')")
    if not isinstance(raw_deps, Mapping):
        ctx.fail("deployments", f"must be a mapping of name -> deployment, not {describe(raw_deps)}")

    deployments = []
    for name, raw in raw_deps.items():
        _check_name(ctx, name)
        prefix = f"deployments.{name}"
        if raw is None:
            ctx.fail(prefix, "is empty: a deployment needs at least 'model'")
        if not isinstance(raw, Mapping):
            ctx.fail(prefix, f"must be a mapping of deployment keys, not {describe(raw)}")
        own = _parse_deployment_fields(ctx, raw, prefix)
        inherited = frozenset(k for k in defaults if k not in own)
        deployments.append(
            _build(ctx, name, _merge(defaults, own), prefix, base_dir, manifest_path, inherited))
    return Manifest(path=manifest_path, machine=machine, base_dir=base_dir, deployments=tuple(deployments),
                    notes=stale_version_notes(deployments))


def stale_version_notes(deployments: Iterable[Deployment]) -> tuple[str, ...]:
    """One note per pinned ``engine_version`` newer than ``engines.versions.LATEST_KNOWN``: defaults and
    limits move between releases (vLLM's gpu_memory_utilization went 0.9 -> 0.92 in 0.20), so the
    rules read from older sources may no longer hold. A warning, not an error: the version is real."""
    def key(text: str) -> Version:  # llama.cpp's releases are build tags: b11434 -> 11434
        return Version(text[1:] if text[:1] in "bB" and text[1:].isdigit() else text)

    newer: dict[tuple[str, str], list[str]] = {}
    for dep in deployments:
        latest = LATEST_KNOWN.get(dep.engine)
        try:
            stale = bool(dep.engine_version and latest and key(dep.engine_version) > key(latest))
        except InvalidVersion:
            stale = False
        if stale and dep.engine_version:
            newer.setdefault((dep.engine, dep.engine_version), []).append(dep.name)
    return tuple(
        f"engine_version {version} ({', '.join(names)}) is newer than {engine} {LATEST_KNOWN[engine]}, the newest "
        f"release these rules were read from: its defaults and limits may differ, so the verdicts may be stale"
        for (engine, version), names in newer.items())



def _absolute(path: Path) -> Path:
    """Absolute without resolving symlinks: a Hugging Face cache snapshot's config.json is a
    symlink into blobs/, and following it would lose the directory that holds the weights."""
    return Path(os.path.abspath(path))



# ------------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------------
def _parse_machine(ctx: Ctx, value: object) -> str:
    what = "'auto', a snapshot or topo file path, or 'preset:<name>'"
    if not isinstance(value, str) or not value.strip():
        return ctx.fail("machine", f"must be {what}, not {describe(value)}")
    if value != "auto" and value.strip().lower() == "auto":
        return ctx.fail("machine", f"unknown machine {show(value)}: did you mean 'auto'?")
    if value.startswith("preset:") and not value[len("preset:"):].strip():
        return ctx.fail("machine", "'preset:' needs a name, e.g. 'preset:2xL4-pcie'")
    return value


def _refuse_nul(ctx: Ctx, value: object, key: str) -> None:
    """A NUL byte (YAML ``"\\0"`` or ``"\\x00"``) in any key or string: no command line, environment
    variable or path can carry one (``execve`` would refuse it), so it is bad input, named here, not a
    traceback at the launch."""
    def at(name: object) -> str:
        return f"{key}.{name}" if key else str(name)

    if isinstance(value, str):
        if "\0" in value:
            ctx.fail(key, f"{show(value)} contains a NUL byte (\\0), which no command-line argument, "
                          "environment variable or path can hold: remove it")
    elif isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(name, str) and "\0" in name:
                ctx.fail(at(name.replace("\0", "\\0")), f"the key {show(name)} contains a NUL byte (\\0), "
                                                         "which no name can hold: remove it")
            _refuse_nul(ctx, item, at(name))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _refuse_nul(ctx, item, f"{key}[{i}]")


def _check_name(ctx: Ctx, name: object) -> None:
    if not isinstance(name, str):
        ctx.fail(f"deployments.{name}", f"deployment names must be strings, not {describe(name)}: "
                                        f"quote it or use a name like 'model-tp2'")
    if not _NAME_RE.fullmatch(name):
        ctx.fail(f"deployments.{name}",
                 f"bad deployment name {show(name)}: use letters, digits, '.', '_' and '-', "
                 "starting with a letter or digit (it becomes the pytest test id)")


def _parse_section(ctx: Ctx, raw: object, key: str, known: Sequence[str],
                   aliases: Mapping[str, tuple[str, str]], fields: tuple[Field, ...]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        return ctx.fail(key, f"must be a mapping with keys {', '.join(known)}, not {describe(raw)}")
    check_keys(ctx, raw, known, aliases, key, section=key)
    return parsed(fields, ctx, raw, key)


def _parse_deployment_fields(ctx: Ctx, raw: Mapping[Any, Any], prefix: str) -> dict[str, Any]:
    """Field-by-field validation of one deployment (or of ``defaults``), before merging.

    Every field is checked where it is written, so an error names ``defaults.engine`` when the bad
    value is in ``defaults``, not each deployment that inherited it.
    """
    check_keys(ctx, raw, DEPLOYMENT_KEYS, DEPLOYMENT_ALIASES, prefix, section="deployment")
    out = parsed(DEPLOYMENT_FIELDS, ctx, {k: v for k, v in raw.items() if k not in SECTIONS}, prefix)
    if "require" in raw:
        out["require"] = _parse_section(ctx, raw["require"], f"{prefix}.require", REQUIRE_KEYS,
                                        REQUIRE_ALIASES, REQUIRE_FIELDS)
    if "launch" in raw:
        out["launch"] = _parse_section(ctx, raw["launch"], f"{prefix}.launch", LAUNCH_KEYS,
                                       LAUNCH_ALIASES, LAUNCH_FIELDS)
    if "measure" in raw:
        out["measure"] = _measure.parse_block(ctx, raw["measure"], f"{prefix}.measure")
    return out


def _merge(defaults: Mapping[str, Any], dep: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` under ``dep``: ``require``, ``launch`` and ``launch.env`` key by key, the rest whole."""
    merged = {**defaults, **dep}
    merged["require"] = {**defaults.get("require", {}), **dep.get("require", {})}
    d_launch, p_launch = defaults.get("launch", {}), dep.get("launch", {})
    launch = {**d_launch, **p_launch}
    launch["env"] = {**d_launch.get("env", {}), **p_launch.get("env", {})}
    merged["launch"] = launch
    merged["measure"] = _measure.merge(defaults.get("measure", {}), dep.get("measure", {}))
    return merged


def _is_path_like(model: str, base_dir: Path) -> bool:
    if model in (".", "..") or model.startswith(("./", "../", "/", "~")):
        return True
    try:
        return (base_dir / model).exists() or (base_dir / model).is_symlink()  # a looping link is a path
    except OSError:  # e.g. a name too long for the filesystem: a catalog id, not a path
        return False


def _resolve_model(model: str, base_dir: Path) -> str:
    if not _is_path_like(model, base_dir):
        return model
    path = Path(model).expanduser()
    return str(_absolute(path if path.is_absolute() else base_dir / path))


#: The same KV dtype as the other engine spells it (SGLang has no plain ``fp8`` nor ``float16``).
_KV_DTYPE_SPELLINGS = {"fp8": "fp8_e4m3", "bf16": "bfloat16", "fp16": "float16"}


def _build(ctx: Ctx, name: str, fields: dict[str, Any], prefix: str, base_dir: Path,
           manifest_path: Path, inherited: frozenset[str] = frozenset()) -> Deployment:
    """Cross-field checks on the merged deployment, then the frozen :class:`Deployment`.

    ``inherited`` names the top-level keys that came from ``defaults``: an error about them says
    so, since the line to fix is not under the deployment the error names.
    """
    if "model" not in fields:
        ctx.fail(f"{prefix}.model", "missing: every deployment needs a model (a directory holding "
                                    "config.json, a config.json, or a catalog id like 'Qwen/Qwen3-8B')")
    llamacpp = _llamacpp.build_flags(ctx, fields, prefix, inherited)
    if llamacpp is not None:
        _launch_args.check_launch_args(ctx, "llamacpp", fields["launch"].get("args", ()), prefix,
                                       owners=LLAMACPP_OWNERS, launcher=LLAMACPP_LAUNCHER, dummy=False)
    tp = fields.get("tensor_parallel_size", 1)
    pp = fields.get("pipeline_parallel_size", 1)
    dp = fields.get("data_parallel_size", 1)
    gpus = fields.get("gpus")
    if gpus is not None and len(gpus) != tp * pp * dp and llamacpp is None:
        n = tp * pp * dp
        plural = "GPU" if len(gpus) == 1 else "GPUs"
        ctx.fail(f"{prefix}.gpus",
                 f"gpus lists {len(gpus)} {plural} but tensor_parallel_size x pipeline_parallel_size x "
                 f"data_parallel_size = {n} ({tp} x {pp} x {dp}); list exactly {n}, "
                 f"or leave gpus out to use the first {n} visible"
                 + (" (gpus is set in defaults)" if "gpus" in inherited else ""))

    engine = fields.get("engine", "vllm")
    dtype = fields.get("kv_cache_dtype", "auto")
    accepted = ENGINE_KV_CACHE_DTYPES.get(engine, ())
    if accepted and dtype not in accepted:
        same = _KV_DTYPE_SPELLINGS.get(dtype)
        hint = f": did you mean {same!r}?" if same in accepted else did_you_mean(dtype, accepted)
        ctx.fail(f"{prefix}.kv_cache_dtype",
                 f"{dtype!r} is not a {engine} --kv-cache-dtype{hint} "
                 f"({engine} accepts: {', '.join(accepted)})"
                 + (" (kv_cache_dtype is set in defaults)" if "kv_cache_dtype" in inherited else ""))

    launch_fields = fields["launch"]
    args = launch_fields.get("args", ())
    dummy = launch_fields.get("dummy_weights", True)
    if llamacpp is None:
        _launch_args.check_launch_args(ctx, engine, args, prefix, owners=ARG_OWNERS, launcher=ARG_LAUNCHER,
                                       dummy=dummy)

    require = Require(**fields["require"])
    launch = Launch(**{**launch_fields, "env": MappingProxyType(dict(launch_fields["env"]))})
    measure = _measure.build(ctx, fields.get("measure", {}), prefix, base_dir)
    scalars = {k: v for k, v in fields.items() if k not in (*SECTIONS, *_llamacpp.KEYS)}
    scalars["model"] = _resolve_model(scalars["model"], base_dir)
    return Deployment(name=name, require=require, launch=launch, base_dir=base_dir,
                      manifest_path=manifest_path, llamacpp=llamacpp, measure=measure, **scalars)
