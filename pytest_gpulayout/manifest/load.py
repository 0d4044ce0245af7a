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

import difflib
import math
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from pytest_gpulayout.deployment import ENGINE_KV_CACHE_DTYPES, ENGINES, KV_CACHE_DTYPES, Deployment, Launch, Require
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_found
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.machine.facts import normalize_link
from pytest_gpulayout.manifest import llamacpp as _llamacpp

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "Manifest",
    "find_manifest",
    "load_manifest",
    "parse_manifest",
]

MANIFEST_NAME = "gpulayout.yaml"
MANIFEST_VERSION = 1

TOP_KEYS = ("version", "machine", "defaults", "deployments")
DEPLOYMENT_KEYS = (
    "model", "engine", "gpus",
    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "max_model_len", "memory_fraction", "kv_cache_dtype", "engine_version",
    "enable_expert_parallel", "require", "launch",
    *_llamacpp.KEYS,  # engine: llamacpp (manifest/llamacpp.py)
)
REQUIRE_KEYS = ("kv_tokens", "concurrency", "tp_links", "balance_headroom_gib")
LAUNCH_KEYS = ("enabled", "command", "args", "env", "timeout_s", "dummy_weights")

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UUID_RE = re.compile(r"(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_TEXT_RE = re.compile(r"[+-]?\d+")
_FLOAT_TEXT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

_MEMORY_NOTE = "(it maps to vLLM --gpu-memory-utilization and SGLang --mem-fraction-static)"
_LEN_NOTE = "(it maps to vLLM --max-model-len and SGLang --context-length)"
_TP_NOTE = "(it maps to vLLM --tensor-parallel-size and SGLang --tp-size)"
_PP_NOTE = "(it maps to vLLM --pipeline-parallel-size and SGLang --pp-size)"
_DP_NOTE = "(it maps to vLLM --data-parallel-size and SGLang --dp-size)"
_EP_NOTE = "(it maps to vLLM --enable-expert-parallel and SGLang --ep-size equal to the TP size)"
_DUMMY_NOTE = "(true passes --load-format dummy: the same pool, no weights read from disk)"

# Spellings people carry over from engine flags or other tools, keyed by their normalized form
# (lower case, '-' -> '_'): canonical key (dotted from the section) and a note on what it maps to.
_DEPLOYMENT_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        ("tp", "tp_size", "tensor_parallel", "tensor_parallelism", "tensor_parallel_degree"),
        ("tensor_parallel_size", _TP_NOTE),
    ),
    **dict.fromkeys(
        ("pp", "pp_size", "pipeline_parallel", "pipeline_parallelism", "pipeline_parallel_degree"),
        ("pipeline_parallel_size", _PP_NOTE),
    ),
    **dict.fromkeys(
        ("dp", "dp_size", "data_parallel", "data_parallelism", "data_parallel_degree"),
        ("data_parallel_size", _DP_NOTE),
    ),
    **dict.fromkeys(
        ("gpu_memory_utilization", "gpu_mem_util", "gpu_memory_util", "memory_utilization",
         "mem_fraction_static", "mem_fraction", "gpu_memory_fraction", "mem_frac"),
        ("memory_fraction", _MEMORY_NOTE),
    ),
    **dict.fromkeys(
        ("context_length", "context_len", "max_context_length", "max_context_len", "max_seq_len",
         "max_seq_length", "max_sequence_length", "seq_len", "max_len", "max_tokens"),
        ("max_model_len", _LEN_NOTE),
    ),
    **dict.fromkeys(
        ("model_path", "model_name", "model_id", "model_dir", "path"),
        ("model", "(a directory holding config.json, a config.json, or a catalog id like 'Qwen/Qwen3-8B')"),
    ),
    **dict.fromkeys(("kv_dtype", "cache_dtype", "kv_cache_type"), ("kv_cache_dtype", "")),
    **dict.fromkeys(
        ("ep", "ep_size", "expert_parallel", "enable_ep", "enable_ep_moe", "expert_parallel_size"),
        ("enable_expert_parallel", _EP_NOTE),
    ),
    **dict.fromkeys(
        ("devices", "device_ids", "gpu_ids", "gpu", "cuda_visible_devices", "gpu_indices"),
        ("gpus", "(CUDA indices or GPU UUIDs, as a list)"),
    ),
    **dict.fromkeys(
        ("version", "vllm_version", "sglang_version", "engine_ver"),
        ("engine_version", "(pins the engine's defaults where the engine is not installed)"),
    ),
    **dict.fromkeys(("backend", "framework", "server", "runtime"), ("engine", "(vllm or sglang)")),
    **dict.fromkeys(("requires", "requirements", "expect", "expects"), ("require", "")),
    **dict.fromkeys(("launcher", "startup", "run"), ("launch", "")),
    # keys that belong one level down
    **{k: (f"require.{k}", "") for k in REQUIRE_KEYS},
    **{k: (f"launch.{k}", "") for k in LAUNCH_KEYS},
    **dict.fromkeys(("load_format", "dummy", "dummy_load"), ("launch.dummy_weights", _DUMMY_NOTE)),
    "max_concurrency": ("require.concurrency", ""),
    "timeout": ("launch.timeout_s", ""),
    "extra_args": ("launch.args", ""),
    **_llamacpp.ALIASES,
}
_REQUIRE_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        ("tokens", "kv_cache_tokens", "min_kv_tokens", "kv_pool_tokens", "kv_pool", "num_tokens"),
        ("kv_tokens", "(the KV pool must hold at least this many tokens)"),
    ),
    **dict.fromkeys(
        ("max_concurrency", "users", "concurrent_requests", "max_users", "requests"),
        ("concurrency", "(this many full-length max_model_len requests must fit in the KV pool)"),
    ),
    **dict.fromkeys(("links", "allowed_links", "tp_link", "link", "link_kinds"), ("tp_links", "")),
    **dict.fromkeys(
        ("headroom_gib", "headroom", "balance_headroom", "balance_margin_gib"),
        ("balance_headroom_gib", ""),
    ),
}
_LAUNCH_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("cmd", "argv", "entrypoint", "entry_point", "executable", "program"), ("command", "")),
    **dict.fromkeys(
        ("extra_args", "flags", "engine_args", "arguments", "extra_flags", "argument"), ("args", ""),
    ),
    **dict.fromkeys(("environment", "environ", "env_vars", "envs", "variables"), ("env", "")),
    **dict.fromkeys(("timeout", "timeout_seconds", "startup_timeout", "timeout_sec"), ("timeout_s", "")),
    **dict.fromkeys(("load_format", "dummy", "dummy_load", "dummy_weight"), ("dummy_weights", _DUMMY_NOTE)),
    **dict.fromkeys(("enable", "on", "active"), ("enabled", "")),
}
_TOP_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("deployment", "models", "services", "layouts", "serving"), ("deployments", "")),
    **dict.fromkeys(("machines", "hardware", "snapshot", "topo", "preset", "host"), ("machine", "")),
    **dict.fromkeys(("default", "common", "base"), ("defaults", "")),
    **dict.fromkeys(("manifest_version", "schema_version"), ("version", "")),
}

