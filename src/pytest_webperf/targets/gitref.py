"""The base of an A/B run: the repository's tree at a git ref, as files on disk.

    with base_tree(rootdir, "origin/main") as tree:
        tree.commit            # the full sha the ref named when the run started
        tree.map(path)         # the same path inside the base tree (None: not in the repo)
        tree.differs(watch)    # does the working tree differ from the ref in what ``watch`` names?

The tree is extracted with ``git archive`` into a temporary directory (nothing is
written into the user's repository: no worktree, no branch, no stash) and removed when
the run ends. Submodules are not part of ``git archive``'s output: a target whose code
lives in a submodule is compared against the working tree's copy, and the report says
the base tree had none. Every user error (no git, not a repository, an unknown ref, a
shallow clone that lacks the ref) is one ``OptionError`` line that says what to do.

Also ``git_commit``: the checked-out commit of a work tree, as results and baselines
record it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_webperf.errors import OptionError


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=120
        )
    except FileNotFoundError:
        raise OptionError(
            "--webperf-against needs git, and no 'git' command was found (install git)"
        ) from None


def _text(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode(errors="replace").strip()


def _error(done: subprocess.CompletedProcess[bytes]) -> str:
    """The last line git printed on stderr."""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def toplevel(directory: Path) -> Path:
    """The repository that holds ``directory``; an OptionError when there is none."""
    done = _git(directory, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise OptionError(
            f"--webperf-against needs a git repository, and {directory} is not inside one "
            "(run pytest from your repository's checkout; in CI check out the full history, "
            "e.g. actions/checkout with fetch-depth: 0)"
        )
    return Path(_text(done)).resolve()


def resolve_commit(repo: Path, ref: str) -> str:
    """The full sha ``ref`` names in ``repo``; an OptionError for a ref git does not know."""
    if not ref or ref.startswith("-"):
        raise OptionError(f"--webperf-against={ref!r} is not a git ref")
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        shallow = _text(_git(repo, "rev-parse", "--is-shallow-repository")) == "true"
        hint = (
            " This is a shallow clone: fetch the base (git fetch --unshallow, or "
            "actions/checkout with fetch-depth: 0)."
            if shallow
            else " Check the name (git branch -a, git tag), and fetch it if it is remote."
        )
        raise OptionError(f"--webperf-against={ref}: git knows no commit by that name.{hint}")
    return _text(done)


# Never what a server runs: Python's byte-code caches and pytest's cache, which a test run
# itself writes into the tree (an untracked file counts as a change otherwise).
DEFAULT_EXCLUDE_GLOBS = ("**/__pycache__/**", "**/.pytest_cache/**")


@dataclass(frozen=True)
class Watch:
    """What decides whether a target changed since the base: pathspecs from the
    repository's top (``"."`` is all of it), less ``exclude``; Python's and pytest's
    caches are never counted (``DEFAULT_EXCLUDE_GLOBS``)."""

    include: tuple[str, ...] = (".",)
    exclude: tuple[str, ...] = ()

    def describe(self, repo: Path) -> str:
        """``server/, go.mod`` (but ``!docs``), or ``the whole repository /path``."""
        if self.include == (".",):
            named = f"the whole repository {repo}"
        else:
            named = ", ".join("the repository's top" if s == "." else s for s in self.include)
        if self.exclude:
            named += f" (but {', '.join(self.exclude)})"
        return named


@dataclass(frozen=True)
class BaseTree:
    """The repository at ``ref`` (``commit``), extracted under ``root``."""

    ref: str
    commit: str
    repo: Path  # the working tree's top level
    root: Path  # where the base tree was extracted
    dirty: bool  # the working tree had uncommitted changes when the run started

    def relative(self, path: Path) -> Path | None:
        """``path`` relative to the repository, None when it lies outside it."""
        resolved = path.resolve()
        return resolved.relative_to(self.repo) if resolved.is_relative_to(self.repo) else None

    def map(self, path: Path) -> Path | None:
        """The same path in the base tree; None outside the repository or absent at ref."""
        rel = self.relative(path)
        if rel is None:
            return None
        mapped = self.root / rel
        return mapped if mapped.exists() else None

    def map_arg(self, arg: str) -> str:
        """A command-line argument or env value: an absolute path inside the repository
        becomes the same path in the base tree; anything else is left as it is."""
        if not arg.startswith("/"):
            return arg
        rel = self.relative(Path(arg))
        return arg if rel is None else str(self.root / rel)

    def spec(self, path: Path) -> str:
        """``path`` as a pathspec from the repository's top ("." for the top itself); an
        OptionError outside the repository."""
        rel = self.relative(path)
        if rel is None:
            raise OptionError(
                f"{path} is outside the repository {self.repo} that --webperf-against compares"
            )
        return "." if str(rel) == "." else rel.as_posix()

    def differs(self, watch: Watch) -> bool:
        """Whether the working tree differs from ``commit`` in what ``watch`` names
        (tracked changes, staged or not, and untracked files that are not ignored)."""

        def top(spec: str) -> str:  # ":(top)." names nothing: the top is ":(top)"
            return "" if spec == "." else spec

        specs = [f":(top){top(s)}" for s in watch.include]
        specs += [f":(top,exclude){top(s)}" for s in watch.exclude]
        specs += [f":(top,exclude,glob){glob}" for glob in DEFAULT_EXCLUDE_GLOBS]
        diff = _git(self.repo, "diff", "--quiet", self.commit, "--", *specs)
        if diff.returncode not in (0, 1):
            raise OptionError(f"git diff against {self.ref} failed: {_error(diff)}")
        if diff.returncode == 1:
            return True
        untracked = _git(self.repo, "ls-files", "--others", "--exclude-standard", "--", *specs)
        return bool(_text(untracked))

    def changed(self, path: Path) -> bool:
        """Whether the working tree under ``path`` differs from ``commit`` (the whole
        repository when ``path`` lies outside it)."""
        spec = self.spec(path) if self.relative(path) is not None else "."
        return self.differs(Watch((spec,)))

    def ignored(self, path: Path) -> bool:
        """Whether git ignores ``path`` in the working tree (a build's output, a virtual
        environment): such a file is not in the base tree, whatever the ref."""
        rel = self.relative(path)
        if rel is None:
            return False
        done = _git(self.repo, "check-ignore", "-q", "--", rel.as_posix())
        return done.returncode == 0

    def describe(self) -> dict[str, object]:
        return {"ref": self.ref, "commit": self.commit, "dirty": self.dirty}


def extract(repo: Path, commit: str, into: Path) -> None:
    done = _git(repo, "archive", "--format=tar", commit)
    if done.returncode != 0:
        raise OptionError(f"git archive {commit[:12]} failed: {_error(done)}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        if hasattr(tarfile, "data_filter"):  # 3.10.12+, 3.11.4+
            archive.extractall(into, filter="data")
        else:  # pragma: no cover - git archive of the user's own commit, no links outside
            archive.extractall(into)


def is_dirty(directory: Path) -> bool:
    """Whether the work tree holding ``directory`` differs from its commit: changes to
    tracked files, staged or not, or untracked files that are not ignored (a new file
    can change what runs as much as an edit). The one meaning of "dirty" everywhere."""
    done = _git(directory, "status", "--porcelain", "--untracked-files=normal")
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, "git status", stderr=done.stderr)
    return bool(_text(done))


@contextmanager
def base_tree(directory: Path, ref: str) -> Iterator[BaseTree]:
    """The tree of ``ref`` in the repository holding ``directory``, removed at exit."""
    repo = toplevel(directory)
    commit = resolve_commit(repo, ref)
    dirty = is_dirty(repo)
    scratch = Path(tempfile.mkdtemp(prefix="webperf-base-"))
    try:
        root = as_long_as(repo, scratch)
        extract(repo, commit, root)
        yield BaseTree(ref, commit, repo, root, dirty)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def as_long_as(repo: Path, scratch: Path) -> Path:
    """A new directory under ``scratch`` whose path is exactly as long as ``repo``'s (or
    ``scratch`` itself when ``repo``'s is not longer): the base runs from there. A
    program's paths (its argv, its working directory, its files' names, CPython's
    ``sys.path``) are strings it allocates and hashes: of another length, they move
    every later allocation and the base's counts with them (a stdlib server: 0.03 %
    apart between a 9- and an 80-character directory, each side's repetitions 0.01 %
    apart), so an A/A run would not centre on zero."""
    add = len(str(repo)) - len(str(scratch))  # "/name" segments of at most 200 characters
    if add < 2:
        return scratch
    segments = -(-add // 201)
    each, extra = divmod(add - segments, segments)
    names = ["b" * (each + (i < extra)) for i in range(segments)]
    root = scratch.joinpath(*names)
    root.mkdir(parents=True)
    assert len(str(root)) == len(str(repo))
    return root


def tree_id(repo: Path, commit: str) -> str:
    """The id of ``commit``'s tree: equal for two commits with the same content."""
    done = _git(repo, "rev-parse", f"{commit}^{{tree}}")
    if done.returncode != 0:
        raise OptionError(f"git rev-parse {commit[:12]}^{{tree}} failed: {_error(done)}")
    return _text(done)


