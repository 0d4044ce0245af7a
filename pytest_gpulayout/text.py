"""Terminal colour codes, removed the one way everywhere text from a terminal is read.

Engine logs and ``nvidia-smi topo -m`` pastes both carry ANSI colours, as real ``ESC`` bytes or
written out as ``^[[0;36m`` by a copy from a terminal or a log viewer. ``logparse`` and
``topo_text`` used to carry their own copy of the pattern; one definition keeps them agreeing.
Kept apart (and tiny) so ``topo_text`` need not import the log parser.
"""

from __future__ import annotations

import re

_ANSI_RE = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes, real or written out as ``^[[...m`` by a copy from a log."""
    return _ANSI_RE.sub("", text)
