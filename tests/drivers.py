"""What a test's driver process does first, so that the signals the test sends it act as in a terminal
wherever the suite was started.

A job started with ``&`` ignores SIGINT and SIGQUIT, ``nohup`` ignores SIGHUP, some CI runners block or
ignore more; an ignored signal stays ignored across ``exec``, and the launcher keeps an ignored signal
ignored (a stray one must not kill a run's engines). A driver that reset only SIGINT therefore timed out
under ``nohup`` when the test sent it SIGHUP (reliability round 4, item 6). ``RESET_SIGNALS`` (source to
put first in a ``python -c`` driver) and ``reset_signals`` (for ``preexec_fn``) give every signal the tests
send its default action (SIGINT: Python's ``KeyboardInterrupt``) and unblock them all.
"""

from __future__ import annotations

import signal
import textwrap

#: every signal a test sends a driver (SIGKILL and SIGSTOP cannot be ignored)
SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP, signal.SIGCONT,
        signal.SIGTTIN, signal.SIGTTOU)

RESET_SIGNALS = textwrap.dedent(f"""
    import signal as _signal
    for _sig in {tuple(int(s) for s in SENT)!r}:
        _signal.signal(_sig, _signal.SIG_DFL)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
""")


def reset_signals() -> None:
    """For ``subprocess.Popen(preexec_fn=...)`` of a driver that is not Python (or not ours): defaults, none
    blocked."""
    for sig in SENT:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