# Engine flags that a manifest key already controls: passing them again in launch.args would make
# the engine run a different layout from the one the static checks judged.
_ARG_OWNERS: dict[str, str] = {
    **dict.fromkeys(("--tensor-parallel-size", "-tp", "--tp-size", "--tp"), "tensor_parallel_size"),
    **dict.fromkeys(("--pipeline-parallel-size", "-pp", "--pp-size", "--pp"), "pipeline_parallel_size"),
    **dict.fromkeys(("--data-parallel-size", "-dp", "--dp-size", "--dp"), "data_parallel_size"),
    **dict.fromkeys(("--gpu-memory-utilization", "--mem-fraction-static"), "memory_fraction"),
    **dict.fromkeys(("--max-model-len", "--context-length"), "max_model_len"),
    "--kv-cache-dtype": "kv_cache_dtype",
    **dict.fromkeys(("--enable-expert-parallel", "-ep"), "enable_expert_parallel"),
}
_ARG_LAUNCHER = ("--host", "--port")

_NV_FAMILY = {"NV", "NVLINK", "NVSWITCH", "NVL"}


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
            f"no deployment named {_show(name)}{_did_you_mean(name, self.names)}"
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
    data = _load_yaml(text, where)
    return parse_manifest(data, path=p, where=where)


