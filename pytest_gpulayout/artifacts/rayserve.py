"""Ray Serve LLM: an ``LLMConfig`` (``model_loading_config``, ``engine_kwargs``, ``accelerator_type``,
``runtime_env``) as a Serve config's application arguments (``args.llm_configs`` of ``build_openai_app``, each
a mapping or a file beside the config; ``args.llm_config`` of ``build_llm_deployment``), a bare LLMConfig file,
or a KubeRay RayService's ``serveConfigV2`` (``kuberay.py``).

Ray hands ``engine_kwargs`` to vLLM as dataclass fields, never as command-line flags
(``ray/llm/_internal/serve/engines/vllm/vllm_models.py``, ``VLLMEngineConfig.from_llm_config`` and
``get_initialization_kwargs``): each key must be a field of the release's ``FrontendArgs`` or
``AsyncEngineArgs`` (``ValueError: Unknown engine argument: KEY``; the fields by release are
``engines/vllm/fields/releases.json``, from ``tools/engine_fields.py``), ``model`` and ``served_model_name``
are refused (the model is ``model_loading_config.model_source``, else its ``model_id``), and the executor is
Ray's (``distributed_executor_backend`` other than ``ray`` is refused). The values are the YAML's, unconverted,
on top of the release's defaults: a ``device: auto`` is the field ``device``, not an ambiguous ``--device``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from packaging.version import Version

from pytest_gpulayout.artifacts.commands import Invocation
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.inputs.engine_args import ResolvedArgs

#: what Ray Serve LLM starts: vLLM's engine (``ray.serve.llm``'s default ``llm_engine``)
ENGINE = "vllm"
VIA = "the Ray Serve LLM engine_kwargs"
ENTRY = "ray.serve.llm LLMServer"
FIELDS_FILE = Path(__file__).resolve().parents[1] / "engines" / "vllm" / "fields" / "releases.json"
#: the keys Ray itself refuses in ``engine_kwargs`` (``get_initialization_kwargs``)
_MODEL_KEYS = ("model", "served_model_name")


@cache
def _releases() -> tuple[tuple[Version, frozenset[str]], ...]:
    data = json.loads(FIELDS_FILE.read_text())
    out: list[tuple[Version, frozenset[str]]] = []
    now: set[str] = set()
    for rec in data["releases"]:
        now = set(rec["fields"]) if "fields" in rec else (now | set(rec.get("add", ()))) - set(rec.get("drop", ()))
        out.append((Version(rec["version"]), frozenset(now)))
    return tuple(out)


def fields_of(version: Version | None) -> tuple[str, frozenset[str]]:
    """``(release, the dataclass fields it takes)``: the newest release at or below ``version``."""
    releases = _releases()
    chosen = releases[-1] if version is None else next(
        (r for r in reversed(releases) if r[0] <= version), releases[0])
    return str(chosen[0]), chosen[1]


def kwargs_args(kwargs: Mapping[str, Any], model: str, version: Version | None) -> ResolvedArgs:
    """``engine_kwargs`` as vLLM ``version`` receives them from Ray: the release's defaults (its parser's, for
    an empty line) under the fields given, and Ray's refusal of a field the release does not have."""
    engine = get_engine(ENGINE)
    defaults = engine.cli.resolve_args([], version)
    release, fields = fields_of(version)
    errors: list[str] = []
    for key in kwargs:
        if key in _MODEL_KEYS:
            errors.append("ValueError: model or served_model_name is not allowed in engine_kwargs when using Ray "
                          "Serve LLM. Please use `model_loading_config` in LLMConfig instead.")
            break
        if key not in fields:
            errors.append(f"ValueError: Unknown engine argument: {key}")
            break
    backend = kwargs.get("distributed_executor_backend", "ray")
    if not errors and backend != "ray":
        errors.append("ValueError: distributed_executor_backend != 'ray' is not allowed in engine_kwargs when using "
                      "Ray Serve LLM Configs.")
    values = {**defaults.values, **kwargs, "model": model, "distributed_executor_backend": "ray"}
    given = frozenset({*kwargs, "model", "distributed_executor_backend"})
    note = defaults.release_note or ("" if release == defaults.release else
                                     f"engine_kwargs judged against vLLM {release}'s fields")
    return ResolvedArgs(engine=ENGINE, release=defaults.release, values=MappingProxyType(values), given=given,
                        errors=tuple(errors), release_note=note, args=(), dests=defaults.dests)


