"""The ``plan --engine llamacpp`` branch of ``commands/plan.py``: flags mapped, output printed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.llamacpp.plan import format_llamacpp_plan, plan_json, plan_llamacpp
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Finding
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.gguf import GgufSpec
from pytest_gpulayout.model.spec import ModelSpec


def run_llamacpp_plan(args: argparse.Namespace, model: ModelSpec, machine: Machine,
                      judge: Callable[[Deployment], Mapping[str, Finding]]) -> int:
    """``judge``: the runner's static checks for one candidate (``runner.evaluate`` with this machine and model)."""
    if not isinstance(model, GgufSpec):
        raise InputError("--engine llamacpp plans a .gguf model file", where=args.model, key="MODEL")
    for flag in ("memory_fraction", "html"):
        if getattr(args, flag, None):
            raise InputError(f"--{flag.replace('_', '-')} does not apply to --engine llamacpp", key=f"--{flag}")
    if args.kv_cache_dtype not in (None, "auto"):
        raise InputError("--kv-cache-dtype does not apply to --engine llamacpp (its cache types are "
                         "cache_type_k/cache_type_v in the manifest)", key="--kv-cache-dtype")
    version = args.engine_version
    if version is not None and not version.startswith("b"):
        raise InputError(f"{version} is not a llama.cpp release: llama.cpp versions are build tags such as "
                         f"b11434", key="--engine-version")
    # the same release the manifest's engine_version gives `check`, so both judge split modes alike
    # --max-model-len is one request's length, as for the other engines; llama.cpp's --ctx-size is the total
    # its --parallel slots split (src/llama-context.cpp: n_ctx_seq = n_ctx / n_seq_max without a unified
    # cache), so C slots of N tokens take a context of C x N (auto slots share one unified cache of N)
    ctx_size = args.max_model_len
    if args.concurrency is not None:
        ctx_size = (args.max_model_len or model.n_ctx_train) * args.concurrency
    rows = plan_llamacpp(model, machine, ctx_size=ctx_size, parallel=args.concurrency, engine_version=version,
                         judge=judge)
    if args.json:
        json.dump(plan_json(model, machine, rows), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_llamacpp_plan(model, machine, rows))
    return 0 if any(r.refused_by is None for r in rows) else 1
