"""Where rlscale may write: checked before a run starts, so that a folder it cannot write is one line, not a traceback
from every rank once the run directory is made."""

from __future__ import annotations

import contextlib
import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""Write errors that are the storage's, not the program's: no space, no quota left, a read-only file system."""


def unwritable_reason(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (made when missing), or None when they can.

    Tries an anonymous temporary file in ``folder``, or in its nearest existing parent: permissions alone do not tell
    (root ignores them; a read-only mount does not show in them), and the file leaves nothing behind.
    """
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return f"cannot write in {existing} ({error.strerror or error})"
    return None


def full_disk_message(error: OSError) -> str | None:
    """One line for a write that failed for want of space, quota or a writable file system; None for other errors."""
    if error.errno not in FULL_DISK_ERRNOS:
        return None
    where = f" writing {error.filename}" if error.filename else ""
    return f"{error.strerror or error}{where}; free space there, or point --log_root/--output_path elsewhere"


@contextlib.contextmanager
def one_line_on_full_disk(command: str) -> Iterator[None]:
    """Turn a write that failed for want of space (:func:`full_disk_message`) into one line on stderr and exit code 1,
    instead of a traceback from every rank; other errors pass unchanged."""
    try:
        yield
    except OSError as error:
        message = full_disk_message(error)
        if message is None:
            raise
        raise SystemExit(f"{command}: error: {message}") from None
