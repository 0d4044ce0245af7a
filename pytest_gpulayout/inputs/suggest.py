""""Did you mean ...?" for every name a user can mistype (manifest keys, snapshot keys, presets,
catalog ids), so each error suggests the same way."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def _squash(text: str) -> str:
    return text.strip().lower().replace("-", "").replace("_", "").replace(" ", "")


def close_matches(word: str, choices: Sequence[str], *, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` choices close to ``word``, best first, in their original spelling.

    Case, ``-``/``_`` and spaces are ignored first (``Tensor-Parallel-Size`` is
    ``tensor_parallel_size``), then difflib's similarity decides, case-insensitively.
    """
    squashed = {_squash(c): c for c in choices}
    exact = squashed.get(_squash(word))
    if exact is not None:
        return [exact]
    lowered = {c.lower(): c for c in choices}
    return [lowered[m] for m in difflib.get_close_matches(word.strip().lower(), list(lowered), n=n, cutoff=cutoff)]
