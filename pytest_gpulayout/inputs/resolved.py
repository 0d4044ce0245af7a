"""A release parser's ``Outcome`` as a ``ResolvedArgs``, with this project's hints beside the release's own
refusal: a flag the release does not know is looked up in the other releases' tables (removed in vLLM 0.11.0,
last accepted by 0.10.2; first accepted by 0.14.0) and among the release's spellings (did you mean).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from types import MappingProxyType

from pytest_gpulayout.inputs.arg_types import Types, passes_through
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.inputs.flag_tables import Chosen, ReleaseTables
from pytest_gpulayout.inputs.release_parser import Outcome

_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: (.*)$", re.S)


def _hint(flag: str, chosen: Chosen, tables: ReleaseTables) -> str:
    t = chosen.table
    name = flag.split("=", 1)[0]
    h = tables.history(name, t.release)
    if h.removed_in:
        return (f"{name} was removed in {tables.display} {h.removed_in} (last accepted by {h.last_accepted})")
    if h.added_in:
        return f"{name} is first accepted by {tables.display} {h.added_in} (not by {t.release})"
    close = difflib.get_close_matches(name, [s for s in t.by_spelling if s.startswith("--")], n=1, cutoff=0.6)
    return f"{name}: did you mean {close[0]}?" if close else ""


def hints_for(error: str, chosen: Chosen, tables: ReleaseTables) -> tuple[str, ...]:
    """What to tell about the flags an ``unrecognized arguments`` error names."""
    m = _UNRECOGNIZED.search(error.splitlines()[0] if error else "")
    if not m:
        return ()
    out = []
    for word in m.group(1).split():
        if word.startswith("-") and len(word) > 1:
            text = _hint(word, chosen, tables)
            if text:
                out.append(text)
    return tuple(out)


def resolved(engine: str, chosen: Chosen, tables: ReleaseTables, outcome: Outcome, args: Sequence[str],
             *, error: str = "") -> ResolvedArgs:
    """``ResolvedArgs`` from what the release's parser made of ``args`` (``error``: a refusal before it)."""
    t = chosen.table
    first = error or outcome.error
    deprecated = tuple(sorted(o.flags[0] for dest in outcome.given for o in t.by_dest.get(dest, ())
                              if o.deprecated and o.flags))
    types = Types(t)
    unchecked = tuple(sorted({f"{o.flags[0]} ({o.type})" for dest in outcome.given for o in t.by_dest.get(dest, ())
                              if o.flags and passes_through(types.get(o.type))}))
    return ResolvedArgs(
        engine=engine, release=t.release,
        values=MappingProxyType(dict(outcome.values)) if not first else MappingProxyType({}),
        given=outcome.given if not first else frozenset(),
        errors=(first,) if first else (), release_note=chosen.note,
        hints=hints_for(first, chosen, tables) if first else (), deprecated=deprecated, args=tuple(args),
        dests=t.dest_by_spelling, unchecked=unchecked if not first else ())
