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
#: its own configuration, after the defaults are filled in: "server_args=ServerArgs(model_path='m', ...,
#: context_length=None, ..., mem_fraction_static=0.85, ..., tp_size=4, pp_size=1, ...)" (``server_args.py``)
_SERVER_ARGS_RE = re.compile(r"server_args=ServerArgs\(")
_CONFIG_ITEM_RE = re.compile(r"(?:^|[\s,(])(?P<key>[a-z_]+)=(?P<value>'[^']*'|[^,()\s]+)")
#: SGLang's names -> ``logparse.CONFIG_KEYS``
_CONFIG_NAMES = {"model_path": "model", "context_length": "max_model_len", "tp_size": "tensor_parallel_size",
                 "pp_size": "pipeline_parallel_size", "dp_size": "data_parallel_size",
                 "mem_fraction_static": "memory_fraction", "kv_cache_dtype": "kv_cache_dtype"}
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

    config_words = ("server_args=ServerArgs(",)

    def config(self, msg: str) -> dict[str, str]:
        out: dict[str, str] = {}
        m = _SERVER_ARGS_RE.search(msg)
        if m is None:
            return out
        for item in _CONFIG_ITEM_RE.finditer(msg[m.end():]):
            key = _CONFIG_NAMES.get(item.group("key"))
            value = item.group("value").strip("'")
            if key is not None and key not in out and value not in ("None", ""):
                out[key] = value
        return out


SGLANG_LOG = SglangLogGrammar()
