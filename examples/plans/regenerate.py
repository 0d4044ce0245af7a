"""Re-run the plan examples and rewrite their saved outputs (``*.txt``) and ``README.md``.

    python examples/plans/regenerate.py

Each example is a question people bring to a multi-GPU rollout, answered by ``gpulayout plan``.
The engine version is pinned so the answers do not depend on what is installed where this runs.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

EXAMPLES = [
    (
        "two-l4-qwen3-8b-long-context",
        "Two L4 (24 GB, PCIe through the host bridge), Qwen3-8B at its own 40,960-token context: "
        "one card cannot hold a full request next to 15 GiB of weights, so the model must be split. "
        "PP=2 ranks first (PCIe), TP=2 right behind with the PCIe caveat, and the plan says which "
        "measurement decides between them.",
        ["Qwen/Qwen3-8B", "--machine", "examples/01-two-l4-pcie/machine.yaml", "--engine-version", "0.33.0"],
    ),
    (
        "two-l4-qwen3-8b-4-users",
        "The same two L4, 8,192-token requests, 4 users at once: each card holds a full copy with room "
        "for its share of the users, so two copies (DP=2) win: no traffic between the cards.",
        [
            "Qwen/Qwen3-8B",
            "--machine",
            "examples/01-two-l4-pcie/machine.yaml",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "8192",
            "--concurrency",
            "4",
        ],
    ),
    (
        "two-l4-qwen3-8b-8-users",
        "The same question with 8 users: a copy cannot hold its 4, so copies no longer serve; the split does.",
        [
            "Qwen/Qwen3-8B",
            "--machine",
            "examples/01-two-l4-pcie/machine.yaml",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "8192",
            "--concurrency",
            "8",
        ],
    ),
    (
        "two-l4-qwen3-8b-55k-tokens",
        "The classic question: the same two L4, 8,192-token requests, 55,000 tokens of KV in all. One card "
        "holds 29,808 tokens; two copies hold 27,984 each, 2% over each one's half: the kv_pool check's "
        "margin is 10%, so the copies meet the need only narrowly and rank last. PP=2 and TP=2 hold "
        "167,072 tokens in one pool, 3.0x the two copies together, because the weights are stored once: "
        "PP=2 first (PCIe), TP=2 next with the link caveat, then the copies.",
        [
            "Qwen/Qwen3-8B",
            "--machine",
            "examples/01-two-l4-pcie/machine.yaml",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "8192",
            "--kv-tokens",
            "55000",
        ],
    ),
    (
        "eight-h100-qwen3-30b-a3b-moe",
        "A mixture of experts that one H100 holds with room: eight independent engines (one server per "
        "GPU behind a load balancer) rank first. vLLM's own DP=8 is a separate row: it shards the experts "
        "over all eight ranks as one expert-parallel group, so it is one replica, not eight.",
        ["Qwen/Qwen3-30B-A3B", "--machine", "preset:8xH100-sxm", "--engine-version", "0.33.0",
         "--max-model-len", "8192"],
    ),
    (
        "two-socket-l40s-llama-70b-30-users",
        "Llama 3.1 70B on a two-socket 8 x L40S (NODE inside a socket, SYS across) for 30 users: a "
        "replica needs all eight cards. PP=8 ranks first, TP=4 inside each socket with PP=2 across "
        "next, and the measuring manifest holds those two; TP=8 over SYS starts, slow, and is listed "
        "after every layout that keeps TP inside a socket.",
        ["meta-llama/Llama-3.1-70B-Instruct", "--machine", "preset:8xL40S-2socket", "--engine-version",
         "0.33.0", "--max-model-len", "8192", "--concurrency", "30"],
    ),
    (
        "two-l4-deepseek-v3-too-big",
        "DeepSeek-V3 on two L4: the weights alone exceed the cards, so the plan says that in one line "
        "(FP8 weights or more nodes) instead of suggesting a shorter context.",
        ["deepseek-ai/DeepSeek-V3", "--machine", "preset:2xL4-pcie", "--engine-version", "0.33.0",
         "--max-model-len", "4096"],
    ),
    (
        "two-32gb-gemma3-12b",
        "Two 32 GB cards, Gemma 3 12B, 2,048-token context: TP=2 shards the KV cache (each rank stores 4 "
        "of the 8 KV heads: half the KV bytes per token per rank) and halves the weights, so its one pool "
        "holds several times the requests; DP=2 keeps a full copy and a full-width pool per card. Copies "
        "still rank first when each card holds the model with room for the two full-length requests the "
        "plan assumes without a need: give the users' number (next example) to let the requirement decide.",
        [
            "google/gemma-3-12b-it",
            "--machine",
            "preset:2x32gb-pcie",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "2048",
        ],
    ),
    (
        "two-32gb-gemma3-12b-64-users",
        "The same cards for 64 users at once: no layout holds them with a bf16 KV cache; the plan says "
        "how close each comes (exit code 1).",
        [
            "google/gemma-3-12b-it",
            "--machine",
            "preset:2x32gb-pcie",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "2048",
            "--concurrency",
            "64",
        ],
    ),
    (
        "two-32gb-gemma3-12b-64-users-fp8",
        "64 users with an fp8 KV cache (half the bytes per token): both splits hold them.",
        [
            "google/gemma-3-12b-it",
            "--machine",
            "preset:2x32gb-pcie",
            "--engine-version",
            "0.33.0",
            "--max-model-len",
            "2048",
            "--concurrency",
            "64",
            "--kv-cache-dtype",
            "fp8",
        ],
    ),
]


def run(argv: list[str]) -> tuple[int, str]:
    from pytest_gpulayout.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", *argv])
    return code, out.getvalue()


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import os

    os.chdir(ROOT)
    readme = [
        "# `gpulayout plan` examples",
        "",
        "Generated by `python examples/plans/regenerate.py` (the engine version is pinned, so the",
        "numbers do not depend on what is installed). Each `.txt` is the exact output.",
        "",
        "## How the order is decided",
        "",
        "1. **The need, with the `kv_pool` check's margin.** A layout whose replicas clear the need by",
        "   10% or more ranks before one that meets it narrowly (the check warns \"under 10% to spare\"),",
        "   and that before one short of it. This is what moved the two L4 at 60,000 tokens: the copies",
        "   hold 3% over their halves, so the split (one pool, the weights stored once, 2.8x the tokens)",
        "   now ranks first. The same margin decides the `--memory-fraction` hint: a fraction that leaves",
        "   the copies narrow is not suggested (the 8-user example no longer gets one).",
        "2. **More independent replicas, then every GPU used.** Copies when one GPU holds the model with",
        "   room. A MoE model under vLLM gets independent engines (`xN engines`) as their own rows:",
        "   Qwen3-30B-A3B on 8 x H100 now ranks eight engines first, where it ranked TP=8 first.",
        "3. **Links.** Over PCIe: pure PP, then TP inside each socket with PP across (both measured),",
        "   then other TP sizes; TP over SYS is listed as \"starts, slow\" after the rest, no longer refused.",
        "4. **Several hosts.** TP inside a host, PP across hosts, copies per host (`xN hosts`).",
        "",
        "Full-length requests are exact (3.77, not 3) and rounded down where printed (3.99 does not",
        "read as 4); `--json` carries each layout's `rank`, `refused_by`, `need_met` and the `need`.",
        "",
    ]
    for name, question, argv in EXAMPLES:
        code, text = run(argv)
        text = text.replace(f"{ROOT}/", "")  # machine sources print as given, not as this checkout
        (HERE / f"{name}.txt").write_text(text, encoding="utf-8")
        cmd = "gpulayout plan " + " ".join(shlex.quote(a) for a in argv)
        readme += [
            f"## {name}",
            "",
            question,
            "",
            "```console",
            f"$ {cmd}",
            text.rstrip("\n"),
            "$ echo $?",
            str(code),
            "```",
            "",
        ]
    (HERE / "README.md").write_text("\n".join(readme), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
