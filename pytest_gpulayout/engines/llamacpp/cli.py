"""``llama-server``'s command line as llama.cpp reads it (``Engine.parse_args``).

``common/arg.cpp`` (b11434) ``common_params_parse_ex`` looks each argument up by its exact spelling in the
options' ``args`` lists: no prefixes, no ``_`` spellings (``--ctx_size`` is "invalid argument"), and a value
follows as the next argument. The table is the flags ``flags.py`` knows (the ones a manifest key owns, the
launcher's, the common ones a recipe passes); it is not every flag of the release, so a flag it does not
list is named as not modelled, never refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from packaging.version import Version

from pytest_gpulayout.engines.llamacpp.flags import ARG_OWNERS, LAUNCHER_ARGS
from pytest_gpulayout.inputs.engine_args import FlagTable, ParsedArgs, hand_table, parse_args

#: ``common/arg.cpp`` spellings beyond ``ARG_OWNERS``: (spellings, nargs)
_COMMON: tuple[tuple[tuple[str, ...], str], ...] = (
    (("-h", "--help", "--usage"), "0"),
    (("-a", "--alias"), "1"),
    (("-fa", "--flash-attn"), "1"),
    (("--jinja",), "0"),
    (("--api-key",), "1"),
    (("-b", "--batch-size"), "1"),
    (("-ub", "--ubatch-size"), "1"),
    (("-t", "--threads"), "1"),
    (("-hf", "-hfr", "--hf-repo"), "1"),
    (("-cb", "--cont-batching"), "0"),
    (("--metrics",), "0"),
    (("--no-mmap",), "0"),
    (("--mlock",), "0"),
    (("-kvu", "--kv-unified"), "0"),
    (("-dev", "--device"), "1"),
)


@lru_cache(maxsize=1)
def table(version: Version | None = None) -> FlagTable:
    by_key: dict[str, list[str]] = {}
    for spelling, key in ARG_OWNERS.items():
        by_key.setdefault(key, []).append(spelling)
    spellings = [(tuple(names), "1") for names in by_key.values()]
    spellings += [((name,), "1") for name in LAUNCHER_ARGS]
    return hand_table("llama.cpp", [*spellings, *_COMMON], prog="llama-server")


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table(None))
