"""An archive of a build's output put into a tree all or nothing: unpacked into a staging
directory inside the tree (the same file system, so a move is a rename), then moved into
place entry by entry. A failure at any point (an archive that is cut short or refused, a
move the file system refuses, Ctrl-C) moves back what was moved and removes the staging
directory: the tree is as it was.

A build's links are kept as they are, absolute ones too (a virtual environment's
interpreter): the archive is our own. A member whose name leaves the tree, or goes into
``.git``, is refused.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

STAGING_PREFIX = ".webperf-restore-"

# (where an entry was put, where what it replaced was set aside: None when nothing was there)
Moves = list[tuple[Path, Path | None]]


class Refused(tarfile.TarError):
    """A member of an archive that would leave the tree or write into ``.git``."""


def unpack(archive: Path, root: Path) -> None:
    """``archive``'s members put under ``root``, all or none. Raises OSError or
    ``tarfile.TarError`` with ``root`` left as it was."""
    scratch = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        staged, aside = scratch / "new", scratch / "old"
        staged.mkdir()
        aside.mkdir()
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                _check(member.name)
            if hasattr(tarfile, "tar_filter"):  # 3.10.12+, 3.11.4+: links kept as they are
                tar.extractall(staged, filter="tar")
            else:  # pragma: no cover - older interpreters extract without a filter
                tar.extractall(staged)
        place(staged, root, aside)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check(name: str) -> None:
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or parts[0] == ".git":
        raise Refused(f"{name!r} would be written outside the tree or into .git")


def place(staged: Path, root: Path, aside: Path) -> None:
    """Everything under ``staged`` moved to the same place under ``root``: a directory on
    both sides is merged, anything else in the way set aside under ``aside``. On any
    failure, what was moved is moved back and the exception raised again."""
    moves: Moves = []
    try:
        _move(staged, root, aside, moves)
    except BaseException:
        _undo(moves)
        raise


def _is_directory(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _move(source: Path, target: Path, aside: Path, moves: Moves) -> None:
    for name in sorted(os.listdir(source)):
        there, here = source / name, target / name
        if _is_directory(there) and _is_directory(here):
            _move(there, here, aside, moves)
            continue
        displaced = None
        if os.path.lexists(here):
            displaced = aside / str(len(moves))
            os.rename(here, displaced)
        moves.append((here, displaced))
        os.rename(there, here)


def _undo(moves: Moves) -> None:
    for placed, displaced in reversed(moves):
        if _is_directory(placed):
            shutil.rmtree(placed, ignore_errors=True)
        elif os.path.lexists(placed):
            placed.unlink()
        if displaced is not None:
            os.rename(displaced, placed)
