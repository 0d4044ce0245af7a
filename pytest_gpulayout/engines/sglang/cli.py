"""SGLang's server command line (``python -m sglang.launch_server`` / ``sglang serve``) as each release reads it.

API:

- ``resolve(args, version) -> ResolvedArgs``: the words after the command through the release's own parser,
  rebuilt from the table ``tools/engine_flags.py`` extracted from its wheel (``flags/releases.json``: SGLang
  0.4.6 - 0.5.23, every release on PyPI): ``prepare_server_args`` (``sglang/srt/server_args.py``) builds a plain
  ``argparse.ArgumentParser`` (``prog`` "sglang serve" from 0.5.10, ``launch_server.py`` before), so
  ``allow_abbrev`` stays on (``--tp-si 2``) and ``_`` is not rewritten (``--max_running_requests`` is an
  unrecognized argument). ``--model-path`` is required: pass it as the launcher does. Typed values by
  destination (``context_length`` takes ``128k`` from 0.5.10: ``human_readable_int``), the release's defaults,
  and its refusal in its words (``sglang serve: error: ...``). ``--config FILE`` (0.5.3 on) is merged first as
  that release's ``ConfigArgumentMerger`` merges it (``config_file.py``): the file's keys, then the line, whose
  own flags win; ``read`` reads the file (``inputs/config_file.py``: the manifest's folder, or ``NotHere`` for a
  container's path, where ``not_read`` says the keys were not judged); the merger's refusals in its words.
- ``table(version) -> FlagTable`` and ``parse(args, version) -> ParsedArgs`` (``Engine.parse_args``): the same
  release's spellings.
- ``TABLES``: the packed tables (``inputs/flag_tables.py``), read on first use.

The options are ``ServerArgs.add_cli_args``'s ``add_argument`` calls (to 0.5.13) and, from 0.5.14, the
``A[T, Arg(...)]`` fields ``add_cli_args_from_dataclass`` (``srt/arg_groups/arg_utils.py``) registers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.engines.sglang import config_file
from pytest_gpulayout.inputs.config_file import reader, unmerged
from pytest_gpulayout.inputs.engine_args import FlagTable, Option, ParsedArgs, ResolvedArgs, parse_args
from pytest_gpulayout.inputs.flag_tables import ReleaseTables
from pytest_gpulayout.inputs.release_parser import Outcome
from pytest_gpulayout.inputs.release_parser import parse as run_parser
from pytest_gpulayout.inputs.resolved import resolved

TABLES = ReleaseTables("sglang", "SGLang", Path(__file__).with_name("flags") / "releases.json")
_EXTRA = MappingProxyType({"-h": Option("--help", "0"), "--help": Option("--help", "0")})


@lru_cache(maxsize=16)
def _flag_table(release: str) -> FlagTable:
    t = TABLES.table(release)
    return FlagTable.from_release(t, engine="SGLang", prog=t.prog or "sglang serve", extra=_EXTRA)


def table(version: Version | None = None) -> FlagTable:
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return FlagTable(engine="SGLang", release="", options=_EXTRA, complete=False, prog="sglang serve")
    return _flag_table(chosen.table.release)


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table(version))


def _read(path: str) -> str:
    return reader(Path.cwd())(path)


def resolve(args: Sequence[str], version: Version | None = None, *,
            read: Callable[[str], str] | None = None) -> ResolvedArgs:
    """``args`` as SGLang ``version`` resolves them (see the module docstring); ``read``: how a ``--config`` file
    is read (default: from the working directory)."""
    chosen = TABLES.nearest(version)
    if chosen is None:  # pragma: no cover - the package ships the tables
        return ResolvedArgs(engine="sglang", release="", errors=("no SGLang flag tables shipped",))
    m = config_file.merge(args, chosen.table, read or _read)
    if m.error:
        return resolved("sglang", chosen, TABLES, Outcome(), m.args, error=m.error)
    result = resolved("sglang", chosen, TABLES, run_parser(chosen.table, m.args), m.args)
    where = "prepare_server_args (sglang/srt/server_args.py)"
    result = replace(result, ignored=unmerged(args, result, "SGLang", where))
    if m.unread:
        return replace(result, not_read=(m.unread,))
    if m.path:  # the merger puts the file's words first (config args + the line before + after --config FILE)
        result = replace(result, from_file=m.args[:len(m.args) - (len(args) - 2)])
    return result