def parse_manifest(data: object, *, path: Path, where: str | None = None) -> Manifest:
    """Validate already-loaded YAML ``data`` as if it were read from ``path``.

    ``path`` sets the directory relative paths resolve against; ``where`` is how errors name the
    file (default: ``path``).
    """
    ctx = _Ctx(str(path) if where is None else where)
    manifest_path = _absolute(Path(path).expanduser())
    base_dir = manifest_path.parent

    if data is None:
        ctx.fail("", "the manifest is empty; it needs at least 'version: 1' and a 'deployments' mapping")
    if not isinstance(data, Mapping):
        ctx.fail("", f"the manifest must be a mapping with keys {', '.join(TOP_KEYS)}, not {_describe(data)}")
    _check_keys(ctx, data, TOP_KEYS, _TOP_ALIASES, "", section="top")

    if "version" not in data:
        ctx.fail("version", f"missing: write 'version: {MANIFEST_VERSION}' at the top of the manifest")
    version = data["version"]
    if isinstance(version, str) and version.strip() == str(MANIFEST_VERSION):
        ctx.fail("version", f"must be the number {MANIFEST_VERSION}, not the string {_show(version)}: "
                            f"write {MANIFEST_VERSION} without quotes")
    if type(version) is not int:
        ctx.fail("version", f"must be the number {MANIFEST_VERSION}, not {_describe(version)}")
    if version != MANIFEST_VERSION:
        ctx.fail("version", f"unsupported manifest version {version}; "
                            f"this pytest-gpulayout reads version {MANIFEST_VERSION}")

    machine = _parse_machine(ctx, data.get("machine", "auto"))

    defaults_raw = data.get("defaults")
    if defaults_raw is None:
        defaults_raw = {}
    if not isinstance(defaults_raw, Mapping):
        ctx.fail("defaults", f"must be a mapping of deployment keys, not {_describe(defaults_raw)}")
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
        ctx.fail("deployments", f"must be a mapping of name -> deployment, not {_describe(raw_deps)}")

    deployments = []
    for name, raw in raw_deps.items():
        _check_name(ctx, name)
        prefix = f"deployments.{name}"
        if raw is None:
            ctx.fail(prefix, "is empty: a deployment needs at least 'model'")
        if not isinstance(raw, Mapping):
            ctx.fail(prefix, f"must be a mapping of deployment keys, not {_describe(raw)}")
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
    from packaging.version import InvalidVersion, Version

    from pytest_gpulayout.engines.versions import LATEST_KNOWN

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


# ------------------------------------------------------------------------------------------------
# YAML
# ------------------------------------------------------------------------------------------------
class _DuplicateKey(Exception):
    def __init__(self, dotted: str, key: str, line: int, first_line: int):
        super().__init__(dotted)
        self.dotted, self.key, self.line, self.first_line = dotted, key, line, first_line


def _check_duplicates(node: Any, path: str = "", seen_nodes: set[int] | None = None) -> None:
    """Refuse two equal keys in one mapping, naming the dotted key and both lines.

    Plain YAML keeps the last of two equal keys, so two deployments pasted under one name would
    silently become one (and the first would never be checked). This walks the composed node tree,
    before construction, where the line numbers still exist.
    """
    import yaml

    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:  # an alias to a node already walked (anchors may recurse)
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_line: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *base' keys are meant to be overridden
                continue
            if isinstance(key_node, yaml.ScalarNode):
                ident = (key_node.tag, key_node.value)
                dotted = f"{path}.{key_node.value}" if path else key_node.value
                line = key_node.start_mark.line + 1
                if ident in first_line:
                    raise _DuplicateKey(dotted, key_node.value, line, first_line[ident])
                first_line[ident] = line
            else:
                dotted = path
            _check_duplicates(value_node, dotted, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{i}]", seen_nodes)


