"""A side's tree made ready: its build run there, or the build's whole output restored
from the cache; and what happened (``Made``), which starts the target's log and is said
again when that side cannot start.

The cache is used only for a tree that holds its content alone (``outputs.foreign``): a
base tree (a fresh ``git archive``), or a fresh checkout. There, what the build wrote is
its whole output: restored all or nothing, or, after a build, kept, unless it names the
tree it was built in (``outputs.pinned``: a virtual environment), which runs nowhere
else and is built in each tree. A tree that already holds outputs (a working tree after
an earlier run) is built in place, neither restored into nor kept. A tree is made once
per key in a run: the tests after the first that start the same build there use it as
it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_webperf.targets.build.cache import BuildCache, cache_key
from pytest_webperf.targets.build.command import Build, run
from pytest_webperf.targets.build.outputs import foreign, pinned, snapshot, written
from pytest_webperf.targets.gitref import Content


@dataclass(frozen=True)
class Made:
    """How a side's tree got its build's output: ``restored`` from a cache entry, or built
    there; ``log`` starts the target's log."""

    build: Build
    cwd: Path
    log: str
    restored: Path | None = None  # the cache entry it came from

    def account(self) -> str:
        """What happened, for an error about that side."""
        if self.restored is not None:
            return (
                f"its build's output was restored from the build cache ({self.restored}), "
                "not built there now"
            )
        return f"build={self.build.describe()!r} ran there now (in {self.cwd})"

    def fix(self) -> str:
        """What to do when what the command runs is missing or broken there."""
        if self.restored is not None:
            return (
                f"remove that entry (rm {self.restored}), or set WEBPERF_BUILD_CACHE=off, "
                "and the build runs there instead"
            )
        return (
            "make the build produce it (try the build in a fresh clone of that commit, "
            "where nothing git ignores is present yet)"
        )


# what this process made, by tree and key: the tests of a run build a tree once
_made: dict[tuple[Path, str], Made] = {}


def build_in(
    build: Build,
    *,
    root: Path,
    cwd: Path,
    env: Mapping[str, str],
    content: Content,
    side: str,
    cache: BuildCache,
) -> Made:
    """``build`` made in the tree at ``root`` (whose content is ``content``), in ``cwd``,
    once per run: restored from ``cache`` when this content was built before, else run,
    and kept when its output is whole and can move."""
    key = cache_key(content.id, build, os.path.relpath(cwd, root), env)
    earlier = _made.get((root, key))
    if earlier is not None:
        log = f"$ {build.describe()}  # in {cwd}: made earlier in this run\n{earlier.log}"
        return replace(earlier, log=log)
    held = foreign(root, content.paths)
    if held is not None:
        note = (
            f"# not taken from or kept in the build cache: the tree held {held} before the "
            "build (git ignores it), so what the build writes here is not its whole output"
        )
        made = Made(build, cwd, ended(run(build, cwd=cwd, env=env, side=side)) + note + "\n")
    elif (restored := cache.restore(key, root)) is not None:
        log = (
            f"$ {build.describe()}  # in {cwd}: restored from the build cache "
            f"({restored}), built before for this tree's content\n"
        )
        made = Made(build, cwd, log, restored)
    else:
        before = snapshot(root)
        output = run(build, cwd=cwd, env=env, side=side)
        kept = keep(cache, key, root, written(before, snapshot(root)))
        made = Made(build, cwd, ended(output) + kept + "\n")
    _made[(root, key)] = made
    return made


def ended(text: str) -> str:
    """``text`` ending with a line break."""
    return text if text.endswith("\n") else text + "\n"


def keep(cache: BuildCache, key: str, root: Path, outputs: list[str]) -> str:
    """``outputs`` kept in ``cache`` under ``key`` unless they cannot move; what the log
    says of it."""
    if cache.directory is None:
        return "# not kept: no build cache (WEBPERF_BUILD_CACHE=off)"
    named = pinned(root, outputs)
    if named is not None:
        return (
            f"# not kept in the build cache: {named} names the tree it was built in "
            f"({root}), so the output runs only there: it is built in each tree"
        )
    try:
        return f"# kept in the build cache ({cache.store(key, root, outputs)})"
    except OSError as exc:
        return f"# not kept in the build cache: {exc}"
