"""``trtllm-serve serve``'s command line as TensorRT-LLM reads it.

API:

- ``resolve(args, version) -> ResolvedArgs``: the words after ``trtllm-serve serve`` read as click does
  (``inputs/click_parser.py``) with the options of the release's table (``flags/releases.json``, extracted by
  ``tools/engine_flags.py trtllm --serve-py tensorrt_llm/commands/serve.py --version X``), or, where no table
  covers the release, with the hand table below (``release_note`` says which, and why).
- ``table(version) -> FlagTable`` / ``parse(args, version) -> ParsedArgs`` (``Engine.parse_args``): spellings,
  from the same table.

The wheels are not on the public index (PyPI has placeholders), so the tables come from repository snapshots
whose ``tensorrt_llm/version.py`` was read at the same commit, not from release tags; each table's ``source``
names its repository, commit and path:

- ``0.15.0.dev2024111200``, ``0.16.0.dev2024111900``, ``0.17.0.dev2024121700``: the main branch's weekly
  ``Update TensorRT-LLM`` commits (the same ``serve.py`` in all three: the one ``@click.command
  ("trtllm-serve")``, 12 options, no ``serve`` subcommand). The main branch has no
  ``tensorrt_llm/commands/serve.py`` before 0.15.0.dev2024111200 (checked at every version bump from
  0.9.0.dev2024040900 to 0.15.0.dev2024110500), and ``setup.py``'s console scripts gain ``trtllm-serve=
  tensorrt_llm.commands.serve:main`` in that same commit: releases up to 0.14 have no ``trtllm-serve`` (a
  release branch is not read, so the note says "may").
- ``1.3.0rc3``: ``serve.py`` of TensorRT-LLM's tree as another repository vendors it (``third_party/
  tensorrt_llm``, untouched there), with ``tensorrt_llm/logger.py`` for ``--log_level``'s choices.

Which table judges a release (``chosen``): the newest table at or below it in the same ``major.minor`` series,
named in the note when it is not the release's own; a development snapshot of the main branch judges only the
development builds of its series (a release branch adds options after it: the 0.18.2 documentation,
https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html, lists ``--backend``, which none of
the 0.1x snapshots has). Any other release (1.0, 1.1, 1.2: no snapshot could be pinned to them) is read with
the hand table: the options ``flags.py`` and ``launch.py`` know, so an option it does not list is named as not
modelled, never refused. The default release when a deployment names none (``defaults.LATEST_KNOWN``, 1.2.0rc2)
is one of those.

``tensorrt_llm/commands/serve.py`` declares its options with click: each option is matched by one of its
exact spellings (click takes no prefixes and does not rewrite ``_`` to ``-``), ``--flag=value`` and
``--flag value`` are the same, and the model is the positional argument. click's words are those of click
up to 8.3 (``requirements.txt`` leaves click unpinned; ``click_parser.py`` names the 8.4 wording).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.engines.trtllm.flags import KNOB_FLAGS, PARALLEL_FLAGS, VALUE_FLAGS, YAML_FLAGS
from pytest_gpulayout.inputs import click_parser
from pytest_gpulayout.inputs.engine_args import FlagTable, ParsedArgs, ResolvedArgs, hand_table, parse_args
from pytest_gpulayout.inputs.flag_tables import Chosen, ReleaseTable, ReleaseTables
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
def hand() -> FlagTable:
    """The options this project knows, for a release no extracted table covers."""
    grouped = {s for names in _ALIASES for s in names}
    spellings: list[tuple[Sequence[str], str]] = [(names, "1") for names in _ALIASES]
    spellings += [((name,), "0") for name in _SWITCHES]
    spellings += [((name,), "1") for name in dict.fromkeys(_OTHERS) if name not in grouped]
    return hand_table("TensorRT-LLM", spellings, prog="trtllm-serve serve")


def _series(v: Version) -> tuple[int, int]:
    return v.major, v.minor


def _snapshot(t: ReleaseTable) -> str:
    """How the table's source is pinned, for the note (and, for the one-command ``trtllm-serve`` of the first
    snapshots, that it has no ``serve`` subcommand)."""
    one = ("; its trtllm-serve is one command, without the serve subcommand, so only trtllm-serve MODEL "
           "starts it") if t.prog == "trtllm-serve" else ""
    return (f"the trtllm-serve options of a snapshot whose tensorrt_llm/version.py says {t.release}, "
            f"not a release tag{one}")


def chosen(version: Version | None) -> Chosen | None:
    """The table ``version`` is judged by, with its note; None where none covers it (see the module docstring)."""
    if version is None:
        return None
    below: list[Version] = []
    for text in TABLES.versions:
        try:
            v = Version(text)
        except InvalidVersion:  # pragma: no cover - the tool writes PEP 440 versions
            continue
        if v <= version and _series(v) == _series(version) and (v.dev is None or version.dev is not None):
            below.append(v)
    if not below:
        return None
    best = max(below)
    t = TABLES.table(next(s for s in TABLES.versions if Version(s) == best))
    if best == version:
        return Chosen(t, f"judged by {_snapshot(t)}")
    return Chosen(t, f"TensorRT-LLM {version} has no table of its own: judged by {t.release}, the nearest "
                     f"below in its series ({_snapshot(t)})")


def _uncovered(version: Version | None) -> str:
    """Why the hand table reads the line."""
    known = ", ".join(TABLES.versions)
    if version is None:
        return (f"no TensorRT-LLM version known, and no trtllm-serve table is assumed for it (tables: {known}): "
                "the options this project knows are read, any other is not judged")
    if version < Version("0.15.0.dev0"):
        return (f"no trtllm-serve table covers TensorRT-LLM {version}: tensorrt_llm/commands/serve.py is absent "
                "from the main branch before 0.15.0.dev2024111200, so that release may have no trtllm-serve; "
                "the options this project knows are read, any other is not judged")
    return (f"no trtllm-serve table covers TensorRT-LLM {version} (tables: {known}; none of its series was "
            "pinned to a snapshot): the options this project knows are read, any other is not judged")


def table(version: Version | None = None) -> FlagTable:
    c = chosen(version)
    if c is None:
        return hand()
    return _flag_table(c.table.release)


@lru_cache(maxsize=8)
def _flag_table(release: str) -> FlagTable:
    t = TABLES.table(release)
    return FlagTable.from_release(t, engine="TensorRT-LLM", prog=t.prog or "trtllm-serve serve")


def parse(args: Sequence[str], version: Version | None = None) -> ParsedArgs:
    return parse_args(args, table(version))


def _hints(error: str, c: Chosen) -> tuple[str, ...]:
    """Where a spelling the release's table refuses is taken by another table (TensorRT-LLM's tables have
    gaps between them, so this says which table, not when it was added or removed)."""
    prefix = "Error: No such option"
    if not error.startswith(prefix):
        return ()
    rest = error[len(prefix):].lstrip(": '")
    name = rest.split()[0].rstrip("'.") if rest else ""
    others = [v for v in TABLES.versions if v != c.table.release and name in TABLES.spellings(v)]
    if not others:
        return ()
    return (f"{name} is an option of the trtllm-serve table of TensorRT-LLM {', '.join(others)}, not of "
            f"{c.table.release}",)


def resolve(args: Sequence[str], version: Version | None = None) -> ResolvedArgs:
    """``args`` as TensorRT-LLM ``version`` reads them (see the module docstring)."""
    c = chosen(version)
    if c is not None:
        out = resolved("trtllm", c, TABLES, click_parser.parse(c.table, args), args)
        hints = _hints(out.errors[0], c) if out.errors else ()
        return replace(out, hints=(*out.hints, *hints)) if hints else out
    parsed = parse(args, version)
    values = {g.flag.lstrip("-"): g.value for g in parsed.given}
    if parsed.positionals:
        values["model"] = parsed.positionals[0]
    return ResolvedArgs(engine="trtllm", release="", values=MappingProxyType(values),
                        given=frozenset(values), errors=tuple(parsed.errors),
                        release_note=_uncovered(version), args=tuple(args))
