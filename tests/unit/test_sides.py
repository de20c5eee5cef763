"""What each side of an A/B run of a process target runs (``targets/sides.py``): the
command mapped into the base tree, and the check that both sides never run the same
files, in a real (temporary) git repository."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_webperf.errors import TargetError
from pytest_webperf.fixture.local import ProcessSpec, start_base
from pytest_webperf.targets.build.command import Build
from pytest_webperf.targets.build.made import Made
from pytest_webperf.targets.gitref import BaseTree, base_tree
from pytest_webperf.targets.process import ProcessTarget
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
    check(tree, change, base, made=None, side=SIDE)  # runs the base's own files


def test_two_sides_resolving_to_the_same_files_are_refused(tmp_path: Path, tree: BaseTree) -> None:
    # a working directory outside the repository compared: nothing maps
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "server.py").write_text("")
    change = Launch((sys.executable, "server.py"), outside)
    base = base_launch(tree, change)
    assert base == change
    with pytest.raises(TargetError) as raised:
        check(tree, change, base, made=None, side=SIDE)
    message = str(raised.value)
    assert message.startswith(f"{SIDE} would run the same files as the change (B)")
    assert f"{outside / 'server.py'} is not mapped into the base tree" in message
    assert "\n" not in message


def test_an_ignored_file_the_base_lacks_asks_for_build(repo: Path, tree: BaseTree) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "server.py").write_text("")
    change = Launch(("python", "build/server.py"), repo)
    with pytest.raises(TargetError) as raised:
        check(tree, change, base_launch(tree, change), made=None, side=SIDE)
    message = str(raised.value)
    assert message.startswith(f"{SIDE} has no build/server.py, which the command names")
    assert "git ignores it" in message and "build=[...]" in message
    # built there: the base tree has it now
    (tree.root / "build").mkdir()
    (tree.root / "build" / "server.py").write_text("")
    check(
        tree, change, base_launch(tree, change), made=Made(Build("make"), tree.root, ""), side=SIDE
    )


def test_a_virtual_environment_in_the_repository_is_shared(repo: Path, tree: BaseTree) -> None:
    venv = repo / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").write_text("")
    change = Launch((str(venv / "bin" / "python"), "app.py"), repo)
    base = base_launch(tree, change)
    assert base.argv[0] == str(venv / "bin" / "python")  # the environment, not the code
    check(tree, change, base, made=None, side=SIDE)


def test_a_file_new_since_the_base_makes_the_target_new(repo: Path, tree: BaseTree) -> None:
    (repo / "new_server.py").write_text("")
    change = Launch(("python", "new_server.py"), repo)
    with pytest.raises(NewSinceBase):
        check(tree, change, base_launch(tree, change), made=None, side=SIDE)


def test_a_working_directory_new_since_the_base_makes_the_target_new(
    repo: Path, tree: BaseTree
) -> None:
    (repo / "svc").mkdir()
    (repo / "svc" / "main.py").write_text("")
    change = Launch(("python", "main.py"), repo / "svc")
    with pytest.raises(NewSinceBase):
        check(tree, change, base_launch(tree, change), made=None, side=SIDE)


def test_a_base_that_exits_at_start_names_itself_and_shows_its_last_lines(
    repo: Path, tree: BaseTree
) -> None:
    def start(launch: Launch, prelude: str) -> Any:
        raise TargetError("app is not running (exit code 2)", "python: can't open file 'app.py'")

    spec = ProcessSpec(Launch(("python", "app.py"), repo), build=None, watch=None)
    with pytest.raises(TargetError) as raised:
        start_base(tree, spec, start)
    message = str(raised.value)
    assert message.startswith(f"the base (A, HEAD {tree.commit[:12]}): app is not running")
    assert "files git ignores (dependencies, build outputs) are not in it" in message
    assert message.endswith("python: can't open file 'app.py'")  # its last lines


def test_an_output_missing_after_a_restore_says_which_cache_entry_and_how_to_clear_it(
    repo: Path, tree: BaseTree
) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "server.py").write_text("")
    change = Launch(("python", "build/server.py"), repo)
    entry = repo.parent / "cache" / "0123.tar"
    made = Made(Build("make"), tree.root, "", restored=entry)
    with pytest.raises(TargetError) as raised:
        check(tree, change, base_launch(tree, change), made=made, side=SIDE)
    message = str(raised.value)
    assert message.startswith(f"{SIDE} has no build/server.py, which the command names")
    assert f"its build's output was restored from the build cache ({entry})" in message
    assert f"rm {entry}" in message and "WEBPERF_BUILD_CACHE=off" in message


# the virtual environment: its interpreter a link out of the tree, which the
# change's command names by a relative path
VENV = Build('mkdir -p .venv/bin && ln -s "$(command -v sh)" .venv/bin/python')


def test_a_base_executable_missing_after_a_restore_says_restored_from_the_build_cache(
    repo: Path, tree: BaseTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", str(tmp_path / "cache"))
    subprocess.run(VENV.argv, cwd=repo, check=True)  # the change's own
    spec = ProcessSpec(Launch((".venv/bin/python", "app.py"), repo), build=VENV, watch=None)
    started: list[Launch] = []

    def pretend(launch: Launch, prelude: str) -> Any:
        started.append(launch)
        return None

    start_base(tree, spec, pretend)  # built there, and kept
    assert started[0].argv[0] == ".venv/bin/python"
    assert (tree.root / ".venv" / "bin" / "python").is_symlink()
    (entry,) = (tmp_path / "cache").glob("*.tar")
    with tarfile.open(entry) as tar:  # an entry that lacks the interpreter
        members = [(m, tar.extractfile(m)) for m in tar if m.name != ".venv/bin/python"]
    with tarfile.open(entry, "w") as tar:
        for member, data in members:
            tar.addfile(member, data)

    def start(launch: Launch, prelude: str) -> Any:
        return ProcessTarget(list(launch.argv), cwd=str(launch.cwd), prelude=prelude).__enter__()

    with base_tree(repo, "HEAD") as fresh, pytest.raises(TargetError) as raised:
        start_base(fresh, spec, start)
    message = str(raised.value)
    assert message.startswith(f"the base (A, HEAD {fresh.commit[:12]}): cannot start")
    assert f"restored from the build cache ({entry})" in message
    assert f"rm {entry}" in message
    # built there, it says so, and what to check
    entry.unlink()
    broken = ProcessSpec(spec.launch, build=Build("true"), watch=None)
    with base_tree(repo, "HEAD") as fresh, pytest.raises(TargetError) as raised:
        start_base(fresh, broken, start)
    message = str(raised.value)
    assert f"build='true' ran there now (in {fresh.root})" in message
    assert "try the build in a fresh clone of that commit" in message


def test_an_environment_the_base_builds_is_its_own_not_the_changes(
    repo: Path, tree: BaseTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", "off")
    (repo / ".gitignore").write_text("build/\n.venv/\nnode_modules/\n")
    install = Build(
        "mkdir -p node_modules/tool/bin node_modules/.bin && touch node_modules/tool/bin/t.js"
        " && ln -s ../tool/bin/t.js node_modules/.bin/tool"
    )
    subprocess.run(install.argv, cwd=repo, check=True)  # the change's own
    spec = ProcessSpec(Launch(("node_modules/.bin/tool",), repo), build=install, watch=None)
    started: list[Launch] = []

    def pretend(launch: Launch, prelude: str) -> Any:
        started.append(launch)

    start_base(tree, spec, pretend)
    # mapped after the build: the base's node_modules, not the working tree's
    assert started[0].argv == ("node_modules/.bin/tool",) and started[0].cwd == tree.root