@dataclass(frozen=True)
class Content:
    """What git holds of a tree: its id (equal for two trees with the same content) and
    its paths from the repository's top (files, links, and submodules as one path each).
    Whatever else lies in the tree is not its content: a build's output, or a file git
    ignores."""

    id: str
    paths: frozenset[str]


def _paths(listing: subprocess.CompletedProcess[bytes]) -> frozenset[str]:
    return frozenset(p for p in listing.stdout.decode(errors="surrogateescape").split("\0") if p)


def commit_content(repo: Path, commit: str) -> Content:
    """``commit``'s tree: what ``git archive`` of it writes (``extract``)."""
    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", commit)
    if listing.returncode != 0:
        raise OptionError(f"git ls-tree {commit[:12]} failed: {_error(listing)}")
    return Content(tree_id(repo, commit), _paths(listing))


def working_tree_id(directory: Path) -> str:
    """The id git would give the work tree holding ``directory`` if every change in it
    were committed (tracked edits and untracked files that are not ignored, but the
    caches ``differs`` never counts): equal for two trees with the same content."""
    return working_content(directory).id


def working_content(directory: Path) -> Content:
    """The work tree holding ``directory`` as git would commit it (``working_tree_id``),
    with its paths. Written through a copy of the index, so the user's own index is never
    touched."""
    repo = toplevel(directory)
    index = Path(_text(_git(repo, "rev-parse", "--path-format=absolute", "--git-path", "index")))
    with tempfile.TemporaryDirectory(prefix="webperf-index-") as scratch:
        copy = Path(scratch) / "index"
        if index.is_file():
            shutil.copyfile(index, copy)
        environ = {**os.environ, "GIT_INDEX_FILE": str(copy)}
        excluded = [f":(exclude,glob){glob}" for glob in DEFAULT_EXCLUDE_GLOBS]
        done = []
        for args in (("add", "-A", "--", ".", *excluded), ("write-tree",), ("ls-files", "-z")):
            done.append(
                subprocess.run(
                    ["git", "-C", str(repo), *args],
                    capture_output=True,
                    check=False,
                    timeout=300,
                    env=environ,
                )
            )
            if done[-1].returncode != 0:
                raise OptionError(f"git {args[0]} (a copy of the index) failed: {_error(done[-1])}")
        return Content(_text(done[1]), _paths(done[2]))


def map_command(tree: BaseTree, argv: Sequence[str]) -> list[str]:
    return [tree.map_arg(arg) for arg in argv]


def git_commit(cwd: Path | None = None) -> dict[str, Any] | None:
    """The checked-out commit and whether the tree is dirty, if this is a git work tree."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": is_dirty(cwd or Path.cwd())}
    except (OSError, subprocess.SubprocessError):
        return None
