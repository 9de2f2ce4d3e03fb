"""Where and how rlscale writes: folders checked before a run starts, so that a folder it cannot write is one line, not
a traceback from every rank once the run directory is made; files written whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MIN_FREE_BYTES = 1 << 20
"""Free space below which a folder counts as full: a run's first manifest and checkpoint would not fit."""

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""Write errors that are the storage's, not the program's: no space, no quota left, a read-only file system."""


def unwritable_reason(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (made when missing), or None when they can.

    Tries an anonymous temporary file in ``folder``, or in its nearest existing parent: permissions alone do not tell
    (root ignores them; a read-only mount does not show in them), and the file leaves nothing behind. A full disk
    still lets one create an empty file, so the free space is asked for too.
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
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        return f"no space left in {existing} ({free:,} bytes free)"
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


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a hidden ``.<name>.tmp`` beside it, then renamed over it.

    A reader (the launcher polling heartbeats and rank status) never sees half a file, and an interrupted write leaves
    the old file and no temporary. The temporary's name is fixed, so each file has one writing process. No fsync: these
    are small files rewritten often; checkpoints, which must survive a node crash, use :func:`atomic_path`.
    """
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a hidden name beside ``path`` to write a checkpoint to; rename it to ``path`` once written.

    A kill during the write leaves at most the hidden file, which checkpoint discovery never picks, instead of a
    truncated file under a checkpoint's name. The temporary keeps the suffix, for libraries that append it themselves.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield temporary
        move_into_place(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def move_into_place(written: Path, path: Path) -> None:
    """Rename a finished file to ``path`` (same file system), flushed to disk first so that a node crash cannot
    leave an empty file under the new name."""
    with open(written, "rb") as file:
        os.fsync(file.fileno())
    os.replace(written, path)
