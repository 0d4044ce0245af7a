"""KServe's InferenceService, ServingRuntime / ClusterServingRuntime and LLMInferenceService.

* ``InferenceService``: the predictor's own ``containers``, or its ``model`` (``args``, ``env``, ``resources``)
  run by the runtime it names (a ServingRuntime in the same file: its command with ``$@`` standing for the
  model's args and ``${MODEL}`` / ``${MODEL_ID}`` / ``${MODEL_DIR}`` for the model), or by KServe's Hugging Face
  server, which serves LLMs with vLLM's engine arguments (``--model_id`` is its model; ``TENSOR_PARALLEL_SIZE``
  and ``PIPELINE_PARALLEL_SIZE`` or ``workerSpec.tensorParallelSize`` / ``pipelineParallelSize`` its layout, the
  environment first). ``workerSpec`` makes it multi-node: head + workers, one pod per pipeline stage, each
  with TP GPUs (the controller sets ``nvidia.com/gpu`` to the TP size where the spec does not).
* ``LLMInferenceService``: the controller runs ``vllm serve`` (``config/llmisvc``) with the model and
  ``spec.parallelism`` (``tensor``, ``data``, ``dataLocal``, ``pipeline``, ``expert``) plus the main
  container's ``args``; a ``worker`` spec makes a LeaderWorkerSet of ``data / dataLocal`` (or ``pipeline``)
  pods."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv
from pytest_gpulayout.artifacts.kubernetes import argv_of, containers, env_of, gpus_of, is_kubernetes, pod_info
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.origin import Pod

KINDS = ("InferenceService", "ServingRuntime", "ClusterServingRuntime", "LLMInferenceService")
#: what KServe's Hugging Face server and the LLMInferenceService controller start: vLLM's server
_VLLM_ENTRY = ("python3", "-m", "vllm.entrypoints.openai.api_server")
#: the Hugging Face server's own flags (``huggingfaceserver/__main__.py``), not vLLM's
_HF_OWN = ("--model_name", "--model_dir", "--backend", "--task", "--disable_lower_case", "--disable_special_tokens",
           "--return_token_type_ids", "--return_probabilities", "--max_length", "--tensor_input_names",
           "--return_raw_logits", "--http_port", "--grpc_port", "--workers", "--predictor_host", "--model_revision",
           "--tokenizer_revision", "--disable_log_requests", "--enable_docs_url")
_MODEL_VARS = ("${MODEL}", "$MODEL", "${MODEL_ID}", "$MODEL_ID", "${MODEL_DIR}", "$MODEL_DIR")


def _name(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name', '?')}"


def _model_of_uri(uri: str) -> str:
    return uri.removeprefix("hf://") if uri.startswith("hf://") else uri


def _hf_args(args: Sequence[str], env: Mapping[str, str], worker: Mapping[str, Any], uri: str) -> list[str]:
    """KServe's Hugging Face server's arguments as the vLLM engine arguments it passes on."""
    out: list[str] = []
    model = ""
    it = iter(args)
    for a in it:
        flag, eq, value = a.partition("=")
        if flag in ("--model_id", "--model-id"):
            model = value if eq else str(next(it, ""))
        elif flag in _HF_OWN:
            if not eq and flag not in ("--disable_lower_case", "--disable_special_tokens", "--return_token_type_ids",
                                       "--return_probabilities", "--return_raw_logits", "--disable_log_requests",
                                       "--enable_docs_url"):
                next(it, None)
        else:
            out.append(a)
    model = model or _model_of_uri(uri)
    layout = [("TENSOR_PARALLEL_SIZE", "tensorParallelSize", "--tensor-parallel-size"),
              ("PIPELINE_PARALLEL_SIZE", "pipelineParallelSize", "--pipeline-parallel-size")]
    for var, key, flag in layout:
        size = env.get(var) or (worker.get(key) if worker else None)
        if size is not None:
            out += [flag, str(size)]
    return ["--model", model, *out] if model else out


def _runtime_argv(runtime: Mapping[str, Any], args: Sequence[str], model: str) -> tuple[list[str], Mapping[str, Any]]:
    """A ServingRuntime's first container's command with the InferenceService's args and model put in."""
    rt = next(iter(containers(runtime.get("spec") or {})), {})
    argv = argv_of(rt)
    joined = " ".join(shlex.quote(a) for a in args)
    filled = []
    for a in argv:
        for var in _MODEL_VARS:
            a = a.replace(var, model)
        filled.append(a.replace('"$@"', joined).replace("$@", joined))
    if not any("$@" in a for a in argv):
        filled += list(args)
    return filled, rt


