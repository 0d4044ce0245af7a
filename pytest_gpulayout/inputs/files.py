"""Reading the text users hand us: files (one error line naming the file, however they fail) and
terminal colour codes, removed the one way everywhere text from a terminal is read.

Engine logs and ``nvidia-smi topo -m`` pastes both carry ANSI colours, as real ``ESC`` bytes or
written out as ``^[[0;36m`` by a copy from a terminal or a log viewer. ``logparse`` and
``topo_text`` used to carry their own copy of the pattern; one definition keeps them agreeing.
Kept apart (and tiny) so ``topo_text`` need not import the log parser.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import IO, Any

from pytest_gpulayout.errors import InputError

_ANSI_RE = re.compile(r"(?:\x1b|\^\[)\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes, real or written out as ``^[[...m`` by a copy from a log."""
    return _ANSI_RE.sub("", text)


def symlink_loop(path: str | Path) -> bool:
    """Whether ``path`` cannot be reached because its symbolic links lead back into themselves.

    ``Path.exists()`` and ``is_file()`` answer False for a loop as for a missing file, so every
    "not found" asks this first: "not found" sends the user looking for a file that is there."""
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    except ValueError:  # a NUL in the name
        return False
    return False


LOOP_MESSAGE = "symlink loop: a symbolic link in this path leads back to itself (`ls -l` it)"


def not_found(path: str | Path, what: str) -> str:
    """``"<what> not found"``, or the real reason when the path is there: a symlink loop, or something
    that is not a regular file (a FIFO, a device) and would never be read to its end."""
    if symlink_loop(path):
        return f"{LOOP_MESSAGE}, so the {what} cannot be read"
    kind = not_regular(path)
    if kind is not None and kind != DIRECTORY:
        return f"the {what} is not a regular file: {kind}"
    return f"{what} not found"


DIRECTORY = "it is a directory"
_KINDS = ((stat.S_ISFIFO, "it is a FIFO (a named pipe): reading it waits for a writer, forever if none comes"),
          (stat.S_ISCHR, "it is a character device (/dev/zero, a terminal ...): it has no end to read to"),
          (stat.S_ISBLK, "it is a block device"),
          (stat.S_ISSOCK, "it is a socket"),
          (stat.S_ISDIR, DIRECTORY))


def _kind(mode: int) -> str:
    return next((text for test, text in _KINDS if test(mode)), "it is not a plain file")


def not_regular(path: str | Path) -> str | None:
    """Why ``path`` (its links followed) is not a regular file, in words; None when it is one or is not there.

    Every file the tool reads is a regular file: a FIFO blocks ``open`` until a writer comes, ``/dev/zero``
    never ends and fills the memory; both are refused before they are opened (round 4, item 3)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)


def open_regular(path: str | Path, *, what: str = "") -> IO[bytes]:
    """``path`` opened for reading, when it is a regular file; an InputError naming it otherwise.

    Looked at before the open (``stat``), opened without blocking (``O_NONBLOCK``: a FIFO put there in
    between opens at once instead of waiting) and looked at again on the open file (``fstat``). OSError
    for the rest (missing, unreadable), as ``open`` raises it."""
    label = f"the {what} is not a regular file" if what else "not a regular file"
    kind = not_regular(path)
    if kind == DIRECTORY:  # the callers' own words for it ("is a directory, not a file")
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if kind is not None:
        raise InputError(f"{label}: {kind}", where=path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{label}: {_kind(st.st_mode)}", where=path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, *, what: str = "") -> bytes:
    """The bytes of the regular file ``path`` (``open_regular``); OSError as ``Path.read_bytes``."""
    with open_regular(path, what=what) as f:
        return f.read()


def load_json(text: str, where: str | Path) -> Any:
    """``json.loads`` with its errors as one line naming the file: invalid JSON, and nesting deeper than
    Python's reader goes (100,000 nested lists were a RecursionError traceback)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})", where=where) from None
    except RecursionError:
        raise InputError("nested deeper than Python's JSON reader goes (about 1,000 levels); no file the checks "
                         "read nests more than a few dozen: is it really what was meant?", where=where) from None


def read_text(path: str | Path, *, lenient: bool = False) -> str:
    """A file's text, or an InputError naming it (missing, a directory, not a regular file, unreadable,
    not UTF-8).

    ``lenient`` replaces undecodable bytes instead of refusing: logs pasted from terminals often
    carry a few, and the lines that matter are still readable.
    """
    try:
        raw = read_bytes(path)
    except FileNotFoundError:
        raise InputError("file not found", where=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", where=path) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(LOOP_MESSAGE, where=path) from None
        raise InputError(f"cannot read: {err.strerror or err}", where=path) from None
    if lenient:
        return raw.decode("utf-8", "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("is not a text file (not UTF-8)", where=path) from None


def writable_path(text: str | Path, flag: str) -> Path:
    """An output file named by ``flag`` (``--html``, ``--gpulayout-report`` ...), checked before any
    work: a typo must not cost a plan or minutes of engine launches."""
    path = Path(text)
    if path.is_dir():
        raise InputError(f"{flag}: is a directory, not a file (e.g. {path / 'report.html'})", where=path)
    folder = path.resolve().parent
    if not folder.is_dir():
        raise InputError(f"{flag}: folder {folder} does not exist", where=path)
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{flag}: cannot write here (permission denied)", where=path)
    return path


def log_folder(text: str | Path, flag: str) -> Path:
    """The engine-log folder named by ``flag`` (``--log-dir``, ``--gpulayout-log-dir``,
    ``GPULAYOUT_LOG_DIR``), created 0700 where missing. Refused, in one line: a symbolic link (it is
    never followed: whoever planted it chooses where the logs go) and a folder anyone may write in
    that another user owns (``/tmp`` itself for anyone but root: another user can plant names there,
    or read what the engine prints); the log files inside are then created ``O_EXCL | O_NOFOLLOW``."""
    import stat

    path = Path(os.path.abspath(Path(text).expanduser()))  # absolute: the logs' paths are printed
    if path.is_symlink():
        raise InputError(f"{flag}: is a symbolic link (to {os.readlink(path)}); a log folder is never followed "
                         f"through a link: name the real folder", where=path)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as err:
        raise InputError(f"{flag}: cannot create the engine log folder: {err.strerror or err}", where=path) from None
    if stat.S_ISLNK(st.st_mode):  # planted between the two looks
        raise InputError(f"{flag}: is a symbolic link; a log folder is never followed through a link: name the "
                         f"real folder", where=path)
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{flag}: is not a folder", where=path)
    if st.st_mode & stat.S_IWOTH and st.st_uid != os.geteuid():
        raise InputError(f"{flag}: anyone may write in this folder and another user (uid {st.st_uid}) owns it: "
                         f"name a folder of your own for the engine logs (e.g. {path / 'gpulayout-logs'})",
                         where=path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{flag}: cannot write here (permission denied)", where=path)
    return path
