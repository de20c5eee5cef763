"""A server started as a local command: no engine, no image, its own process group."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import psutil

from pytest_webperf.errors import TargetError
from pytest_webperf.targets.base import (
    Probe,
    free_port,
    health_failure,
    wait_healthy,
)
from pytest_webperf.targets.gitref import git_commit
from pytest_webperf.targets.http2 import probe_health
from pytest_webperf.targets.runtime import PINNINGS, Pinning, runtime_of
from pytest_webperf.targets.wrap import Wrap, on_host

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: the target gets SIGKILL when this process dies, even by SIGKILL (its own
    session spares it our signals, so nothing else would end it). The command's own
    children are not covered: a server whose workers outlive their master is rare."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return in_child


def how_it_ended(returncode: int | None) -> str:
    """``exit code 3``, or ``killed by SIGKILL`` (Popen's negative return code)."""
    if returncode is not None and returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class ProcessTarget:
    """``command`` run with a free port in ``port_env`` (on loopback; with ``bind``, on
    that address, given in ``$BIND``), health-checked, and killed with its whole
    process group at exit. Sampled by its process tree (it shares
    this process's cgroup, so there is no cgroup counter to cross-check)."""

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        name: str | None = None,
        port_env: str = "PORT",
        health: str = "/health",
        startup_timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        bind: str | None = None,
        tls: bool = False,
        prelude: str = "",
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise TargetError("an empty command cannot be a target")
        self.name = name or os.path.basename(self.argv[0])
        self.host, self.port = bind or "127.0.0.1", 0  # bind: its address in $BIND
        self.port_env, self.health, self.startup_timeout = port_env, health, startup_timeout
        self.env, self.cwd = dict(env or {}), cwd
        self.tls = tls  # it speaks HTTPS: health checks and load use TLS (unverified)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None
        self.prelude = prelude  # written first in its log: what built it (``build.py``)
        self.wrap: Wrap | None = None  # the tool this instance runs under (``relaunch``)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def __enter__(self) -> ProcessTarget:
        self.port = free_port(self.host)
        self._log = tempfile.TemporaryFile(mode="w+", prefix="webperf-target-")
        if self.prelude:
            self._log.write(self.prelude if self.prelude.endswith("\n") else self.prelude + "\n")
            self._log.flush()
        argv, env = self.argv, self.env
        if self.wrap is not None:
            aslr = shutil.which("setarch") is not None
            argv = self.wrap.argv(self.argv, self.wrap.directory, aslr=aslr)
            env = self.wrap.pinning.applied(self.env)
        try:
            self.process = subprocess.Popen(
                argv,
                env={**os.environ, **env, self.port_env: str(self.port), **self._bind()},
                cwd=self.cwd,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: killed whole, spared our Ctrl-C
                # only a prctl call, already resolved: no lock or import a thread could hold
                preexec_fn=_die_with_parent(),  # noqa: PLW1509
            )
        except OSError as exc:
            self._close_log()
            raise TargetError(f"cannot start {self.argv[0]!r}: {exc}") from None
        try:
            self._wait_healthy()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _bind(self) -> dict[str, str]:
        """--webperf-target-bind: the address to listen on, in $BIND (else loopback)."""
        return {"BIND": self.host} if self.host != "127.0.0.1" else {}

    def _wait_healthy(self) -> None:
        def probe() -> Probe:
            return probe_health(self.host, self.port, self.health, tls=self.tls)

        timeout = self.startup_timeout * (self.wrap.slowdown if self.wrap else 1.0)
        answer = wait_healthy(probe, self.check_alive, timeout)
        if not answer.ready:
            where = f"{self.health} on {self.host}:{self.port}"
            fix = "serve it, or pass the path that does as health=..."
            name = self.name if self.wrap is None else f"{self.name} ({self.wrap.what})"
            raise TargetError(health_failure(name, where, answer, timeout, fix), self.logs())

    def __exit__(self, *exc: object) -> None:
        maps = self._perf_maps()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for path in maps:  # gone with it: a stale map names another process's code
            with contextlib.suppress(OSError):
                path.unlink()
        self._close_log()

    def _perf_maps(self) -> list[Path]:
        """The perf maps its processes write in this host's ``/tmp`` when profiling
        asked V8 for them (``--perf-basic-prof``): perf reads ``/tmp/perf-<pid>.map`` for
        any later process of the same pid, and would name its JavaScript after these."""
        if self.process is None or "--perf-basic-prof" not in self.env.get("NODE_OPTIONS", ""):
            return []
        try:
            pids = [
                self.process.pid,
                *(c.pid for c in psutil.Process(self.process.pid).children(recursive=True)),
            ]
        except psutil.Error:
            pids = [self.process.pid]
        return [Path(f"/tmp/perf-{pid}.map") for pid in pids]

    def restart(self) -> None:
        """Stop the process and start it afresh (a new instance, a new port), as given."""
        self.relaunch(None)

    def relaunch(self, wrap: Wrap | None) -> None:
        """Stop the process and start it afresh under ``wrap`` (None: as given)."""
        self.__exit__()
        self.wrap = wrap
        self.__enter__()

    def beside(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        """``argv`` run on this host, where the process runs."""
        return on_host(argv, timeout)

    def seen(self, directory: str) -> str:
        return directory

    def pinning(self) -> Pinning:
        """Its runtime's, read from the command (``runtime.runtime_of``)."""
        return PINNINGS[runtime_of(self.argv, {**os.environ, **self.env})]

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def parts(self) -> Mapping[str, int]:
        return {self.name: self.process.pid} if self.process is not None else {}

    def check_alive(self) -> None:
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise TargetError(f"{self.name} is not running ({how_it_ended(code)})", self.logs())

    def logs(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        text = self._log.read()
        self._log.seek(0, os.SEEK_END)
        return text

    @functools.cached_property
    def git(self) -> dict[str, Any] | None:
        """The commit of the repository holding the working directory, and whether its
        tree is dirty (None outside a repository): the code measured, as an image tag
        says for a container. Asked of git once (bounded by its timeout), on the first
        ``describe()``; ``gitref.git_commit`` so "dirty" means what a baseline's
        metadata says (tracked files changed; untracked files do not count)."""
        return git_commit(Path(self.cwd) if self.cwd else None)

    def describe(self) -> dict[str, Any]:
        return {"kind": "process", "url": self.url, "command": self.argv, "git": self.git}
