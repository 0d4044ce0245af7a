"""``vllm serve``'s command line as vLLM reads it (``Engine.parse_args``).

``vllm/utils/argparse_utils.py`` (0.33.0) ``FlexibleArgumentParser.parse_args`` rewrites ``_`` to ``-`` in
the name of every ``--`` option (up to the first ``.``: ``--tensor_parallel_size 2``), turns ``-O3`` into
``--optimization-level 3``, and hands the rest to ``argparse`` with its default ``allow_abbrev=True``, so
an unambiguous prefix names an option (``--tensor-para 2``, ``--hos=0.0.0.0``). The options are those of
``make_arg_parser`` (``entrypoints/common/cli_args.py``) and ``EngineArgs.add_cli_args``
(``engine/arg_utils.py``), extracted per release into ``flags/<version>.json`` by
``tools/engine_flags.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import FlagTable, Option, ParsedArgs, parse_args, release_table

RELEASES = Path(__file__).with_name("flags")
#: what argparse adds by itself
_EXTRA = MappingProxyType({"-h": Option("--help", "0"), "--help": Option("--help", "0")})


@lru_cache(maxsize=8)
def table(version: Version | None = None) -> FlagTable:
    path = release_table(RELEASES, version)
    if path is None:  # pragma: no cover - the package ships the tables
        return FlagTable(engine="vLLM", release="", options=_EXTRA, underscores_as_dashes=True, complete=False,
                         prog="vllm serve")
    return FlagTable.from_json(path, engine="vLLM", prog="vllm serve", extra=_EXTRA)


def _expand(args: Sequence[str]) -> list[str]:
    """``-O3`` / ``-O=3`` / ``-O 3`` as ``--optimization-level 3`` (``FlexibleArgumentParser``)."""
    out: list[str] = []
    for i, a in enumerate(args):
        if a.startswith("-O") and a != "-O" and not a.startswith("--"):
            out += ["--optimization-level", a[3:] if a[2:3] == "=" else a[2:]]
        elif a == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(a)
    return out


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(_expand(args), table(version))
