#!/usr/bin/env python3
"""Write the config-time ledger's counts into README.md, between its ``ledger counts`` markers:

    python tools/readme_counts.py          # rewrite the block
    python tools/readme_counts.py --check  # exit 1 when the block is not the ledger's

``tests/engines/test_config_ledger.py`` holds the block to the ledger.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_gpulayout.refusals import Verdict, load_ledger  # noqa: E402 - after the path above

START = "<!-- ledger counts: tests/engines/test_config_ledger.py -->"
END = "<!-- end -->"
ENGINES = (("vllm", "vLLM"), ("sglang", "SGLang"))


def counts(engine: str) -> tuple[int, int, int, int, int]:
    """(entries, entries under a rule, rule ids, unreachable, open) of ``engine``'s shipped ledger."""
    ledger = load_ledger(engine)
    verdicts: Counter[Verdict] = Counter()
    rules: set[str] = set()
    for e in ledger.entries:
        c = ledger.classify(e)
        if c is None:
            continue
        verdicts[c.verdict] += 1
        if c.verdict is Verdict.RULE:
            rules.add(c.detail)
    return (len(ledger.entries), verdicts[Verdict.RULE], len(rules), verdicts[Verdict.UNREACHABLE],
            verdicts[Verdict.OPEN])


def block() -> str:
    """The counts as README.md says them."""
    parts = []
    for engine, display in ENGINES:
        total, ruled, rules, unreachable, open_ = counts(engine)
        parts.append(f"{display} {total:,} refusals: {ruled:,} under {rules:,} rules, {unreachable:,} unreachable, "
                     f"{open_:,} open")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when README.md's block is not the ledger's")
    opts = ap.parse_args(argv)
    path = REPO / "README.md"
    text = path.read_text(encoding="utf-8")
    start = text.index(START) + len(START)
    end = text.index(END, start)
    new = text[:start] + block() + text[end:]
    if opts.check:
        return 0 if new == text else 1
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
