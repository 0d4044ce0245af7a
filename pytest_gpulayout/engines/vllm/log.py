"""How a vLLM startup log marks itself (``launch/logparse.py`` reads the pools and errors of every log).

"Own" lines are wording only vLLM prints (its pool, its start-up steps, its errors): one decides.
"Mentions" (the name, a module path, a flag) also turn up in prose around a paste and in the other
engine's log (SGLang 0.4 imports vLLM layers): they only guess, until an own line is seen.
"""

from __future__ import annotations

import re

from pytest_gpulayout.launch.logparse import LogLine

_N = r"(\d{1,3}(?:,\d{3})+|\d+)"  # 1,234,567 or 1234567
_OWN_RE = re.compile(
    r"[A-Z] KV cache size: " + _N + r" tokens|# ?(?:GPU|cuda|CPU) blocks:|Maximum concurrency for " + _N
    + r" tokens per request|\(EngineCore|\(APIServer pid=|\bVllmWorker|Available KV cache memory:"
    r"|Model loading took|EngineCore failed to start|Engine core initialization failed"
    r"|Total number of attention heads \(\d+\) must be divisible|User-specified max_model_len \(")
_MENTION_RE = re.compile(r"\bvLLM\b|EngineCore|gpu_memory_utilization|\bvllm[./]")
#: the process names vLLM prefixes its workers' lines with ("(EngineCore_DP0 pid=1)")
_PROCS = ("EngineCore", "Worker", "VllmWorker", "APIServer")


class VllmLogGrammar:
    """vLLM's log marks; its pools are counted one size line per engine core (per worker before 0.15)."""

    name = "vllm"
    pools_per_rank = False
    concurrency_from_context = False

    def owns(self, msg: str, line: LogLine) -> bool:
        proc = line.proc is not None and line.proc.startswith(_PROCS)
        return line.vllm_prefix or proc or _OWN_RE.search(msg) is not None

    def mentions(self, msg: str, line: LogLine) -> bool:
        return _MENTION_RE.search(msg) is not None


VLLM_LOG = VllmLogGrammar()
