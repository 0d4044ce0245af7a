"""``python -m sglang.launch_server``'s command line as SGLang reads it (``Engine.parse_args``).

``sglang/srt/server_args.py`` (0.5.23) ``prepare_server_args`` builds a plain
``argparse.ArgumentParser(prog="sglang serve")``: ``allow_abbrev`` stays on, so an unambiguous prefix names
an option (``--tp-si 2``), but ``_`` is not rewritten (``--tp_size`` is an unrecognized argument). The
options are the ``A[T, Arg(...)]`` fields of ``srt/arg_groups/fields/*.py`` registered by
``add_cli_args_from_dataclass`` (``--<field>``, ``cli_name``, ``aliases``: ``--tp-size`` /
``--tensor-parallel-size``) and the ``add_argument`` calls of ``ServerArgs.add_cli_args``, extracted per
release into ``flags/<version>.json`` by ``tools/engine_flags.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import FlagTable, Option, ParsedArgs, parse_args, release_table

RELEASES = Path(__file__).with_name("flags")
_EXTRA = MappingProxyType({"-h": Option("--help", "0"), "--help": Option("--help", "0")})


@lru_cache(maxsize=8)
def table(version: Version | None = None) -> FlagTable:
    path = release_table(RELEASES, version)
    if path is None:  # pragma: no cover - the package ships the tables
        return FlagTable(engine="SGLang", release="", options=_EXTRA, complete=False, prog="sglang serve")
    return FlagTable.from_json(path, engine="SGLang", prog="sglang serve", extra=_EXTRA)


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table(version))
