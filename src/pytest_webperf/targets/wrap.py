"""A target started under a tool (``Wrap``: Valgrind's callgrind for a counted window, the
runtime's pinning for the native one), and what a target that can be so started offers
(``Wrappable``): a fresh start under a wrap, a command run where it runs (vgdb), the path
where it sees a directory of this host, and the pinning its runtime gets.

A wrap's ``prefix`` may name ``{dir}``: its directory as the target sees it (the same path
for a local command, the mount point in a container).
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pytest_webperf.targets.base import Target
from pytest_webperf.targets.runtime import Pinning

DIR = "{dir}"
MOUNT = "/webperf-count"  # where a container sees a wrap's directory


@dataclass(frozen=True)
class Wrap:
    """How one instance of a target starts: ``prefix`` before its command (``{dir}``: the
    directory as the target sees it), the runtime's ``pinning`` (environment, flags after
    the program), ASLR off where the host allows it (``setarch -R``), ``directory`` (on
    this host) mounted where a container sees ``{dir}``, ``valgrind`` when the command runs
    under it (a container needs the counted image), ``slowdown`` for the health check's
    patience, ``what`` for messages."""

    pinning: Pinning
    prefix: tuple[str, ...] = ()
    directory: str | None = None
    valgrind: bool = False
    aslr_off: bool = True
    slowdown: float = 1.0
    what: str = "natively"
    notes: tuple[str, ...] = field(default=(), compare=False)
    cpus: tuple[int, ...] = ()  # pinned to these cores (``taskset -c``); (): wherever

    def argv(self, command: Sequence[str], seen: str | None, *, aslr: bool = True) -> list[str]:
        """The full command: ``taskset -c CPUS`` (when pinned), ``setarch ARCH -R`` (when
        ``aslr`` may be turned off here), the prefix with ``{dir}`` as ``seen``, the command
        with the runtime's flags."""
        flags = [f for f in self.pinning.flags if f not in command[1:]]
        program = [command[0], *flags, *command[1:]] if command else []
        prefix = [p.replace(DIR, seen or "") for p in self.prefix]
        setarch = ["setarch", platform.machine(), "-R"] if self.aslr_off and aslr else []
        taskset = ["taskset", "-c", ",".join(map(str, self.cpus))] if self.cpus else []
        return [*taskset, *setarch, *prefix, *program]


@runtime_checkable
class Wrappable(Target, Protocol):
    """A target whose instances can be started under a ``Wrap`` (a local command, a
    catalogue container)."""

    def relaunch(self, wrap: Wrap | None) -> None:
        """Stop the target and start it afresh under ``wrap`` (None: as it was given)."""
        ...

    def beside(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        """Run ``argv`` where the target runs: (exit status, output); ``TimeoutError``
        when it takes longer than ``timeout`` seconds."""
        ...

    def seen(self, directory: str) -> str:
        """Where the target sees ``directory`` of this host when a wrap mounts it."""
        ...

    def pinning(self) -> Pinning:
        """What its runtime gets pinned to in a counted measurement, or why it is refused."""
        ...


def on_host(argv: Sequence[str], timeout: float) -> tuple[int, str]:
    """``argv`` run here: (exit status, stdout and stderr)."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{argv[0]} did not finish within {timeout:g} s") from None
    return done.returncode, done.stdout + done.stderr
