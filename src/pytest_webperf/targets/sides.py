"""What each side of an A/B run of a process target runs: the change's command (B) as it
runs in the working tree, mapped into the base tree (A), and checked before the first
pair, so that a run never compares a commit with itself.

Mapping: the working directory and every path the command or its environment names
inside the repository point into the base tree. A relative argument follows the
working directory. Two kinds of file are not in a base tree, which ``git archive``
made: files git ignores. Of those, a virtual environment's or ``node_modules``'s (the
interpreter and the packages, the environment both sides share) keep their path;
any other (a build's output) must be made by ``build=``, or the base is refused in one
line. A file new since the base (not ignored) makes the target new: measured alone.

The self-check: when the trees differ but both sides would run the same files from the
same directory (say a working directory outside the repository that
``--webperf-against`` compares), the run stops with one line naming the path that was
not mapped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_webperf.errors import TargetError
from pytest_webperf.targets.build.made import Made
from pytest_webperf.targets.gitref import BaseTree

# a directory holding one of these is an environment (its files are not the code compared)
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")
ENVIRONMENT_DIRECTORIES = ("node_modules",)


@dataclass(frozen=True)
class Launch:
    """What one side starts: its command, working directory and environment."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)


class NewSinceBase(Exception):
    """The command names a file the base tree does not have (and git does not ignore):
    the target is new since the base, measured alone."""


def _value(arg: str) -> str:
    """The path part of an argument: ``--config=conf/x.toml`` names ``conf/x.toml``."""
    if arg.startswith("-") and "=" in arg:
        return arg.split("=", 1)[1]
    return arg


def named(arg: str, cwd: Path) -> Path | None:
    """The existing file or directory ``arg`` names from ``cwd`` (absolute, or relative
    to it), resolved; None when it names none."""
    value = _value(arg)
    if not value or value.startswith("-") or "\n" in value:
        return None
    path = Path(value) if os.path.isabs(value) else cwd / value
    try:
        return path.resolve() if path.exists() else None
    except (OSError, RuntimeError):
        return None


def in_environment(path: Path, top: Path) -> bool:
    """Whether ``path`` lies in a virtual environment or ``node_modules`` under ``top``."""
    for parent in [path, *path.parents]:
        if parent == top or not parent.is_relative_to(top):
            return False
        if parent.name in ENVIRONMENT_DIRECTORIES:
            return True
        if any((parent / marker).exists() for marker in ENVIRONMENT_MARKERS):
            return True
    return False


def _counterpart(tree: BaseTree, path: Path) -> Path | None:
    """``path`` (resolved) in the base tree; None outside the repository."""
    rel = tree.relative(path)
    return None if rel is None else tree.root / rel


def base_launch(tree: BaseTree, change: Launch) -> Launch:
    """The change's launch as it runs in the base tree: the working directory mapped,
    absolute paths inside the repository mapped, environment files kept where they are.
    Nothing is checked here: a build may still make what is missing (``check``)."""
    cwd = _counterpart(tree, change.cwd.resolve()) or change.cwd

    def mapped(text: str, at: Path) -> str:
        path = named(text, at)
        value = _value(text)
        if path is None or not os.path.isabs(value):
            return text
        counterpart = _counterpart(tree, path)
        if counterpart is None or (not counterpart.exists() and in_environment(path, tree.repo)):
            return text
        return text[: len(text) - len(value)] + str(counterpart)

    def relative_kept(text: str) -> str:
        """A relative argument into an environment the base lacks: made absolute."""
        path = named(text, change.cwd)
        value = _value(text)
        if path is None or os.path.isabs(value) or not in_environment(path, tree.repo):
            return text
        counterpart = cwd / value
        if counterpart.exists():
            return text
        return text[: len(text) - len(value)] + str(path)

    argv = tuple(relative_kept(mapped(arg, change.cwd)) for arg in change.argv)
    env = {key: mapped(value, change.cwd) for key, value in change.env.items()}
    return Launch(argv, cwd, env)


def _paths(launch: Launch) -> list[tuple[str, Path | None]]:
    """What a launch names, in order: each argument and environment value's file."""
    texts = [*launch.argv, *launch.env.values()]
    return [(text, named(text, launch.cwd)) for text in texts]


def check_directory(tree: BaseTree, change: Launch, base: Launch, *, side: str) -> None:
    """The base's working directory exists (before a build runs in it): a directory new
    since the base makes the target new; an ignored one is refused."""
    if base.cwd.is_dir():
        return
    rel = tree.relative(change.cwd.resolve())
    if tree.ignored(change.cwd):
        raise TargetError(
            f"{side} has no directory {rel} to start in (cwd=...): git ignores it, so the "
            f"base tree (a git archive of {tree.ref}) has none. Start the server from a "
            "directory the repository tracks (build=[...] runs there too)"
        )
    raise NewSinceBase(f"{rel}/ is new since {tree.ref}")


def check(tree: BaseTree, change: Launch, base: Launch, *, made: Made | None, side: str) -> None:
    """Refuse a base that cannot run what the change runs, or that would run the very
    same files: a TargetError of one line naming the path, how the base tree was made
    (``made``: built there, restored from the build cache, None: not built) and what to
    do. Raises ``NewSinceBase`` for a file that is new since the base ref."""
    check_directory(tree, change, base, side=side)
    for (text, path), (_, there) in zip(_paths(change), _paths(base), strict=True):
        if path is None or tree.relative(path) is None or there is not None:
            continue
        rel = tree.relative(path)
        if not tree.ignored(path):
            raise NewSinceBase(f"{rel} is new since {tree.ref}")
        if made is None:
            raise TargetError(
                f"{side} has no {rel}, which the command names ({text!r}): it is in the "
                f"working tree, and git ignores it, so the base tree (a git archive of "
                f"{tree.ref}) has none. Build it on both sides: webperf.process(..., "
                "build=[...]) runs in each side's tree before it starts"
            )
        raise TargetError(
            f"{side} has no {rel}, which the command names ({text!r}): the base tree is "
            f"a git archive of {tree.ref}, and {made.account()}. To fix: {made.fix()}"
        )
    if base.cwd.resolve() != change.cwd.resolve():
        return
    if [p for _, p in _paths(base)] != [p for _, p in _paths(change)] or base.env != change.env:
        return
    # the program comes last: the files it is given are what a reader recognises
    paths = _paths(change)
    ordered = [*paths[1:], *paths[:1]]
    unmapped = next(
        (p for _, p in ordered if p is not None and not in_environment(p, tree.repo)),
        change.cwd,
    )
    raise TargetError(
        f"{side} would run the same files as the change (B), though the trees differ: "
        f"{unmapped} is not mapped into the base tree, since it lies outside the "
        f"repository {tree.repo} that --webperf-against compares. Run pytest from that "
        "repository's checkout (its --rootdir there), or name paths inside it"
    )


def describe_paths(launch: Launch) -> Sequence[str]:
    """The files a launch names, for the report."""
    return [str(path) for _, path in _paths(launch) if path is not None]
