"""What ``webperf.process`` starts: a local command as the target, built first when
``build=`` says how, and in an A/B run also its base, mapped into the base tree,
built there, checked (``targets/sides.py``) and started; or not, when nothing
``watch=`` names (by default the whole repository) differs from the base.

The sides are named in every error: ``the base (A, HEAD~1 0a1b2c3d4e5f)``, ``the change
(B)``, with the path and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf import gitref
from pytest_webperf.ab import Against
from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.gitref import BaseTree, Watch
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.build import Build, BuildCache, build_in, cache_directory, run
from pytest_webperf.targets.sides import Launch, NewSinceBase, base_launch, check, check_directory

# Starts one side: its launch, and what goes first into its log (the build's output).
Start = Callable[[Launch, str], Target]


@dataclass(frozen=True)
class ProcessSpec:
    """A ``webperf.process`` call's command and what the A/B gate needs of it."""

    launch: Launch
    build: Build | None
    watch: Sequence[str | os.PathLike[str]] | None


def build_change(spec: ProcessSpec, *, side: str) -> str:
    """The build in the working tree (cached by its content where it is a git work
    tree); what goes into the log. Nothing when there is no build."""
    if spec.build is None:
        return ""
    cwd = spec.launch.cwd
    try:
        top = gitref.toplevel(cwd)
        tree = gitref.working_tree_id(cwd)
    except OptionError:  # not a repository: built every time
        return run(spec.build, cwd=cwd, env=spec.launch.env, side=side)
    return build_in(
        spec.build,
        root=top,
        cwd=cwd,
        env=spec.launch.env,
        tree=tree,
        side=side,
        cache=BuildCache(cache_directory()),
    )


def watched(tree: BaseTree, spec: ProcessSpec) -> Watch:
    """``watch=`` as pathspecs from the repository's top: each path relative to the
    command's working directory (or absolute), ``!path`` left out; each must exist in
    the working tree or at the base ref (a typo would skip every change)."""
    if spec.watch is None:
        return Watch()
    include: list[str] = []
    exclude: list[str] = []
    for item in spec.watch:
        text = str(item)
        negated = text.startswith("!")
        path = Path(text.lstrip("!"))
        path = path if path.is_absolute() else spec.launch.cwd / path
        try:
            rel = tree.spec(path)
        except OptionError as exc:
            raise OptionError(f"webperf.process(watch=...): {exc}") from None
        if not path.exists() and not (tree.root / rel).exists():
            raise OptionError(
                f"webperf.process(watch=...): {text!r} names nothing in the working tree "
                f"or at {tree.ref} ({path})"
            )
        (exclude if negated else include).append(rel)
    if not include:
        include.append(".")
    return Watch(tuple(include), tuple(exclude))


def base_side(tree: BaseTree) -> str:
    return f"the base (A, {tree.ref} {tree.commit[:12]})"


def start_base(tree: BaseTree, spec: ProcessSpec, start: Start) -> Target | None:
    """The base side, built and checked first; None when its command names a file new
    since the base (the target is new: measured alone)."""
    side = base_side(tree)
    launch = base_launch(tree, spec.launch)
    try:
        check_directory(tree, spec.launch, launch, side=side)
        log = ""
        if spec.build is not None:
            log = build_in(
                spec.build,
                root=tree.root,
                cwd=launch.cwd,
                env=launch.env,
                tree=gitref.tree_id(tree.repo, tree.commit),
                side=side,
                cache=BuildCache(cache_directory()),
            )
        check(tree, spec.launch, launch, built=spec.build is not None, side=side)
    except NewSinceBase:
        return None
    try:
        return start(launch, log)
    except TargetError as exc:
        first = str(exc).split("\n--- last lines")[0]
        raise TargetError(
            f"{side}: {first}. The base tree is a git archive of {tree.ref}: files git "
            "ignores (dependencies, build outputs) are not in it; webperf.process(..., "
            "build=[...]) makes them on both sides",
            exc.logs,
        ) from None


def start_process(spec: ProcessSpec, start: Start, against: Callable[[], Against] | None) -> Target:
    """The change started (built first), and with ``against`` paired with its base."""
    side = "the change (B)" if against is not None else "webperf.process"
    change = start(spec.launch, build_change(spec, side=side))
    if against is None:
        return change
    base = against()
    tree = base.tree
    watch = watched(tree, spec)
    compared = watch.describe(tree.repo)

    def started_base() -> Target | None:
        return start_base(tree, spec, start)

    return base.pair(
        change, changed=tree.differs(watch), start_base=started_base, compared=compared
    )


def launch_of(
    argv: Sequence[str], cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None
) -> Launch:
    return Launch(tuple(str(a) for a in argv), Path(cwd or os.getcwd()), dict(env or {}))
