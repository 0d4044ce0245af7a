"""What is checked before any engine starts: a load the engine would refuse, or a generator that
cannot run, is one line naming the manifest, the deployment and the key, within seconds, instead of
every request failing after minutes of launches.

- every request fits the context: a prompt plus its forced output longer than ``max_model_len`` is
  refused by vLLM with a 400 (``input_tokens + output_tokens``, or each request of a trace), read from
  the deployment's ``max_model_len`` or the ``--max-model-len`` / ``--context-length`` it launches
  with; with neither, the engine's own default applies and nothing is claimed here;
- the generator's Python exists (``measure.python``, or the one the deployment launches with);
- the tokenizer is there: ``measure.tokenizer``, or the model's own folder, which must hold one
  (a config-only folder, fine for ``--load-format dummy``, gives ``vllm bench serve`` nothing to
  tokenize with).

The trace itself (its lines, fields and order) is checked when the manifest is read
(``inputs/trace.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.launch.argv import model_path_for
from pytest_gpulayout.measure.generator import generator_python
from pytest_gpulayout.workload import MeasureSpec

#: the files a Hugging Face tokenizer folder holds one of
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "tekken.json")
#: where the context length is set on a command line: vLLM, SGLang
CONTEXT_FLAGS = ("--max-model-len", "--context-length")


def context_length(dep: Deployment) -> tuple[int, str] | None:
    """The context every request must fit, and where it was set; None where the engine's default rules."""
    for i, arg in enumerate(dep.launch.args):
        for flag in CONTEXT_FLAGS:
            value = arg[len(flag) + 1:] if arg.startswith(flag + "=") else (
                dep.launch.args[i + 1] if arg == flag and i + 1 < len(dep.launch.args) else None)
            if value is not None and value.isdigit():
                return int(value), f"{flag} {value} in launch.args"
    if dep.max_model_len is not None:
        return dep.max_model_len, f"max_model_len {dep.max_model_len}"
    return None


def _where(dep: Deployment) -> str:
    return str(dep.manifest_path) if dep.manifest_path is not None else "the measurement"


def check_lengths(dep: Deployment, spec: MeasureSpec) -> None:
    ctx = context_length(dep)
    if ctx is None:
        return
    limit, said = ctx
    key = f"deployments.{dep.name}.measure"
    if spec.trace_requests:
        for n, r in enumerate(spec.trace_requests, start=1):
            if r.input_length + r.output_length > limit:
                raise InputError(f"request {n} of the trace {spec.trace} holds {r.input_length} + {r.output_length} = "
                                 f"{r.input_length + r.output_length} tokens, more than {said}: the engine would "
                                 f"refuse it (400 Bad Request); shorten the trace or raise max_model_len",
                                 where=_where(dep), key=f"{key}.trace")
        return
    if spec.input_tokens + spec.output_tokens > limit:
        raise InputError(f"input_tokens {spec.input_tokens} + output_tokens {spec.output_tokens} = "
                         f"{spec.input_tokens + spec.output_tokens} tokens a request, more than {said}: the engine "
                         f"would refuse every request (400 Bad Request); shorten them or raise max_model_len",
                         where=_where(dep), key=f"{key}.output_tokens")


def check_generator(dep: Deployment, spec: MeasureSpec) -> None:
    python = generator_python(spec, dep.launch.command)
    if os.sep in python and not (Path(python).is_file() and os.access(python, os.X_OK)):
        key = "measure.python" if spec.python else "launch.command"
        raise InputError(f"no Python at {python} to run the load generator (vllm bench serve) with",
                         where=_where(dep), key=f"deployments.{dep.name}.{key}")


def check_tokenizer(dep: Deployment, spec: MeasureSpec) -> None:
    key = f"deployments.{dep.name}.measure.tokenizer"
    if spec.tokenizer is not None:
        if not spec.tokenizer.is_dir():
            raise InputError(f"no tokenizer folder at {spec.tokenizer}", where=_where(dep), key=key)
        return
    folder = Path(model_path_for(dep))
    if folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise InputError(f"the model folder {folder} holds no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...): "
                         f"vllm bench serve needs one to build its prompts; set measure.tokenizer to a folder "
                         f"with the model's tokenizer", where=_where(dep), key=key)


def check_inputs(deployments: Sequence[Deployment]) -> None:
    """Every deployment's load, before the first launch (an :class:`InputError` on the first problem)."""
    for dep in deployments:
        spec = dep.measure or MeasureSpec()
        check_lengths(dep, spec)
        check_generator(dep, spec)
        check_tokenizer(dep, spec)
