"""``trtllm-serve serve``'s command line as TensorRT-LLM reads it (``Engine.parse_args``).

``tensorrt_llm/commands/serve.py`` declares its options with click: each option is matched by one of its
exact spellings (click takes no prefixes and does not rewrite ``_`` to ``-``), ``--flag=value`` and
``--flag value`` are the same, and the model is the positional argument. The table holds the options
``flags.py`` and ``launch.py`` know (the ones a manifest key owns, the launcher's, the ones the checks read
or know to be neutral); it is not every option of the release, so an option it does not list is named as not
modelled, never refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from packaging.version import Version

from pytest_gpulayout.engines.trtllm.flags import KNOB_FLAGS, PARALLEL_FLAGS, VALUE_FLAGS, YAML_FLAGS
from pytest_gpulayout.inputs.engine_args import FlagTable, ParsedArgs, hand_table, parse_args

#: spellings of one option (``serve.py``'s click declarations), each taking one value
_ALIASES: tuple[tuple[str, ...], ...] = (
    ("--tp_size", "--tensor_parallel_size"),
    ("--pp_size", "--pipeline_parallel_size"),
    ("--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction"),
    ("--ep_size", "--moe_expert_parallel_size"),
    ("--cluster_size", "--moe_cluster_parallel_size"),
    ("--cp_size", "--context_parallel_size"),
    YAML_FLAGS,
)
#: options without a value
_SWITCHES = ("--trust_remote_code", "--enable_chunked_prefill", "--fail_fast_on_attention_window_too_large")
#: the manifest's and the launcher's other options
_OTHERS = ("--max_seq_len", "--host", "--port", *KNOB_FLAGS, *PARALLEL_FLAGS, *VALUE_FLAGS)


@lru_cache(maxsize=1)
def table() -> FlagTable:
    grouped = {s for names in _ALIASES for s in names}
    spellings: list[tuple[Sequence[str], str]] = [(names, "1") for names in _ALIASES]
    spellings += [((name,), "0") for name in _SWITCHES]
    spellings += [((name,), "1") for name in dict.fromkeys(_OTHERS) if name not in grouped]
    return hand_table("TensorRT-LLM", spellings, prog="trtllm-serve serve")


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table())
