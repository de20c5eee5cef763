"""A process target's build (``webperf.process(..., build=...)``): run in a side's tree
before the server starts, its output kept, and cached by the tree's content.

Why: a compiled server (C, Go, Rust, a TypeScript build) runs from files git ignores,
which the base tree of an A/B run (a fresh ``git archive``) does not have. ``build``
makes them on each side, in that side's tree.

The cache: what a build wrote (files created or changed under the tree, ``.git`` left
out) is kept as a tar archive keyed by the tree's content (``gitref.tree_id`` of the
commit, or ``gitref.working_tree_id`` of a work tree), the command, the directory it runs
in and its environment. A tree with the same content gets the archive unpacked instead
of a new build: the base of every step of a bisect is built once. A build must
therefore be a function of the tree: its outputs are files in it. The cache lives in
``$WEBPERF_BUILD_CACHE`` (``off``: none), else ``$XDG_CACHE_HOME/pytest-webperf/builds``
(``~/.cache/...``), and keeps the ``KEEP`` most recently used archives.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.errors import OptionError, TargetError

TIMEOUT_S = 900.0  # a cold Go or Rust build on two cores takes minutes
KEEP = 20  # archives kept in the cache
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


Snapshot = dict[str, tuple[int, int]]  # path under the root -> (size, mtime in ns)


def snapshot(root: Path) -> Snapshot:
    """Every file and link under ``root`` but ``.git``, by size and modification time."""
    found: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (directory == str(root) and d == ".git")]
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(directory, d)))]:
            path = os.path.join(directory, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            found[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return found


def written(before: Snapshot, after: Snapshot) -> list[str]:
    """The paths a build created or changed."""
    return sorted(path for path, stat in after.items() if before.get(path) != stat)


def cache_directory() -> Path | None:
    """Where archives are kept; None when ``$WEBPERF_BUILD_CACHE`` is ``off``."""
    configured = os.environ.get("WEBPERF_BUILD_CACHE", "")
    if configured.lower() in ("off", "0", "no"):
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-webperf" / "builds"


def cache_key(tree: str, build: Build, where: str, env: Mapping[str, str]) -> str:
    """The content a build's outputs depend on: the tree, the command, the directory
    (from the tree's top) and the environment the test gives it."""
    material = json.dumps([tree, build.argv, where, sorted(env.items())])
    return hashlib.sha256(material.encode()).hexdigest()[:32]


class BuildCache:
    """Build outputs as tar archives, one per key, the ``KEEP`` last used kept."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def _archive(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.tar"

    def restore(self, key: str, root: Path) -> list[str] | None:
        """Unpack ``key``'s outputs over ``root``: the paths restored, None on a miss."""
        archive = self._archive(key)
        if archive is None or not archive.is_file():
            return None
        try:
            with tarfile.open(archive) as tar:
                names = tar.getnames()
                if hasattr(tarfile, "data_filter"):  # 3.10.12+, 3.11.4+
                    tar.extractall(root, filter="data")
                else:  # pragma: no cover - our own archive of our own build
                    tar.extractall(root)
        except (OSError, tarfile.TarError):
            return None  # a broken archive is a miss: the build runs
        os.utime(archive)  # recently used
        return names

    def store(self, key: str, root: Path, paths: Sequence[str]) -> None:
        """Keep ``paths`` (under ``root``) as ``key``'s outputs, written atomically."""
        archive = self._archive(key)
        if archive is None:
            return
        archive.parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=archive.parent, suffix=".part")
        os.close(fd)
        try:
            with tarfile.open(scratch, "w") as tar:
                for path in paths:
                    tar.add(root / path, arcname=path, recursive=False)
            os.replace(scratch, archive)
        except OSError:
            Path(scratch).unlink(missing_ok=True)
            return
        self._evict()

    def _evict(self) -> None:
        assert self.directory is not None
        archives = sorted(
            self.directory.glob("*.tar"), key=lambda p: p.stat().st_mtime, reverse=True
        )
        for old in archives[KEEP:]:
            old.unlink(missing_ok=True)


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


def build_in(
    build: Build,
    *,
    root: Path,
    cwd: Path,
    env: Mapping[str, str],
    tree: str,
    side: str,
    cache: BuildCache,
) -> str:
    """``build`` made in the tree at ``root`` (whose content is ``tree``), in ``cwd``:
    restored from ``cache`` when this content was built before, else run and kept.
    Returns what goes into the target's log."""
    where = os.path.relpath(cwd, root)
    key = cache_key(tree, build, where, env)
    restored = cache.restore(key, root)
    if restored is not None:
        return (
            f"$ {build.describe()}  # in {cwd}: {len(restored)} output(s) restored from "
            f"the build cache ({key}), built before for this tree's content\n"
        )
    before = snapshot(root)
    output = run(build, cwd=cwd, env=env, side=side)
    cache.store(key, root, written(before, snapshot(root)))
    return output
