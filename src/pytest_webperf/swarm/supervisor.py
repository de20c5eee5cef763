"""``webperf worker --master HOST:PORT``: a long-lived generator worker for another
machine (no Locust import here).

It waits for a master to listen at the address, then runs one fresh Locust worker
process (``python -m pytest_webperf.swarm --remote HOST:PORT``) for that run: the
process joins, gets the run's spec from the master, generates load, and ends when
the master quits. Then it waits for the next master (the next repetition, the next
test), and so on, until the master says the session is over (exit 0) or no master
has listened for ``idle_exit_s`` (exit 0 after runs; exit 2 if there never was one).

The secret goes to each process in its environment, never on a command line. A
master that refuses this worker, cannot prove it holds the secret or does not speak
the secured channel ends it, in one line (``BadMaster``, exit 2); a run whose target
this worker may not load is refused (the process says so) and the next one awaited.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from pytest_webperf.swarm.spec import on_loopback, split_address
from pytest_webperf.swarm.trust.allowance import endpoint_of
from pytest_webperf.swarm.trust.messages import (
    NO_HANDSHAKE,
    REFUSED,
    RUN_DONE,
    SESSION_OVER,
    UNPROVEN,
)
from pytest_webperf.swarm.trust.secret import SECRET_ENV, Secret, environment_with

PROBE_S = 0.2  # how often the address is tried while no master listens
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


def distrust(master: str, code: int, secret: Secret | None) -> str | None:
    """Why this worker ends, from a run's exit status (None: it goes on)."""
    if code == REFUSED:
        ours = "its secret is not the run's" if secret else "the run has a secret, it has none"
        return (
            f"the master at {master} refused this worker: {ours} (give the run's secret in "
            f"{SECRET_ENV} or --secret-file PATH)"
        )
    if code == UNPROVEN:
        return (
            f"the master at {master} could not prove it holds this worker's secret (not "
            "the run's master, or a run without that secret): this worker takes no orders "
            "from it"
        )
    if code == NO_HANDSHAKE:
        return (
            f"the master at {master} does not complete webperf's secured handshake (not a "
            "webperf master, or an older webperf)"
        )
    return None


def supervise(
    master: str,
    idle_exit_s: float,
    say: Callable[[str], None] = print,
    *,
    secret: Secret | None = None,
    allow: Sequence[str] = (),
    trusted_network: bool = False,
) -> int:
    """Serve runs from the master at ``master`` until told to stop; the exit status.
    ``secret``: the run's; ``allow``: target URLs it may load besides the master's
    address; ``trusted_network``: join a master beyond loopback without a secret."""
    host, port = check_address(master)
    for url in allow:
        try:
            endpoint_of(url)
        except ValueError as exc:
            raise BadMaster(f"--allow-target {exc}") from None
    if secret is None and not trusted_network and not on_loopback(host):
        raise BadMaster(
            f"no secret to join the master at {master}, beyond loopback: give the run's "
            f"secret in {SECRET_ENV} or --secret-file PATH, or --trusted-network if every "
            "host on that network is trusted"
        )
    env = environment_with(secret)
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
        command += [arg for url in allow for arg in ("--allow-target", url)]
        child[:] = [subprocess.Popen(command, env=env)]
        code = child[0].wait()
        if code == SESSION_OVER:
            say(f"webperf worker: the master ended the session after {runs} run(s)")
            return 0
        why = distrust(master, code, secret)
        if why is not None:
            raise BadMaster(why)
        runs += code == RUN_DONE
        wait_for(lambda: not listening(host, port), CLOSE_WAIT_S)  # that run's master leaves