def _load_yaml(text: str, where: str) -> object:
    """``yaml.safe_load`` plus the duplicate-key check; every YAML problem becomes one line."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicates(node)
        return loader.construct_document(node)
    except _DuplicateKey as err:
        raise InputError(
            f"duplicate key {err.key!r} at line {err.line} (first at line {err.first_line}); "
            "YAML would silently keep only the last one, so rename or remove one",
            where=where, key=err.dotted,
        ) from None
    except yaml.composer.ComposerError as err:
        if err.problem == "but found another document" and err.problem_mark is not None:
            raise InputError(f"only one YAML document is allowed, but a second one starts at line "
                             f"{err.problem_mark.line + 1}; remove the extra '---'", where=where) from None
        raise InputError(_yaml_message(err), where=where) from None
    except yaml.MarkedYAMLError as err:
        raise InputError(_yaml_message(err), where=where) from None
    except yaml.YAMLError as err:
        raise InputError(_one_line(f"invalid YAML: {err}"), where=where) from None
    finally:
        loader.dispose()


def _yaml_message(err: Any) -> str:
    """``invalid YAML at line L, column C: problem (context that starts at line K)``."""
    mark = err.problem_mark or err.context_mark
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = err.problem or err.context or "syntax error"
    context = ""
    if err.context and err.problem:
        context = f" ({err.context}"
        if err.context_mark is not None and mark is not None and err.context_mark.line != mark.line:
            context += f" that starts at line {err.context_mark.line + 1}"
        context += ")"
    return _one_line(f"invalid YAML{at}: {what}{context}")


# ------------------------------------------------------------------------------------------------
# Validation helpers
# ------------------------------------------------------------------------------------------------
class _Ctx:
    def __init__(self, where: str):
        self.where = where

    def fail(self, key: str, message: str) -> NoReturn:
        raise InputError(_one_line(message), where=self.where, key=key or None)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _absolute(path: Path) -> Path:
    """Absolute without resolving symlinks: a Hugging Face cache snapshot's config.json is a
    symlink into blobs/, and following it would lose the directory that holds the weights."""
    return Path(os.path.abspath(path))


def _show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: object) -> str:
    """How a wrong value is named in a message: by its YAML kind, so the fix is obvious."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {_show(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _norm(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_")


def _did_you_mean(word: object, choices: Sequence[str]) -> str:
    if not isinstance(word, str):
        return ""
    close = close_matches(word, choices)
    return f": did you mean {close[0]!r}?" if close else ""


def _check_keys(
    ctx: _Ctx,
    mapping: Mapping[Any, Any],
    known: Sequence[str],
    aliases: Mapping[str, tuple[str, str]],
    prefix: str,
    *,
    section: str,
) -> None:
    for key in mapping:
        if isinstance(key, str) and key in known:
            continue
        dotted = f"{prefix}.{key}" if prefix else str(key)
        ctx.fail(dotted, _unknown_key_message(key, known, aliases, section))


def _unknown_key_message(key: object, known: Sequence[str], aliases: Mapping[str, tuple[str, str]],
                         section: str) -> str:
    head = f"unknown key {_show(key)}"
    expected = f"(expected one of: {', '.join(known)})"
    if not isinstance(key, str):
        return f"{head}: keys must be strings {expected}"
    norm = _norm(key)
    if norm in known:
        return f"{head}: did you mean {norm!r}? (manifest keys are lower case with underscores)"
    if norm in aliases:
        target, note = aliases[norm]
        return f"{head}: did you mean {target!r}?" + (f" {note}" if note else "")
    if section == "top" and (norm in DEPLOYMENT_KEYS or norm in _DEPLOYMENT_ALIASES):
        where = "it belongs inside a deployment: put it under deployments.<name> or under defaults"
        if norm in DEPLOYMENT_KEYS:
            return f"{head}: {where}"
        target, note = _DEPLOYMENT_ALIASES[norm]
        return f"{head}: {where}, and did you mean {target!r}?" + (f" {note}" if note else "")
    candidates = {k: (k, "") for k in known}
    candidates.update(aliases)
    close = difflib.get_close_matches(norm, list(candidates), n=1, cutoff=0.6)
    if close:
        target, note = candidates[close[0]]
        return f"{head}: did you mean {target!r}?" + (f" {note}" if note else "")
    return f"{head} {expected}"


