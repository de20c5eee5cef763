"""``webperf worker`` processes for the remote-worker tests: started in a session of
their own (not children of any swarm), with or without a secret, stopped whole."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from pytest_webperf.swarm.trust.secret import SECRET_ENV

WEBPERF = str(Path(sys.executable).with_name("webperf"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_worker(
    address: str,
    *args: str,
    idle_exit: str = "20s",
    secret: str | None = None,
    apart: bool = False,
) -> subprocess.Popen[str]:
    """``webperf worker --master ADDRESS ARGS``; ``secret``: in its environment (else
    none, whatever this process has); ``apart``: its stderr kept apart from its stdout."""
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    if secret is not None:
        env[SECRET_ENV] = secret
    return subprocess.Popen(
        [WEBPERF, "worker", "--master", address, "--idle-exit", idle_exit, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if apart else subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )


def stop(worker: subprocess.Popen[str]) -> str:
    """Its output, once it ended (killed with its children if it had not)."""
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGKILL)
    out, _ = worker.communicate(timeout=30)
    return out
