"""``vllm serve``'s command line as each vLLM release reads it.

API:

- ``resolve(args, version, *, read=None) -> ResolvedArgs``: the words after ``vllm serve`` (the model
  positional included, as the launcher passes it) through the release's own front end: ``FlexibleArgumentParser``
  rewriting (``flexible.py``: ``_`` to ``-``, dotted JSON keys, ``-O``, ``--config FILE`` read with ``read``,
  by default from the working directory) and then its argparse parser, rebuilt from the table
  ``tools/engine_flags.py`` extracted from that release's wheel (``flags/releases.json``: vLLM 0.8.0 - 0.33.0,
  every release on PyPI). Typed values by destination (``max_model_len``: ``131072`` for ``128k``), the
  release's defaults, the destinations the line set, and the release's refusal in its words
  (``vllm serve: error: ...``, ``vllm: error: unrecognized arguments: ...``, ``ValueError: ...``). A version
  without a table of its own is judged by the nearest release below (``release_note`` says so).
- ``table(version) -> FlagTable`` and ``parse(args, version) -> ParsedArgs`` (``Engine.parse_args``): the same
  release's spellings, for code that only needs to know which flag a word names.
- ``TABLES``: the packed tables (``inputs/flag_tables.py``), read on first use.

The parser is ``ServeSubcommand.subparser_init`` (``vllm/entrypoints/cli/serve.py``) -> ``make_arg_parser``
(``entrypoints/openai/cli_args.py``, ``entrypoints/common/cli_args.py`` in 0.33) -> ``EngineArgs.add_cli_args``
(``engine/arg_utils.py``); each option records the file and line it was declared at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.engines.vllm import flexible
from pytest_gpulayout.inputs.arg_types import human_readable_int_of
from pytest_gpulayout.inputs.config_file import unmerged
from pytest_gpulayout.inputs.engine_args import FlagTable, Option, ParsedArgs, ResolvedArgs, parse_args
from pytest_gpulayout.inputs.flag_tables import ReleaseTables
from pytest_gpulayout.inputs.release_parser import Outcome
from pytest_gpulayout.inputs.release_parser import parse as run_parser
from pytest_gpulayout.inputs.resolved import resolved

TABLES = ReleaseTables("vllm", "vLLM", Path(__file__).with_name("flags") / "releases.json")
#: what argparse adds by itself
_EXTRA = MappingProxyType({"-h": Option("--help", "0"), "--help": Option("--help", "0")})


@lru_cache(maxsize=16)
def _flag_table(release: str) -> FlagTable:
    return FlagTable.from_release(TABLES.table(release), engine="vLLM", prog="vllm serve",
                                  underscores_as_dashes=True, extra=_EXTRA)


def table(version: Version | None = None) -> FlagTable:
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return FlagTable(engine="vLLM", release="", options=_EXTRA, underscores_as_dashes=True, complete=False,
                         prog="vllm serve")
    return _flag_table(chosen.table.release)


def _expand(args: Sequence[str]) -> list[str]:
    """``-O3`` / ``-O=3`` / ``-O 3`` as ``--optimization-level 3`` (``FlexibleArgumentParser``, 0.12 on)."""
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


def _read(path: str) -> str:
    return Path(path).read_text()


def resolve(args: Sequence[str], version: Version | None = None, *,
            read: Callable[[str], str] | None = None) -> ResolvedArgs:
    """``args`` as vLLM ``version`` resolves them (see the module docstring)."""
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return ResolvedArgs(engine="vllm", release="", errors=("no vLLM flag tables shipped",))
    t = chosen.table
    rw = flexible.rewrite(args, t.parser, hri=human_readable_int_of(t.human_readable_int), read=read or _read)
    if rw.error:
        return resolved("vllm", chosen, TABLES, Outcome(), rw.args, error=rw.error)
    result = resolved("vllm", chosen, TABLES, run_parser(t, rw.args), rw.args)
    ignored = unmerged(args, result, "vLLM", "FlexibleArgumentParser.parse_args (vllm/utils/argparse_utils.py)")
    return replace(result, from_file=rw.from_file, ignored=ignored)
