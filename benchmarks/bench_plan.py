"""How long ``gpulayout plan`` takes on 8 GPUs, against starting Python at all, measured in one run.

    python benchmarks/bench_plan.py [--repeat 5]

Runs ``gpulayout plan`` (every TP x PP x DP layout on 8 GPUs: 38 layouts, all five static checks
each) for a few models on ``preset:8xH100-sxm``, and a bare ``python -c pass`` start. Absolute
seconds on a shared machine are noise; the ratio, taken in one run, is the result: the plan should
cost a small multiple of an interpreter start. Also prints the in-process time of ``plan()`` alone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ["Qwen/Qwen3-8B", "--max-model-len", "8192", "--concurrency", "64"],
    ["meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192"],
    ["deepseek-ai/DeepSeek-V3", "--max-model-len", "32768"],
]
MACHINE = "preset:8xH100-sxm"


def timed(argv: list[str], repeat: int) -> float:
    """Median wall time of ``argv`` over ``repeat`` runs (one warm-up run first, not counted)."""
    subprocess.run(argv, check=False, capture_output=True)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, check=False, capture_output=True)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def in_process(repeat: int) -> list[tuple[str, float]]:
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.spec import load_model
    from pytest_gpulayout.planner.plan import plan

    machine = load_preset(MACHINE.split(":", 1)[1])
    out = []
    for case in CASES:
        model = load_model(case[0])
        kw = {"max_model_len": int(case[2])}
        if "--concurrency" in case:
            kw["concurrency"] = int(case[case.index("--concurrency") + 1])
        plan(model, machine, **kw)  # warm-up: imports, catalog
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            plan(model, machine, **kw)
            times.append(time.perf_counter() - start)
        out.append((case[0], statistics.median(times)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    bare = timed([sys.executable, "-c", "pass"], args.repeat)
    print(f"python -c pass: {bare * 1000:.0f} ms (median of {args.repeat})")
    for case in CASES:
        t = timed([sys.executable, "-m", "pytest_gpulayout.cli", "plan", *case, "--machine", MACHINE], args.repeat)
        print(f"gpulayout plan {case[0]} on 8 GPUs: {t * 1000:.0f} ms = {t / bare:.1f}x python start-up")
    for name, t in in_process(args.repeat):
        print(f"plan() in process, {name}: {t * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