def _int(ctx: _Ctx, value: object, key: str, *, minimum: int) -> int:
    want = f"an integer >= {minimum}"
    if isinstance(value, bool):
        return ctx.fail(key, f"must be {want}, not {_describe(value)} "
                             "(YAML reads true/false/yes/no/on/off as booleans)")
    if isinstance(value, int):
        if value < minimum:
            return ctx.fail(key, f"must be {want}, not {value}")
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return ctx.fail(key, f"must be {want}, not the decimal number {value!r}: write {int(value)}")
        return ctx.fail(key, f"must be {want}, not {_describe(value)}")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if _INT_TEXT_RE.fullmatch(text):
            return ctx.fail(key, f"must be {want}, not the string {_show(value)}: "
                                 f"write {int(text)} without quotes")
        if re.fullmatch(r"\d+(\.\d+)?\s*[kKmM]", text):
            return ctx.fail(key, f"must be {want}, not the string {_show(value)}: write the plain number "
                                 "(e.g. 8192, not 8k)")
    return ctx.fail(key, f"must be {want}, not {_describe(value)}")


def _number(ctx: _Ctx, value: object, key: str, *, what: str) -> float:
    """A finite int or float (YAML ``.inf``/``.nan`` never make sense here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str) and _FLOAT_TEXT_RE.fullmatch(value.strip()):
            return ctx.fail(key, f"must be {what}, not the string {_show(value)}: write {value.strip()} "
                                 "without quotes")
        return ctx.fail(key, f"must be {what}, not {_describe(value)}")
    if not math.isfinite(value):
        return ctx.fail(key, f"must be {what}, not {value!r}")
    return float(value)


def _bool(ctx: _Ctx, value: object, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return ctx.fail(key, f"must be true or false, not the string {_show(value)}: write it without quotes")
    if isinstance(value, int) and value in (0, 1):
        word = "true" if value else "false"
        return ctx.fail(key, f"must be true or false, not the number {value}: write {word}")
    return ctx.fail(key, f"must be true or false, not {_describe(value)}")


def _string(ctx: _Ctx, value: object, key: str, *, what: str = "a string") -> str:
    if not isinstance(value, str):
        return ctx.fail(key, f"must be {what}, not {_describe(value)}")
    if not value.strip():
        return ctx.fail(key, f"must be {what}, not an empty string")
    return value


def _choice(ctx: _Ctx, value: object, key: str, choices: Sequence[str], what: str) -> str:
    if not isinstance(value, str):
        return ctx.fail(key, f"must be one of {', '.join(choices)}, not {_describe(value)}")
    if value in choices:
        return value
    return ctx.fail(key, f"unknown {what} {_show(value)}{_did_you_mean(value, choices)} "
                         f"(expected one of: {', '.join(choices)})")


def _string_list(ctx: _Ctx, value: object, key: str, *, example: str, allow_empty: bool) -> tuple[str, ...]:
    """A YAML list of strings, never a string split by us: splitting would need shell rules, and
    manifest values never pass through a shell."""
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError:
            words = value.split()
        shown = ", ".join(words) if words else example
        return ctx.fail(key, f"must be a list of strings, not the string {_show(value)}: write it as a list: "
                             f"[{shown}] (it is never run through a shell)")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of strings such as [{example}], not {_describe(value)}")
    if not value and not allow_empty:
        return ctx.fail(key, f"must not be empty: write e.g. [{example}], or leave it out for the default")
    out = []
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if isinstance(item, str):
            if not item:
                ctx.fail(item_key, "is an empty string")
            out.append(item)
        elif isinstance(item, (bool, int, float)):
            text = str(item).lower() if isinstance(item, bool) else str(item)
            ctx.fail(item_key, f"must be a string, not {_describe(item)}: quote it: \"{text}\"")
        else:
            ctx.fail(item_key, f"must be a string, not {_describe(item)}")
    return tuple(out)


# ------------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------------
def _parse_machine(ctx: _Ctx, value: object) -> str:
    what = "'auto', a snapshot or topo file path, or 'preset:<name>'"
    if not isinstance(value, str) or not value.strip():
        return ctx.fail("machine", f"must be {what}, not {_describe(value)}")
    if value != "auto" and value.strip().lower() == "auto":
        return ctx.fail("machine", f"unknown machine {_show(value)}: did you mean 'auto'?")
    if value.startswith("preset:") and not value[len("preset:"):].strip():
        return ctx.fail("machine", "'preset:' needs a name, e.g. 'preset:2xL4-pcie'")
    return value


def _check_name(ctx: _Ctx, name: object) -> None:
    if not isinstance(name, str):
        ctx.fail(f"deployments.{name}", f"deployment names must be strings, not {_describe(name)}: "
                                        f"quote it or use a name like 'model-tp2'")
    if not _NAME_RE.fullmatch(name):
        ctx.fail(f"deployments.{name}",
                 f"bad deployment name {_show(name)}: use letters, digits, '.', '_' and '-', "
                 "starting with a letter or digit (it becomes the pytest test id)")


def _opt(parse: Callable[[_Ctx, object, str], object]) -> Callable[[_Ctx, object, str], object]:
    """``null`` allowed: it means the built-in "not set" default (and overrides ``defaults``)."""

    def wrapped(ctx: _Ctx, value: object, key: str) -> object:
        return None if value is None else parse(ctx, value, key)

    return wrapped


def _parse_gpus(ctx: _Ctx, value: object, key: str) -> tuple[int | str, ...]:
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if parts and all(_INT_TEXT_RE.fullmatch(p) for p in parts):
            return ctx.fail(key, f"must be a list, not the string {_show(value)}: write it as a list: "
                                 f"[{', '.join(parts)}]")
    if isinstance(value, int) and not isinstance(value, bool):
        return ctx.fail(key, f"must be a list of CUDA indices or GPU UUIDs, not the number {value}: "
                             f"write [{value}]")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of CUDA indices or GPU UUIDs, not {_describe(value)}")
    if not value:
        return ctx.fail(key, "is empty: list the GPUs, or leave gpus out to use the first tp*pp*dp visible")
    out: list[int | str] = []
    seen: dict[object, int] = {}
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if isinstance(item, bool):
            ctx.fail(item_key, f"must be a CUDA index (an integer >= 0) or a GPU UUID, not {_describe(item)}")
        if isinstance(item, int):
            if item < 0:
                ctx.fail(item_key, f"must be a CUDA index >= 0, not {item}")
            ident: object = item
        elif isinstance(item, str):
            text = item.strip()
            if _INT_TEXT_RE.fullmatch(text):
                ctx.fail(item_key, f"must be a CUDA index or a GPU UUID, not the string {_show(item)}: "
                                   f"write {int(text)} without quotes")
            if not _UUID_RE.fullmatch(text):
                ctx.fail(item_key, f"{_show(item)} is neither a CUDA index nor a GPU UUID "
                                   "(GPU-... or MIG-..., as nvidia-smi -L prints them)")
            item = text
            ident = text.lower()
        else:
            ctx.fail(item_key, f"must be a CUDA index or a GPU UUID, not {_describe(item)}")
        if ident in seen:
            ctx.fail(key, f"lists GPU {item} twice (items {seen[ident]} and {i}); "
                          "each rank needs its own GPU")
        seen[ident] = i
        out.append(item)
    return tuple(out)


def _parse_memory_fraction(ctx: _Ctx, value: object, key: str) -> float:
    what = "a fraction of GPU memory in (0, 1], e.g. 0.9"
    v = _number(ctx, value, key, what=what)
    if not 0 < v <= 1:
        hint = f": for {v:g}% write {v / 100:g}" if 2 <= v <= 100 else ""
        return ctx.fail(key, f"must be {what}, not {v:g}{hint}")
    return v


def _parse_engine_version(ctx: _Ctx, value: object, key: str) -> str:
    from packaging.version import InvalidVersion, Version

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        why = " (YAML reads an unquoted 0.10 as the number 0.1)" if isinstance(value, float) else ""
        return ctx.fail(key, f"must be a quoted version string such as \"0.11.0\", "
                             f"not the number {value!r}{why}")
    text = _string(ctx, value, key, what="a version string such as \"0.11.0\"")
    if re.fullmatch(r"b\d+", text.strip()):
        return text.strip()  # a llama.cpp build tag (b11434)
    try:
        Version(text.strip())
    except InvalidVersion:
        return ctx.fail(key, f"{_show(value)} is not a version number (write e.g. \"0.11.0\")")
    return text.strip()


def _parse_tp_links(ctx: _Ctx, value: object, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return ctx.fail(key, f"must be a list of link kinds, not the string {_show(value)}: "
                             f"write it as a list: [{value}]")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of link kinds such as [NVLink, PIX], not {_describe(value)}")
    if not value:
        return ctx.fail(key, "is empty, which would reject every TP group: list the link kinds to accept, "
                             "or leave tp_links out for the default policy")
    kinds: list[str] = []
    choices = ("NVLink", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if not isinstance(item, str):
            ctx.fail(item_key, f"must be a link kind (NVLink, NV<n>, PIX, PXB, PHB, NODE, SYS, NET), "
                               f"not {_describe(item)}")
        text = item.strip()
        if text.upper() in _NV_FAMILY:
            kind = "NV"
        else:
            try:
                kind = normalize_link(text)
            except ValueError:
                if text.upper() in ("PCIE", "PCI", "PCI-E"):
                    ctx.fail(item_key, f"{_show(item)} is not one link kind: list the PCIe kinds to accept "
                                       "(PIX, PXB, PHB, NODE, SYS)")
                ctx.fail(item_key, f"unknown link kind {_show(item)}{_did_you_mean(text, choices)} "
                                   f"(expected NVLink, NV<n>, PIX, PXB, PHB, NODE, SYS or NET)")
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def _parse_env(ctx: _Ctx, value: object, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return ctx.fail(key, f"must be a mapping of NAME: \"value\", not {_describe(value)}")
    out: dict[str, str] = {}
    for name, val in value.items():
        item_key = f"{key}.{name}"
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            ctx.fail(item_key, f"{_show(name)} is not an environment variable name")
        if name == "CUDA_VISIBLE_DEVICES":
            ctx.fail(item_key, "is set by the launcher from the placement; choose the GPUs with the "
                               "deployment's 'gpus' key so the static checks look at the same GPUs")
        if isinstance(val, str):
            out[name] = val
        elif isinstance(val, (bool, int, float)):
            text = str(val).lower() if isinstance(val, bool) else str(val)
            ctx.fail(item_key, f"must be a string, not {_describe(val)}: quote it: \"{text}\"")
        else:
            ctx.fail(item_key, f"must be a string, not {_describe(val)}")
    return out


def _positive_number(what: str, *, allow_zero: bool) -> Callable[[_Ctx, object, str], float]:
    def parse(ctx: _Ctx, value: object, key: str) -> float:
        v = _number(ctx, value, key, what=what)
        if v < 0 or (v == 0 and not allow_zero):
            return ctx.fail(key, f"must be {what}, not {v:g}")
        return v

    return parse


def _int_at_least(minimum: int) -> Callable[[_Ctx, object, str], int]:
    def parse(ctx: _Ctx, value: object, key: str) -> int:
        return _int(ctx, value, key, minimum=minimum)

    return parse


_Parser = Callable[[_Ctx, object, str], object]

_DEPLOYMENT_FIELDS: dict[str, _Parser] = {
    "model": lambda ctx, v, k: _string(
        ctx, v, k, what="a model directory, a config.json path or a catalog id like 'Qwen/Qwen3-8B'"),
    "engine": lambda ctx, v, k: _choice(ctx, v, k, ENGINES, "engine"),
    "gpus": _opt(_parse_gpus),
    "tensor_parallel_size": _int_at_least(1),
    "pipeline_parallel_size": _int_at_least(1),
    "data_parallel_size": _int_at_least(1),
    "max_model_len": _opt(_int_at_least(1)),
    "memory_fraction": _opt(_parse_memory_fraction),
    "kv_cache_dtype": lambda ctx, v, k: _choice(ctx, v, k, KV_CACHE_DTYPES, "kv_cache_dtype"),
    "engine_version": _opt(_parse_engine_version),
    "enable_expert_parallel": _bool,
    **_llamacpp.FIELDS,
}
_REQUIRE_FIELDS: dict[str, _Parser] = {
    "kv_tokens": _opt(_int_at_least(1)),
    "concurrency": _opt(_int_at_least(1)),
    "tp_links": _opt(_parse_tp_links),
    "balance_headroom_gib": _positive_number("a number of GiB >= 0", allow_zero=True),
}
_LAUNCH_FIELDS: dict[str, _Parser] = {
    "enabled": _bool,
    "command": _opt(lambda ctx, v, k: _string_list(ctx, v, k, example="vllm, serve", allow_empty=False)),
    "args": lambda ctx, v, k: () if v is None else _string_list(
        ctx, v, k, example="--enforce-eager", allow_empty=True),
    "env": _parse_env,
    "timeout_s": _positive_number("a number of seconds > 0", allow_zero=False),
    "dummy_weights": _bool,
}


def _parse_fields(ctx: _Ctx, raw: Mapping[Any, Any], prefix: str,
                  fields: Mapping[str, _Parser]) -> dict[str, Any]:
    return {key: fields[key](ctx, value, f"{prefix}.{key}") for key, value in raw.items()}


def _parse_section(ctx: _Ctx, raw: object, key: str, known: Sequence[str],
                   aliases: Mapping[str, tuple[str, str]], fields: Mapping[str, _Parser]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        return ctx.fail(key, f"must be a mapping with keys {', '.join(known)}, not {_describe(raw)}")
    _check_keys(ctx, raw, known, aliases, key, section=key)
    return _parse_fields(ctx, raw, key, fields)


def _parse_deployment_fields(ctx: _Ctx, raw: Mapping[Any, Any], prefix: str) -> dict[str, Any]:
    """Field-by-field validation of one deployment (or of ``defaults``), before merging.

    Every field is checked where it is written, so an error names ``defaults.engine`` when the bad
    value is in ``defaults``, not each deployment that inherited it.
    """
    _check_keys(ctx, raw, DEPLOYMENT_KEYS, _DEPLOYMENT_ALIASES, prefix, section="deployment")
    out = _parse_fields(ctx, {k: v for k, v in raw.items() if k not in ("require", "launch")},
                        prefix, _DEPLOYMENT_FIELDS)
    if "require" in raw:
        out["require"] = _parse_section(ctx, raw["require"], f"{prefix}.require", REQUIRE_KEYS,
                                        _REQUIRE_ALIASES, _REQUIRE_FIELDS)
    if "launch" in raw:
        out["launch"] = _parse_section(ctx, raw["launch"], f"{prefix}.launch", LAUNCH_KEYS,
                                       _LAUNCH_ALIASES, _LAUNCH_FIELDS)
    return out


def _merge(defaults: Mapping[str, Any], dep: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` under ``dep``: ``require``, ``launch`` and ``launch.env`` key by key, the rest whole."""
    merged = {**defaults, **dep}
    merged["require"] = {**defaults.get("require", {}), **dep.get("require", {})}
    d_launch, p_launch = defaults.get("launch", {}), dep.get("launch", {})
    launch = {**d_launch, **p_launch}
    launch["env"] = {**d_launch.get("env", {}), **p_launch.get("env", {})}
    merged["launch"] = launch
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


