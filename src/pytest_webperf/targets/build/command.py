"""A build command (``build=``): what it is, and running it in a side's tree.

Why: a compiled server (C, Go, Rust, a TypeScript build) or one run from its own virtual
environment or ``node_modules`` runs from files git ignores, which the base tree of an
A/B run (a fresh ``git archive``) does not have. ``build`` makes them on each side, in
that side's tree.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.errors import OptionError, TargetError

TIMEOUT_S = 900.0  # a cold Go or Rust build on two cores takes minutes
TAIL_LINES = 20  # of a failed build's output, in its error


@dataclass(frozen=True)
class Build:
    """A build command: an argument list, or a shell string (run by ``/bin/sh -c``)."""

    command: str | tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        return list(self.command)

    @property
    def words(self) -> list[str]:
        """The command's words (a shell string split as the shell would, roughly)."""
        if not isinstance(self.command, str):
            return list(self.command)
        try:
            return shlex.split(self.command)
        except ValueError:  # an unbalanced quote: the shell will say so
            return self.command.split()

    def describe(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)


def parse_build(value: object) -> Build | None:
    """``build=``: None, a non-empty shell string or a non-empty list of strings."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return Build(value)
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and value
        and all(isinstance(part, str) for part in value)
    ):
        return Build(tuple(value))
    raise OptionError(
        f"webperf.process(build=...): a shell string or a list of strings, not {value!r}"
    )


def run(build: Build, *, cwd: Path, env: Mapping[str, str], side: str) -> str:
    """Run ``build`` in ``cwd``; its output (stdout and stderr), or a TargetError that
    says which side, which command and where, with the output's last lines."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            build.argv,
            cwd=cwd,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise TargetError(
            f"{side}: build={build.describe()!r}: {build.argv[0]!r} was not found (run in {cwd})"
        ) from None
    except subprocess.TimeoutExpired as exc:
        output = (exc.output or b"").decode(errors="replace")
        raise TargetError(
            f"{side}: build={build.describe()!r} did not finish in {TIMEOUT_S:g}s "
            f"(in {cwd}){tail(output)}"
        ) from None
    output = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        raise TargetError(
            f"{side}: build={build.describe()!r} failed (exit code {done.returncode}) "
            f"in {cwd}{tail(output)}"
        )
    took = time.monotonic() - started
    return f"$ {build.describe()}  # in {cwd}, {took:.1f}s\n{output}"


def tail(output: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` of ``output``, indented under a heading (empty: nothing)."""
    kept = [line for line in output.strip().splitlines() if line.strip()][-lines:]
    if not kept:
        return ""
    return "\n--- last lines of its output:\n" + "\n".join(f"  {line}" for line in kept)
