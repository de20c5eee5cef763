"""The lock that keeps xdist workers from measuring at the same time."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from pytest_webperf.run.lock import MeasurementLock


def test_the_lock_is_exclusive_across_descriptors_and_released_on_exit(tmp_path: Path) -> None:
    path = tmp_path / "run.lock"
    lock = MeasurementLock(path)

    def free() -> bool:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # also releases the probe's own lock
        return True

    with lock:
        assert not free()
    assert free()
    with lock:  # reusable, one test after another
        assert not free()
        with pytest.raises(RuntimeError, match="already held"), lock:
            pass
        assert not free()  # still held by the outer one
    assert lock.waited_s >= 0.0


def test_a_holder_that_dies_releases_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "run.lock"
    script = (
        "import sys, pathlib\n"
        "from pytest_webperf.run.lock import MeasurementLock\n"
        "with MeasurementLock(pathlib.Path(sys.argv[1])):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            probe = os.open(path, os.O_RDONLY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
        finally:
            holder.kill()  # no clean exit: the kernel must release the flock
    with MeasurementLock(path):  # would wait for ever if it had not
        pass
