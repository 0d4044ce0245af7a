"""How an SGLang startup log marks itself (``launch/logparse.py`` reads the pools and errors of every log).

"Own" lines are wording only SGLang prints (its pool, its start-up steps, its errors) and its rank-tagged
prefix ("[ts TP0]"): one decides. "Mentions" (the name, its memory flag, an untagged prefix) only guess.
"""

from __future__ import annotations

import re

from pytest_gpulayout.launch.logparse import LogLine

_OWN_RE = re.compile(
    r"KV Cache is allocated|KV Cache VA upper bound|max_total_num_tokens=|Load weight end\.|Memory pool end\."
    r"|fired up and ready to roll|Scheduler hit an exception|memory capacity is unbalanced"
    r"|KV pool holds \d+ tokens|Post-capture KV sizing|context_length \(\d+\) is greater than the derived")
_MENTION_RE = re.compile(r"\bsglang\b|mem[-_]fraction[-_]static")


class SglangLogGrammar:
    """SGLang's log marks; it logs one pool line per rank and one ``max_total_num_tokens=`` summary per
    replica, and no concurrency line (the pool over the context length stands in)."""

    name = "sglang"
    pools_per_rank = True
    concurrency_from_context = True

    def owns(self, msg: str, line: LogLine) -> bool:
        return bool(line.sglang_prefix and line.tags) or _OWN_RE.search(msg) is not None

    def mentions(self, msg: str, line: LogLine) -> bool:
        return line.sglang_prefix or _MENTION_RE.search(msg) is not None


SGLANG_LOG = SglangLogGrammar()
