"""One measurement at a time across the processes of a run (pytest-xdist workers).

Two swarms loading two servers on the same cores measure each other: each test
holds this lock from the start of its first server to the end of its last one.
It is an ``flock`` on a file the xdist controller names for the run, so:

- the kernel releases it when a worker dies; there is no stale lock to clean up;
- it works with every ``--dist`` mode, and workers on another host (``--tx ssh=``)
  lock their own file: they measure on another machine;
- the file is empty and only opened for reading, so its owner does not matter.

POSIX only (``fcntl``), as are the sampler and the targets.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import TracebackType


class MeasurementLock:
    """``with MeasurementLock(path): ...`` waits for the other holders, then holds it.

    ``waited_s`` adds up the time spent waiting, over every use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.waited_s = 0.0
        self._fd: int | None = None

    def __enter__(self) -> MeasurementLock:
        import fcntl  # here, not at import: the plugin module loads on every platform

        if self._fd is not None:  # a second flock on a new descriptor would wait for ever
            raise RuntimeError(f"{self.path} is already held by this MeasurementLock")
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        started = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        self.waited_s += time.monotonic() - started
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None