def _isvc(doc: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]]) -> list[tuple[Invocation, Pod]]:
    obj = _name(doc)
    pred = (doc.get("spec") or {}).get("predictor") or {}
    out: list[tuple[Invocation, Pod]] = []
    for c in containers(pred):
        info = pod_info(obj, "spec.predictor", pred, c)
        out += [(i, info) for i in find_in_argv(argv_of(c), f"{obj}/{c.get('name', '?')}", env_of(c),
                                                str(c.get("image", "")))]
    model = pred.get("model")
    if not isinstance(model, Mapping):
        return out
    worker = pred.get("workerSpec") if isinstance(pred.get("workerSpec"), Mapping) else {}
    env = env_of(model)
    args = [str(a) for a in model.get("args") or []]
    uri = str(model.get("storageUri", ""))
    fmt = str((model.get("modelFormat") or {}).get("name", "")).lower()
    runtime = runtimes.get(str(model.get("runtime", ""))) or next(
        (r for r in runtimes.values() if fmt and any(str(f.get("name", "")).lower() == fmt for f in
                                                     (r.get("spec") or {}).get("supportedModelFormats") or [])), None)
    source = f"{obj}/predictor"
    if model.get("command") or model.get("image"):
        invs = find_in_argv(argv_of(model), source, env, str(model.get("image", "")))
    elif runtime is not None:
        argv, rt = _runtime_argv(runtime, args, _model_of_uri(uri))
        invs = find_in_argv(argv, source, {**env_of(rt), **env}, str(rt.get("image", "")))
    elif fmt == "huggingface":
        invs = find_in_argv([*_VLLM_ENTRY, *_hf_args(args, env, worker or {}, uri)], source, env)
    else:
        invs = []
    group: dict[str, Any] = {}
    gpus = gpus_of(model.get("resources"))
    if worker:
        nodes = int(env.get("PIPELINE_PARALLEL_SIZE") or worker.get("pipelineParallelSize")
                    or int(worker.get("size", 1) or 1) + 1)
        tp = env.get("TENSOR_PARALLEL_SIZE") or worker.get("tensorParallelSize") or 1
        group = {"group_size": nodes, "group_field": "spec.predictor.workerSpec.size", "group_is_world": True}
        gpus = gpus if gpus is not None else int(tp)  # the controller sets nvidia.com/gpu to the TP size
    info = pod_info(obj, "spec.predictor.model", {}, {**model, "name": "model"}, gpus=gpus,
                    gpus_field="spec.predictor.model.resources.limits.nvidia.com/gpu", **group)
    return out + [(i, info) for i in invs]


def _additional_args(text: str) -> list[str]:
    """The main container's ``VLLM_ADDITIONAL_ARGS``: the controller's serving template ends its ``vllm serve``
    line with ``${VLLM_ADDITIONAL_ARGS} $@`` (run through ``eval``), the documented place for engine flags
    (KServe's own samples put ``--max-model-len`` and ``--gpu-memory-utilization`` there, e.g.
    ``docs/samples/llmisvc/speculative-decoding/llm-inference-service-A100-draft-target.yaml``). Split as the
    shell splits it; text the shell could not split is left to the config check as one word."""
    try:
        return shlex.split(text)
    except ValueError:
        return [text] if text.strip() else []


