"""How long ``gpulayout plan`` takes on 8 GPUs against starting Python, and how it scales to 512.

    python benchmarks/bench_plan.py [--repeat 5]

Runs ``gpulayout plan`` (every TP x PP x DP layout on 8 GPUs: 38 layouts, all five static checks
each) for a few models on ``preset:8xH100-sxm``, and a bare ``python -c pass`` start. Absolute
seconds on a shared machine are noise; the ratio, taken in one run, is the result: the plan should
cost a small multiple of an interpreter start. Also prints the in-process time of ``plan()`` alone,
and the scaling ratios: the same plan on 8 hosts x 8 (64 GPUs) and 64 hosts x 8 (512 GPUs) against
the 8-GPU plan. Targets: within 4x for 64 GPUs, within 20x for 512.
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
    from pytest_gpulayout.model.load import load_model
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


def cluster(hosts: int, preset: str = "8xH100-sxm") -> object:
    """``hosts`` copies of a preset, one host each (the network between them)."""
    from pytest_gpulayout.machine.presets import preset_cluster

    return preset_cluster(preset, hosts, source=f"bench:{hosts}x{preset}")


#: (label, hosts of 8 H100) for the scaling ratios; 1 host is the reference
SCALES = [("8 GPUs (1 host)", 1), ("64 GPUs (8 hosts x 8)", 8), ("512 GPUs (64 hosts x 8)", 64)]
TARGETS = {8: 4.0, 64: 20.0}


def scaling(repeat: int) -> list[tuple[str, str, float, float]]:
    """(model, machine, seconds, ratio to 8 GPUs) for every case and cluster size, one run."""
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan

    out = []
    for case in CASES:
        model = load_model(case[0])
        kw = {"max_model_len": int(case[2])}
        base = None
        for label, hosts in SCALES:
            machine = load_preset("8xH100-sxm") if hosts == 1 else cluster(hosts)
            plan(model, machine, **kw)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                plan(model, machine, **kw)
                times.append(time.perf_counter() - start)
            t = min(times)
            base = base or t
            out.append((case[0], label, t, t / base))
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
    worst = {8: 0.0, 64: 0.0}
    for name, label, t, ratio in scaling(args.repeat):
        print(f"plan() {name} on {label}: {t * 1000:.0f} ms = {ratio:.1f}x the 8-GPU plan")
        hosts = next(h for lab, h in SCALES if lab == label)
        if hosts in worst:
            worst[hosts] = max(worst[hosts], ratio)
    ok = all(worst[h] <= TARGETS[h] for h in TARGETS)
    print(f"scaling: 64 GPUs {worst[8]:.1f}x (target 4x), 512 GPUs {worst[64]:.1f}x (target 20x): "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