def _model(cfg: Mapping[str, Any]) -> str:
    loading = cfg.get("model_loading_config") or {}
    source = loading.get("model_source") if isinstance(loading, Mapping) else None
    if isinstance(source, Mapping):  # a cloud mirror: the bucket it names
        source = source.get("bucket_uri")
    return str(source or (loading.get("model_id") if isinstance(loading, Mapping) else "") or "")


def is_llm_config(doc: object) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("model_loading_config"), Mapping)


def llm_configs(config: Mapping[str, Any], base: Path | None) -> list[tuple[str, Mapping[str, Any]]]:
    """``(where, LLMConfig)`` of each application's ``llm_configs`` (a file among them read from ``base``, the
    config's folder) and ``llm_config``; a bare LLMConfig is itself."""
    if is_llm_config(config):
        return [("", config)]
    out: list[tuple[str, Mapping[str, Any]]] = []
    for app in config.get("applications") or []:
        if not isinstance(app, Mapping):
            continue
        name = app.get("name", "app")
        args = app.get("args") or {}
        if not isinstance(args, Mapping):
            continue
        items = list(args.get("llm_configs") or []) + ([args["llm_config"]] if args.get("llm_config") else [])
        for i, item in enumerate(items):
            where = f"applications[{name}]" + (f".llm_configs[{i}]" if len(items) > 1 else "")
            if isinstance(item, str) and base is not None:
                cfg = _file(base, item)
                if cfg is not None:
                    out.append((f"{where}:{item}", cfg))
            elif is_llm_config(item):
                out.append((where, item))
    return out


def _file(base: Path, name: str) -> Mapping[str, Any] | None:
    path = (base / name).resolve()
    if base.resolve() not in path.parents or not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return doc if is_llm_config(doc) else None


def invocation(cfg: Mapping[str, Any], source: str, env: Mapping[str, str] | None = None) -> Invocation:
    """One LLMConfig as an engine invocation whose arguments are fields (``Invocation.fields``)."""
    kwargs = dict(cfg.get("engine_kwargs") or {})
    runtime = cfg.get("runtime_env") or {}
    variables = {str(k): str(v) for k, v in ((runtime.get("env_vars") or {}) if isinstance(runtime, Mapping)
                                              else {}).items()}
    model = _model(cfg)

    def fields(version: Version | None) -> ResolvedArgs:
        return kwargs_args(kwargs, model, version)

    return Invocation(ENGINE, (), ENTRY, source, MappingProxyType({**(env or {}), **variables}), fields=fields,
                      via=VIA)


def find(config: Mapping[str, Any], where: str, base: Path | None, env: Mapping[str, str] | None = None
         ) -> list[Invocation]:
    return [invocation(cfg, f"{where}/{name}" if name else where, env) for name, cfg in llm_configs(config, base)]


@dataclass(frozen=True)
class RayServeReader:
    kind: str = "Ray Serve LLM config (applications[].args.llm_configs, engine_kwargs)"

    def read(self, artifact: Artifact) -> Read:
        docs: Sequence[Mapping[str, Any]] = [d for d in artifact.mappings() if "kind" not in d]
        found = [inv for d in docs for inv in find(d, artifact.path.name, artifact.path.parent)]
        return Read(tuple((i, None) for i in found), ("Ray Serve LLM config",) if found else ())


READER = RayServeReader()
