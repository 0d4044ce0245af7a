"""Run on a machine with real GPUs (the device tool's H200, a GPU host): probe through NVML, record a
snapshot, and cross-check it against CUDA's own view (torch), so the fake pynvml the tests use stays
faithful to what the driver really returns.

    PYTHONPATH=. python tests/device/live_probe.py --out "$OUT"

Writes ``snapshot.json`` (keep it under tests/data/snapshots/ as a real snapshot) and
``report.txt``; exits 1 if NVML and CUDA disagree on what matters (count, names, memory totals, and
CUDA's total against NVML's total less the driver's reservation, which vLLM's budget rests on).
Uses only the standard library, nvidia-ml-py and (optionally) torch: no network, no install.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    ok = True

    from pytest_gpulayout.errors import ProbeError
    from pytest_gpulayout.machine.probe import probe
    from pytest_gpulayout.machine.snapshot import machine_to_dict
    from pytest_gpulayout.machine.topo_text import render_topo

    t0 = time.perf_counter()
    try:
        machine = probe()
    except ProbeError as err:
        print(f"live_probe: {err}", file=sys.stderr)
        return 3
    lines.append(f"probe took {time.perf_counter() - t0:.3f} s: {machine.describe()}, driver {machine.driver}")
    snap = machine_to_dict(machine)
    (out / "snapshot.json").write_text(json.dumps(snap, indent=2) + "\n")
    lines.append(render_topo(machine))
    lines += [f"note: {n}" for n in machine.notes]

    import pynvml

    pynvml.nvmlInit()
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            v1 = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                v2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                lines.append(f"GPU{i} v1 total={v1.total} free={v1.free} used={v1.used} | v2 total={v2.total} "
                             f"reserved={v2.reserved} free={v2.free} used={v2.used} "
                             f"(total - reserved - used - free = {v2.total - v2.reserved - v2.used - v2.free})")
            except pynvml.NVMLError as err:
                lines.append(f"GPU{i} v1 only ({err})")
            for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    state = pynvml.nvmlDeviceGetNvLinkState(h, link)
                except pynvml.NVMLError as err:
                    lines.append(f"GPU{i} link {link}: {type(err).__name__}; stop")
                    break
                try:
                    kind = pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
                except pynvml.NVMLError as err:
                    kind = type(err).__name__
                lines.append(f"GPU{i} link {link}: state={state} remote_type={kind}")
    finally:
        pynvml.nvmlShutdown()

    try:
        import torch
    except ImportError:
        lines.append("torch not importable: CUDA cross-check skipped")
    else:
        n = torch.cuda.device_count()
        if n != len(machine.gpus):
            ok = False
            lines.append(f"MISMATCH: CUDA sees {n} devices, the probe {len(machine.gpus)}")
        for i in range(min(n, len(machine.gpus))):
            free, total = torch.cuda.mem_get_info(i)
            g = machine.gpus[i]
            name = torch.cuda.get_device_name(i)
            lines.append(f"GPU{i} CUDA {name}: free {free / 2**20:.0f} MiB total {total / 2**20:.0f} MiB | "
                         f"probe {g.name}: free {g.memory_free_mib} total {g.memory_total_mib} MiB")
            if name != g.name:
                ok = False
                lines.append(f"MISMATCH: GPU{i} name")
            if g.memory_total_mib is None or abs(total / 2**20 - g.memory_total_mib) > 0.02 * g.memory_total_mib:
                ok = False
                lines.append(f"MISMATCH: GPU{i} total memory differs by more than 2%")
            # vLLM multiplies CUDA's total: the probe's NVML total less the driver's reservation must be it
            cuda_total = g.cuda_total_mib
            lines.append(f"GPU{i} CUDA total {total / 2**20:.0f} MiB vs NVML total - reserved "
                         f"{cuda_total} MiB (reserved {g.memory_reserved_mib} MiB as read)")
            if g.memory_reserved_mib is not None and cuda_total is not None and abs(total / 2**20 - cuda_total) > 64:
                ok = False
                lines.append(f"MISMATCH: GPU{i} CUDA's total is not NVML's total less the reservation")
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
