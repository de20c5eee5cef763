"""Atomic file writes: readers (and crashes, and Ctrl-C) see the old file or the new one,
never half of one or an empty file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text``: temp file in the same directory, fsync, rename,
    fsync of the directory (so the rename itself survives a power cut)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600; reports and baselines are shared
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """POSIX; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def append_lines(path: Path, lines: list[str]) -> None:
    """Add ``lines`` at the end of ``path`` (made if absent) in one ``write`` on a file
    opened for appending, then fsync: what was there is never rewritten, and writers
    appending at once do not interleave within a line on a local file system. A crash
    mid-write can leave a torn last line, which readers skip."""
    if not lines:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(f"{line}\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        while written < len(data):  # a short write (signals, full pipes): the rest follows
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
