"""What a build wrote in its tree, whether the tree held anything else before it ran, and
whether its output can move to another tree.

A tree's content is what git holds of it (``gitref.Content``); anything else in it is an
output: of this build, of an earlier one, or any other file git ignores. Only over a tree
that holds its content alone is "what the build created or changed" the build's whole
output (``foreign``); over a tree that already held outputs, a build changes only some of
them (pip over an existing virtual environment leaves its interpreter alone).

An output that names, by its absolute path, the tree it was built in runs only there
(``pinned``): a virtual environment's scripts (their ``#!`` line), its ``pyvenv.cfg`` and
``activate``, an editable install's ``.pth`` file, a link into the tree by absolute path.
Compiled files are not read for it: a binary names its sources for debuggers and stack
traces, which it does not need to run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path

Snapshot = dict[str, tuple[int, int]]  # path under the root -> (size, mtime in ns)

# what running Python and pytest write beside the code: never a build's output, and never
# counted as one (``gitref.DEFAULT_EXCLUDE_GLOBS`` leaves them out of the content too)
CACHES = frozenset(("__pycache__", ".pytest_cache"))
CHUNK = 1 << 20  # bytes read at a time when looking for the tree's path in a file


def snapshot(root: Path) -> Snapshot:
    """Every file, link and directory under ``root`` but ``.git``, by size and
    modification time (directories too: a build's empty directory is an output)."""
    found: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (directory == str(root) and d == ".git")]
        for name in [*files, *dirs]:
            path = os.path.join(directory, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return found


def written(before: Snapshot, after: Snapshot) -> list[str]:
    """The paths a build created or changed, parents before their children."""
    return sorted(path for path, stat in after.items() if before.get(path) != stat)


def _content(path: str, paths: Collection[str]) -> bool:
    """Whether ``path`` is content: listed, or inside a listed path (a submodule)."""
    if path in paths:
        return True
    parent = os.path.dirname(path)
    while parent:
        if parent in paths:
            return True
        parent = os.path.dirname(parent)
    return False


def foreign(root: Path, content: Collection[str]) -> str | None:
    """The first file or link under ``root`` that is not the tree's ``content`` (``.git``
    and the caches aside): an earlier build's output, or another file git ignores. None
    when the tree holds its content alone. Stops at the first one found."""
    for directory, dirs, files in os.walk(root):
        top = directory == str(root)
        dirs[:] = sorted(d for d in dirs if d not in CACHES and not (top and d == ".git"))
        links = [d for d in dirs if os.path.islink(os.path.join(directory, d))]
        for name in sorted([*files, *links]):
            path = os.path.relpath(os.path.join(directory, name), root)
            if not _content(path, content):
                return path
    return None


def pinned(root: Path, paths: Iterable[str]) -> str | None:
    """The first of ``paths`` (outputs under ``root``) that names ``root`` by its absolute
    path: a link into it, or a text file holding it. None when they can all move."""
    names = {str(root), os.path.realpath(root)}
    needle = re.compile(
        b"|".join(re.escape(os.fsencode(name)) for name in sorted(names)) + rb"(?![\w.-])"
    )
    for path in paths:
        full = root / path
        if full.is_symlink():
            target = os.readlink(full)
            if os.path.isabs(target) and any(
                target == name or target.startswith(name + os.sep) for name in names
            ):
                return path
        elif full.is_file() and _names(full, needle):
            return path
    return None


def _names(path: Path, needle: re.Pattern[bytes]) -> bool:
    """Whether the text file at ``path`` holds ``needle`` (a file with a NUL byte in its
    first block is compiled, not read further)."""
    overlap = b""
    try:
        with path.open("rb") as stream:
            first = True
            while block := stream.read(CHUNK):
                if first and b"\0" in block:
                    return False
                first = False
                if needle.search(overlap + block):
                    return True
                overlap = block[-4096:]
    except OSError:
        return False
    return False
