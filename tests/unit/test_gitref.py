"""The base tree of an A/B run, from a real (temporary) git repository."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.targets.gitref import (
    as_long_as,
    base_tree,
    git_commit,
    map_command,
    resolve_commit,
    toplevel,
)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "servers" / "app").mkdir(parents=True)
    (tmp_path / "servers" / "app" / "server.toml").write_text('name = "app"\n')
    (tmp_path / "README").write_text("base\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "base")
    return tmp_path


def test_the_base_tree_holds_the_ref_and_is_removed_afterwards(repo: Path) -> None:
    (repo / "README").write_text("changed\n")
    with base_tree(repo, "HEAD") as tree:
        assert tree.commit == git(repo, "rev-parse", "HEAD")
        assert (tree.root / "README").read_text() == "base\n"
        assert tree.dirty
        root = tree.root
    assert not root.exists()
    assert git(repo, "status", "--porcelain") == "M README"  # the user's tree untouched


def test_paths_map_into_the_base_tree(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    with base_tree(repo, "HEAD") as tree:
        assert tree.map(repo / "servers" / "app") == tree.root / "servers" / "app"
        assert tree.map(repo / "servers" / "new") is None  # not at the ref
        assert tree.map(outside) is None
        assert map_command(tree, ["python", str(repo / "README"), "-v", str(outside)]) == [
            "python",
            str(tree.root / "README"),
            "-v",
            str(outside),
        ]


def test_changes_are_seen_under_a_path_tracked_or_untracked(repo: Path) -> None:
    with base_tree(repo, "HEAD") as tree:
        assert not tree.changed(repo / "servers")
        (repo / "servers" / "app" / "new.py").write_text("x = 1\n")
        assert tree.changed(repo / "servers")  # untracked counts
        assert not tree.changed(repo / "README")
        (repo / "servers" / "app" / "new.py").unlink()
        (repo / "servers" / "app" / "server.toml").write_text('name = "app2"\n')
        assert tree.changed(repo / "servers" / "app")


def test_an_unknown_ref_is_one_line_naming_it(repo: Path) -> None:
    with pytest.raises(OptionError, match=r"--webperf-against=nope: git knows no commit"):
        resolve_commit(repo, "nope")
    with pytest.raises(OptionError, match="is not a git ref"):
        resolve_commit(repo, "--upload-pack=evil")


def test_outside_a_repository_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="needs a git repository"):
        toplevel(tmp_path)


def test_dirty_means_the_same_for_a_result_and_for_the_base(repo: Path) -> None:
    """An untracked file that is not ignored makes the tree dirty for a result's record
    and for an A/B run's base alike; an ignored one does not."""
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    (repo / "run.log").write_text("ignored\n")
    assert git_commit(repo) == {"commit": git(repo, "rev-parse", "HEAD"), "dirty": False}
    with base_tree(repo, "HEAD") as tree:
        assert not tree.dirty
    (repo / "servers" / "app" / "new.py").write_text("print()\n")
    assert git_commit(repo)["dirty"] is True  # type: ignore[index]
    with base_tree(repo, "HEAD") as tree:
        assert tree.dirty


def test_what_is_watched_decides_whether_the_tree_differs(repo: Path) -> None:
    from pytest_webperf.targets.gitref import Watch

    (repo / "README").write_text("changed\n")
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "x.pyc").write_text("")  # a test run's own litter
    with base_tree(repo, "HEAD") as tree:
        assert tree.differs(Watch())  # the whole repository, by default
        assert not tree.differs(Watch(("servers",)))
        assert not tree.differs(Watch((".",), ("README",)))  # README left out
        (repo / "README").write_text("base\n")
        assert not tree.differs(Watch())  # byte-code caches never count
        assert Watch(("servers", "go.mod")).describe(repo) == "servers, go.mod"
        assert Watch((".",), ("docs",)).describe(repo) == f"the whole repository {repo} (but docs)"


def test_a_work_tree_id_is_its_content(repo: Path) -> None:
    from pytest_webperf.targets.gitref import tree_id, working_tree_id

    head = git(repo, "rev-parse", "HEAD")
    assert working_tree_id(repo) == tree_id(repo, head)  # nothing changed
    (repo / "new.txt").write_text("x\n")
    changed = working_tree_id(repo)
    assert changed != tree_id(repo, head)
    assert git(repo, "status", "--porcelain") == "?? new.txt"  # the user's index untouched
    (repo / "new.txt").unlink()
    assert working_tree_id(repo) == tree_id(repo, head)


def test_a_trees_content_is_what_git_holds_of_it_not_what_it_ignores(repo: Path) -> None:
    from pytest_webperf.targets.gitref import commit_content, working_content

    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    committed = {".gitignore", "README", "servers/app/server.toml"}
    head = commit_content(repo, git(repo, "rev-parse", "HEAD"))
    assert head.paths == committed
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").write_text("")
    (repo / "new.txt").write_text("x\n")
    (repo / "README").unlink()
    work = working_content(repo)
    assert work.paths == {".gitignore", "servers/app/server.toml", "new.txt"}
    assert work.id != head.id
    (repo / "new.txt").unlink()
    (repo / "README").write_text("base\n")
    assert working_content(repo) == head  # what it ignores is not its content


@settings(max_examples=40)
@given(st.integers(1, 700))
def test_the_base_runs_from_a_path_as_long_as_the_working_trees(length: int) -> None:
    with tempfile.TemporaryDirectory(prefix="webperf-base-") as scratch:
        repo = Path("/" + "r" * (length - 1))
        root = as_long_as(repo, Path(scratch))
        assert root.is_dir()
        if length > len(scratch) + 1:
            assert len(str(root)) == length and root != Path(scratch)
        else:  # a shorter working tree: the temporary directory itself, as long as it is
            assert root == Path(scratch)
