"""Access to the Docker engine, with a clear message when none answers; a command run in
a container, bounded in time."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import threading
import warnings
from collections.abc import Sequence

import docker
import docker.errors
from docker import DockerClient

from pytest_webperf.errors import EngineUnavailable

HOW_TO_GET_ONE = (
    "Start a Docker engine (e.g. 'sudo systemctl start docker'), or run the README's "
    "set-up (scripts/setup.sh), which installs docker.io and starts dockerd on "
    "Debian/Ubuntu as root. To load a server that is already running instead, "
    "pass --webperf-target-url=http://127.0.0.1:PORT."
)


@functools.cache
def docker_client() -> DockerClient:
    """The engine's client, checked once per process."""
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except docker.errors.DockerException as exc:
        reason = str(exc)
    else:
        return client
    # docker-py's unix-socket transport drops the socket whose connect() failed
    # without closing it; finalise it here, quietly, rather than have a
    # ResourceWarning surface at some later garbage collection (an error under -W error).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    raise EngineUnavailable(f"no Docker engine answers ({reason}). {HOW_TO_GET_ONE}")


def engine_version() -> str:
    version = docker_client().version()
    return str(version.get("Version", "unknown"))


def run_in(container: str, argv: Sequence[str], timeout: float) -> tuple[int, str]:
    """``argv`` run inside ``container`` (``docker exec``): (exit status, output); past
    ``timeout`` seconds its process is killed and ``TimeoutError`` raised."""
    api = docker_client().api
    exec_id = api.exec_create(container, list(argv))["Id"]
    output: list[bytes] = []
    runner = threading.Thread(target=lambda: output.append(api.exec_start(exec_id)), daemon=True)
    runner.start()
    runner.join(timeout)
    if runner.is_alive():
        pid = api.exec_inspect(exec_id).get("Pid")
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
        raise TimeoutError(f"{argv[0]} did not finish within {timeout:g} s")
    code = api.exec_inspect(exec_id).get("ExitCode")
    return (int(code) if code is not None else -1), b"".join(output).decode(errors="replace")
