"""``webperf worker --master HOST:PORT``: a long-lived generator worker for another
machine (no Locust import here).

It waits for a master to listen at the address, then runs one fresh Locust worker
process (``python -m pytest_webperf.swarm --remote HOST:PORT``) for that run: the
process joins, gets the run's spec from the master, generates load, and ends when
the master quits. Then it waits for the next master (the next repetition, the next
test), and so on, until the master says the session is over (exit 0) or no master
has listened for ``idle_exit_s`` (exit 0 after runs; exit 2 if there never was one).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType

from pytest_webperf.swarm.spec import split_address

PROBE_S = 0.2  # how often the address is tried while no master listens
SESSION_OVER = 10  # the worker process's exit status when the master said so (master.py's)
CLOSE_WAIT_S = 5.0  # after a run, how long to wait for that master to stop listening


class BadMaster(Exception):
    """The master address cannot be used: the message is one line for the user."""


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(PROBE_S)
    return True


def check_address(master: str) -> tuple[str, int]:
    """(host, port) of ``master``, resolved; BadMaster if it is not a usable address."""
    try:
        host, port = split_address(master)
    except ValueError as exc:
        raise BadMaster(str(exc)) from None
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise BadMaster(f"{master!r}: cannot resolve {host!r} ({exc})") from None
    return host, port


def supervise(master: str, idle_exit_s: float, say: Callable[[str], None] = print) -> int:
    """Serve runs from the master at ``master`` until told to stop; the exit status."""
    host, port = check_address(master)
    child: list[subprocess.Popen[bytes]] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        for process in child:
            with contextlib.suppress(OSError):
                process.terminate()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    runs = 0
    say(f"webperf worker: waiting for a master at {master} (exit after {idle_exit_s:g}s idle)")
    while True:
        if not wait_for(lambda: listening(host, port), idle_exit_s):
            if runs == 0:
                raise BadMaster(f"no master listened at {master} within {idle_exit_s:g}s")
            say(f"webperf worker: no master at {master} for {idle_exit_s:g}s after {runs} run(s)")
            return 0
        command = [sys.executable, "-m", "pytest_webperf.swarm", "--remote", master]
        child[:] = [subprocess.Popen(command)]
        code = child[0].wait()
        if code == SESSION_OVER:
            say(f"webperf worker: the master ended the session after {runs} run(s)")
            return 0
        runs += code == 0
        wait_for(lambda: not listening(host, port), CLOSE_WAIT_S)  # that run's master leaves
