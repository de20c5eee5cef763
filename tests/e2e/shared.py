"""A directory made once per test session, whatever the number of xdist workers.

A session- or module-scoped fixture is made once per *worker*: with ``-n 4``, a wheel
build or a module's inner pytest run was paid two or three times (52-73 s each). The
first worker to need it makes it under a lock in the directory the workers' temporary
directories share; the others wait for it and read it. A making that failed is retried
by the next worker (each of their tests then says why).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(directory)`` run once per session for ``name``; the directory it filled."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: nothing to share
        directory = factory.mktemp(name)
        make(directory)
        return directory
    root = factory.getbasetemp().parent  # this session's, shared by its workers
    directory = root / f"shared-{name}"
    done = directory / ".made"
    with (root / f"shared-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)  # a worker's failed making
            directory.mkdir()
            make(directory)
            done.touch()
    return directory