def _build(ctx: _Ctx, name: str, fields: dict[str, Any], prefix: str, base_dir: Path,
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
        _llamacpp.check_launch_args(ctx, fields["launch"].get("args", ()), prefix)
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
        hint = f": did you mean {same!r}?" if same in accepted else _did_you_mean(dtype, accepted)
        ctx.fail(f"{prefix}.kv_cache_dtype",
                 f"{dtype!r} is not a {engine} --kv-cache-dtype{hint} "
                 f"({engine} accepts: {', '.join(accepted)})"
                 + (" (kv_cache_dtype is set in defaults)" if "kv_cache_dtype" in inherited else ""))

    launch_fields = fields["launch"]
    args = launch_fields.get("args", ())
    dummy = launch_fields.get("dummy_weights", True)
    for i, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        arg_key = f"{prefix}.launch.args[{i}]"
        if flag in _ARG_OWNERS:
            owner = _ARG_OWNERS[flag]
            ctx.fail(arg_key, f"sets {flag}, which the manifest key '{owner}' controls: set {owner} instead, "
                              "so the static checks judge the layout the engine will run")
        if flag in _ARG_LAUNCHER:
            ctx.fail(arg_key, f"sets {flag}: the launcher listens on 127.0.0.1 only, on a free port it picks")
        if flag == "--load-format" and dummy:
            ctx.fail(arg_key, "sets --load-format, but launch.dummy_weights is true (it passes "
                              "--load-format dummy); set dummy_weights: false to choose the load format")

    require = Require(**fields["require"])
    launch = Launch(**{**launch_fields, "env": MappingProxyType(dict(launch_fields["env"]))})
    scalars = {k: v for k, v in fields.items() if k not in ("require", "launch", *_llamacpp.KEYS)}
    scalars["model"] = _resolve_model(scalars["model"], base_dir)
    return Deployment(name=name, require=require, launch=launch, base_dir=base_dir,
                      manifest_path=manifest_path, llamacpp=llamacpp, **scalars)
