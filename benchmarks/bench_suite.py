"""Cost of the static suite and of the installed-but-idle plugin, as ratios measured in one run.

    python benchmarks/bench_suite.py [--repeat 5]

1. ``pytest --gpulayout`` over 10 deployments (all five static checks + skipped startup, 60 tests)
   against a bare ``pytest`` start-up on one trivial test: the suite's cost over start-up.
2. ``pytest`` with the plugin installed but not enabled against ``pytest -p no:gpulayout``: the
   idle plugin must cost nothing measurable (ratio ~1.00).
Absolute seconds on a shared machine are noise; the ratios, taken in one run, are the result.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEPLOYMENTS = [
    ("qwen3-8b-tp2", "Qwen/Qwen3-8B", 2, 1, 1), ("qwen3-8b-pp2", "Qwen/Qwen3-8B", 1, 2, 1),
    ("qwen3-8b-dp8", "Qwen/Qwen3-8B", 1, 1, 8), ("llama-70b-tp4", "meta-llama/Llama-3.1-70B-Instruct", 4, 1, 2),
    ("llama-70b-tp8", "meta-llama/Llama-3.1-70B-Instruct", 8, 1, 1), ("qwen3-32b-tp2", "Qwen/Qwen3-32B", 2, 1, 4),
    ("mixtral-tp4", "mistralai/Mixtral-8x7B-Instruct-v0.1", 4, 1, 2),
    ("gemma3-27b-tp2", "google/gemma-3-27b-it", 2, 1, 4),
    ("qwen3-30b-a3b-tp2", "Qwen/Qwen3-30B-A3B", 2, 1, 4), ("gpt-oss-120b-tp4", "openai/gpt-oss-120b", 4, 1, 2),
]


def manifest() -> str:
    lines = ["version: 1", "machine: preset:8xH100-sxm", "defaults:", "  engine: vllm",
             "  max_model_len: 8192", "deployments:"]
    for name, model, tp, pp, dp in DEPLOYMENTS:
        lines += [f"  {name}:", f"    model: {model}", f"    tensor_parallel_size: {tp}",
                  f"    pipeline_parallel_size: {pp}", f"    data_parallel_size: {dp}"]
    return "\n".join(lines) + "\n"


def timed(argv: list[str], cwd: Path, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        runs.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "gpulayout.yaml").write_text(manifest())
        (d / "test_trivial.py").write_text("def test_ok():\n    pass\n")
        py = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        bare = timed([*py, "test_trivial.py"], d, args.repeat)
        disabled = timed([*py, "-p", "no:gpulayout", "test_trivial.py"], d, args.repeat)
        idle = timed([*py, "test_trivial.py"], d, args.repeat)
        suite = timed([*py, "--gpulayout", "test_trivial.py"], d, args.repeat)
    print(f"bare pytest start-up (1 trivial test):          {bare:.3f} s (median of {args.repeat})")
    print(f"pytest --gpulayout, 10 deployments (60 tests):  {suite:.3f} s")
    print(f"  suite cost over bare start-up: {suite - bare:+.3f} s, ratio {suite / bare:.2f}x")
    print(f"plugin installed, not enabled vs -p no:gpulayout: ratio {idle / disabled:.3f}x "
          f"({idle:.3f} s vs {disabled:.3f} s)")


if __name__ == "__main__":
    main()