def _speculative(spec: Mapping[str, Any]) -> list[str]:
    """``spec.speculativeDecoding``: the controller serves a draft model beside the target (its weights and KV on
    the same GPUs), which vLLM takes as ``--speculative-config``. Passed on so the pool prediction counts the draft
    (``engines/vllm/specmem.py``), or names it as not counted where it cannot be read, rather than predicting the
    target alone."""
    sd = spec.get("speculativeDecoding")
    if not isinstance(sd, Mapping):
        return []
    config: dict[str, Any] = {}
    if sd.get("method"):
        config["method"] = str(sd["method"])
    if sd.get("numSpeculativeTokens") is not None:
        config["num_speculative_tokens"] = sd["numSpeculativeTokens"]
    draft = sd.get("speculator")
    draft_model = draft.get("model") if isinstance(draft, Mapping) else None
    uri = str(draft_model.get("uri", "")) if isinstance(draft_model, Mapping) else ""
    if uri:
        config["model"] = _model_of_uri(uri)
    return ["--speculative-config", json.dumps(config)] if config else []


def _llmisvc(doc: Mapping[str, Any]) -> list[tuple[Invocation, Pod]]:
    obj = _name(doc)
    spec = doc.get("spec") or {}
    model = spec.get("model") or {}
    name = str(model.get("name") or _model_of_uri(str(model.get("uri", ""))))
    par = spec.get("parallelism") or {}
    flags = [("tensor", "--tensor-parallel-size"), ("pipeline", "--pipeline-parallel-size"),
             ("data", "--data-parallel-size"), ("dataLocal", "--data-parallel-size-local")]
    layout: list[str] = []
    for key, flag in flags:
        if par.get(key) is not None:
            layout += [flag, str(par[key])]
    if par.get("expert"):
        layout.append("--enable-expert-parallel")
    template = spec.get("template") or {}
    worker = spec.get("worker") if isinstance(spec.get("worker"), Mapping) else None
    group: dict[str, Any] = {}
    if worker is not None:
        data, local = int(par.get("data", 1) or 1), int(par.get("dataLocal", 1) or 1)
        size = int(par.get("pipeline") or 0) or max(1, data // max(local, 1))
        group = {"group_size": size, "group_field": "spec.parallelism", "group_is_world": True}
    main = next((c for c in containers(template) if c.get("name") == "main"), None) or \
        next(iter(containers(template)), {"name": "main"})
    args = [str(a) for a in main.get("args") or []]
    env = env_of(main)
    extra = _additional_args(env.get("VLLM_ADDITIONAL_ARGS", ""))
    info = pod_info(obj, "spec.template", template, main, **group)
    invs = find_in_argv([*_VLLM_ENTRY, "--model", name, *layout, *args, *extra, *_speculative(spec)],
                        f"{obj}/{main.get('name', 'main')}", env)
    return [(i, info) for i in invs]


def find(docs: Sequence[Mapping[str, Any]]) -> list[tuple[Invocation, Pod]]:
    """The engine invocations of the KServe objects among ``docs``."""
    runtimes = {str((d.get("metadata") or {}).get("name", "")): d for d in docs
                if d.get("kind") in ("ServingRuntime", "ClusterServingRuntime")}
    out: list[tuple[Invocation, Pod]] = []
    for d in docs:
        if d.get("kind") == "InferenceService":
            out += _isvc(d, runtimes)
        elif d.get("kind") == "LLMInferenceService":
            out += _llmisvc(d)
    return out


@dataclass(frozen=True)
class KServeReader:
    kind: str = "InferenceService, ServingRuntime, LLMInferenceService"

    def read(self, artifact: Artifact) -> Read:
        return Read(tuple(find([d for d in artifact.mappings() if is_kubernetes(d)])))


READER = KServeReader()
