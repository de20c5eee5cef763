"""The build cache: a build's whole output kept as one tar archive per key, put back into a
tree with the same content instead of a second build (the base of every step of a bisect
is built once), the ``KEEP`` most recently used kept.

The key is what the output depends on: the tree's content (git's tree id), the command,
the directory it runs in (from the tree's top), the environment the test gives it, the
toolchain's variables of the environment it runs in (``PATH``, ``CC``, ``GOFLAGS``, ...),
the programs the command names as found on that ``PATH`` (the file each resolves to, its
size and time: an upgraded compiler is another key), the machine, and the cache's format.

It lives in ``$WEBPERF_BUILD_CACHE`` (``off``: none), else
``$XDG_CACHE_HOME/pytest-webperf/builds`` (``~/.cache/...``); clearing it is removing
that directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_webperf.targets.build.command import Build
from pytest_webperf.targets.build.staging import unpack

KEEP = 20  # archives kept in the cache
# 2: the whole output of a build over a tree holding its content alone (1 kept what a
# build changed, whatever the tree held before: an archive could lack an interpreter)
FORMAT = 2
# the variables a toolchain reads (compilers, Go, Rust, Node, pip, uv, pyenv, the JVM)
TOOLCHAIN = re.compile(
    r"(PATH|CC|CXX|CPP|LD|AR|CFLAGS|CXXFLAGS|CPPFLAGS|LDFLAGS|PKG_CONFIG_PATH|"
    r"(GO|CGO_|CARGO_|RUST|NODE_|NPM_CONFIG_|PIP_|UV_|PYENV_|JAVA_|MAVEN_)[A-Z0-9_]*)"
)


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
    """What a build's output depends on (the module's docstring), hashed."""
    environment = {**os.environ, **env}
    toolchain = sorted((k, v) for k, v in environment.items() if TOOLCHAIN.fullmatch(k))
    material = json.dumps(
        [
            FORMAT,
            tree,
            build.argv,
            where,
            sorted(env.items()),
            toolchain,
            programs(build, environment.get("PATH", os.defpath)),
            [platform.system(), platform.machine()],
        ]
    )
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def programs(build: Build, path: str) -> list[tuple[str, str, int, int]]:
    """The programs ``build`` names that ``path`` finds: each word, the file it resolves
    to, that file's size and modification time."""
    found = []
    for word in dict.fromkeys(build.words):
        if not word or "/" in word or word.startswith("-"):
            continue
        where = shutil.which(word, path=path)
        if where is None:
            continue
        real = os.path.realpath(where)
        try:
            stat = os.stat(real)
        except OSError:
            continue
        found.append((word, real, stat.st_size, stat.st_mtime_ns))
    return found


class BuildCache:
    """Build outputs as tar archives, one per key, the ``KEEP`` last used kept."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def entry(self, key: str) -> Path | None:
        """Where ``key``'s archive is (or would be); None without a cache."""
        return None if self.directory is None else self.directory / f"{key}.tar"

    def restore(self, key: str, root: Path) -> Path | None:
        """``key``'s output put under ``root``, all or nothing: the archive it came from,
        or None (no such entry, or one that could not be put back whole: the tree is as
        it was, and the build runs)."""
        archive = self.entry(key)
        if archive is None or not archive.is_file():
            return None
        try:
            unpack(archive, root)
        except (OSError, tarfile.TarError):
            return None
        with contextlib.suppress(OSError):  # evicted meanwhile: what it held is in place
            os.utime(archive)  # recently used
        return archive

    def store(self, key: str, root: Path, paths: Sequence[str]) -> Path:
        """``paths`` (under ``root``, parents first) kept as ``key``'s output, written
        atomically; the archive. Raises OSError when it cannot be written."""
        archive = self.entry(key)
        if archive is None:
            raise OSError("no build cache ($WEBPERF_BUILD_CACHE=off)")
        archive.parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=archive.parent, suffix=".part")
        os.close(fd)
        try:
            with tarfile.open(scratch, "w") as tar:
                for path in paths:
                    tar.add(root / path, arcname=path, recursive=False)
            os.replace(scratch, archive)
        except BaseException:
            Path(scratch).unlink(missing_ok=True)
            raise
        self._evict()
        return archive

    def _evict(self) -> None:
        assert self.directory is not None
        archives = []
        for path in self.directory.glob("*.tar"):
            try:
                archives.append((path.stat().st_mtime, path))
            except OSError:  # removed by another run meanwhile
                continue
        for _, old in sorted(archives, reverse=True)[KEEP:]:
            old.unlink(missing_ok=True)
