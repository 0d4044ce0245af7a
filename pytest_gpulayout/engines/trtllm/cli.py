"""``trtllm-serve serve``'s command line as TensorRT-LLM reads it.

API:

- ``resolve(args, version) -> ResolvedArgs``: the words after ``trtllm-serve serve`` read as click does
  (``inputs/click_parser.py``) with the release's options, from ``flags/releases.json`` when
  ``tools/engine_flags.py trtllm --serve-py tensorrt_llm/commands/serve.py --version X`` has extracted that
  release's. No release ships one yet (no release tag of the repository could be read where the tables were
  made): until then the options are those of the hand table below, an option it does not list is not
  judged, and ``release_note`` says so.
- ``table(version) -> FlagTable`` / ``parse(args, version) -> ParsedArgs`` (``Engine.parse_args``): spellings.

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
from pathlib import Path
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.engines.trtllm.flags import KNOB_FLAGS, PARALLEL_FLAGS, VALUE_FLAGS, YAML_FLAGS
from pytest_gpulayout.inputs import click_parser
from pytest_gpulayout.inputs.engine_args import FlagTable, ParsedArgs, ResolvedArgs, hand_table, parse_args
from pytest_gpulayout.inputs.flag_tables import ReleaseTables
from pytest_gpulayout.inputs.resolved import resolved

TABLES = ReleaseTables("trtllm", "TensorRT-LLM", Path(__file__).with_name("flags") / "releases.json")

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


def resolve(args: Sequence[str], version: Version | None = None) -> ResolvedArgs:
    """``args`` as TensorRT-LLM ``version`` reads them (see the module docstring)."""
    chosen = TABLES.nearest(version)
    if chosen is not None:
        return resolved("trtllm", chosen, TABLES, click_parser.parse(chosen.table, args), args)
    parsed = parse(args, version)
    values = {g.flag.lstrip("-"): g.value for g in parsed.given}
    if parsed.positionals:
        values["model"] = parsed.positionals[0]
    return ResolvedArgs(engine="trtllm", release="", values=MappingProxyType(values),
                        given=frozenset(values), errors=tuple(parsed.errors),
                        release_note="no trtllm-serve table extracted from a release: the options this project "
                                     "knows are read, any other is not judged", args=tuple(args))
