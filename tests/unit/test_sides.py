"""What each side of an A/B run of a process target runs (``targets/sides.py``): the
command mapped into the base tree, and the check that both sides never run the same
files, in a real (temporary) git repository."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_webperf.errors import TargetError
from pytest_webperf.targets.gitref import BaseTree, base_tree
from pytest_webperf.targets.sides import Launch, NewSinceBase, base_launch, check


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
    repo = tmp_path / "repo"
    (repo / "tests" / "perf").mkdir(parents=True)
    (repo / "app.py").write_text("print('base')\n")
    (repo / "tests" / "perf" / "test_app.py").write_text("")
    (repo / ".gitignore").write_text("build/\n.venv/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "app.py").write_text("print('change')\n")
    return repo


@pytest.fixture
def tree(repo: Path) -> Iterator[BaseTree]:
    with base_tree(repo, "HEAD") as tree:
        yield tree


SIDE = "the base (A, HEAD 0123456789ab)"


def test_the_working_directory_and_paths_inside_the_repository_are_mapped(
    repo: Path, tree: BaseTree
) -> None:
    change = Launch(("python", "../../app.py", str(repo / "app.py")), repo / "tests" / "perf")
    base = base_launch(tree, change)
    assert base.cwd == tree.root / "tests" / "perf"
    assert base.argv == ("python", "../../app.py", str(tree.root / "app.py"))
    check(tree, change, base, built=False, side=SIDE)  # runs the base's own files


def test_two_sides_resolving_to_the_same_files_are_refused(tmp_path: Path, tree: BaseTree) -> None:
    # a working directory outside the repository compared: nothing maps
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "server.py").write_text("")
    change = Launch((sys.executable, "server.py"), outside)
    base = base_launch(tree, change)
    assert base == change
    with pytest.raises(TargetError) as raised:
        check(tree, change, base, built=False, side=SIDE)
    message = str(raised.value)
    assert message.startswith(f"{SIDE} would run the same files as the change (B)")
    assert f"{outside / 'server.py'} is not mapped into the base tree" in message
    assert "\n" not in message


def test_an_ignored_file_the_base_lacks_asks_for_build(repo: Path, tree: BaseTree) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "server.py").write_text("")
    change = Launch(("python", "build/server.py"), repo)
    with pytest.raises(TargetError) as raised:
        check(tree, change, base_launch(tree, change), built=False, side=SIDE)
    message = str(raised.value)
    assert message.startswith(f"{SIDE} has no build/server.py, which the command names")
    assert "git ignores it" in message and "build=[...]" in message
    # built there: the base tree has it now
    (tree.root / "build").mkdir()
    (tree.root / "build" / "server.py").write_text("")
    check(tree, change, base_launch(tree, change), built=True, side=SIDE)


def test_a_virtual_environment_in_the_repository_is_shared(repo: Path, tree: BaseTree) -> None:
    venv = repo / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").write_text("")
    change = Launch((str(venv / "bin" / "python"), "app.py"), repo)
    base = base_launch(tree, change)
    assert base.argv[0] == str(venv / "bin" / "python")  # the environment, not the code
    check(tree, change, base, built=False, side=SIDE)


def test_a_file_new_since_the_base_makes_the_target_new(repo: Path, tree: BaseTree) -> None:
    (repo / "new_server.py").write_text("")
    change = Launch(("python", "new_server.py"), repo)
    with pytest.raises(NewSinceBase):
        check(tree, change, base_launch(tree, change), built=False, side=SIDE)


def test_a_working_directory_new_since_the_base_makes_the_target_new(
    repo: Path, tree: BaseTree
) -> None:
    (repo / "svc").mkdir()
    (repo / "svc" / "main.py").write_text("")
    change = Launch(("python", "main.py"), repo / "svc")
    with pytest.raises(NewSinceBase):
        check(tree, change, base_launch(tree, change), built=False, side=SIDE)


def test_a_base_that_exits_at_start_names_itself_and_shows_its_last_lines(
    repo: Path, tree: BaseTree
) -> None:
    from pytest_webperf.fixture.local import ProcessSpec, start_base

    def start(launch: Launch, prelude: str) -> Any:
        raise TargetError("app is not running (exit code 2)", "python: can't open file 'app.py'")

    spec = ProcessSpec(Launch(("python", "app.py"), repo), build=None, watch=None)
    with pytest.raises(TargetError) as raised:
        start_base(tree, spec, start)
    message = str(raised.value)
    assert message.startswith(f"the base (A, HEAD {tree.commit[:12]}): app is not running")
    assert "files git ignores (dependencies, build outputs) are not in it" in message
    assert message.endswith("python: can't open file 'app.py'")  # its last lines
