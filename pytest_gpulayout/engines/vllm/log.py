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
#: its own configuration: "Initializing a V1 LLM engine (v0.11.0) with config: model='m', ...,
#: max_seq_len=8192, ..., tensor_parallel_size=2, pipeline_parallel_size=1, ..." (``v1/engine/core.py``;
#: V0 ``engine/llm_engine.py``: "Initializing an LLM engine (v0.5.4) with config:", from 0.6.5 "a V0
#: LLM engine"), and the API server's "non-default args: {'max_model_len': 512, ...}" (0.9+)
_ENGINE_CONFIG_RE = re.compile(r"Initializing an? (?:V\d )?LLM engine(?: \(v?(?P<version>[^)\s]+)\))? with config:")
_CONFIG_ITEM_RE = re.compile(r"(?:^|[\s,(])(?P<key>[a-z_]+)=(?P<value>'[^']*'|[^,()\s]+)")
_ARGS_ITEM_RE = re.compile(r"'(?P<key>[a-z_]+)': (?P<value>'[^']*'|[^,{}]+)")
#: vLLM's names -> ``logparse.CONFIG_KEYS``
_CONFIG_NAMES = {"model": "model", "max_seq_len": "max_model_len", "max_model_len": "max_model_len",
                 "tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
                 "data_parallel_size": "data_parallel_size", "kv_cache_dtype": "kv_cache_dtype",
                 "gpu_memory_utilization": "memory_fraction", "device_config": "device"}
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

    config_words = ("with config:", "non-default args:")

    def config(self, msg: str) -> dict[str, str]:
        out: dict[str, str] = {}
        m = _ENGINE_CONFIG_RE.search(msg)
        if m:
            if m.group("version"):
                out["version"] = m.group("version")
            items = _CONFIG_ITEM_RE.finditer(msg[m.end():])
        elif "non-default args:" in msg:
            items = _ARGS_ITEM_RE.finditer(msg[msg.index("non-default args:"):])
        else:
            return out
        for item in items:
            key = _CONFIG_NAMES.get(item.group("key"))
            value = item.group("value").strip().strip("'")
            if key is not None and key not in out and value not in ("None", ""):
                out[key] = value
        return out


VLLM_LOG = VllmLogGrammar()
