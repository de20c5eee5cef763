"""A process target's build (``targets/build.py``): run in a tree, its outputs kept by
the tree's content and restored instead of a second build."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.targets.build import (
    Build,
    BuildCache,
    build_in,
    cache_key,
    parse_build,
    snapshot,
    written,
)

# appends a line to a counter file (how many times it ran) and writes its output
BUILD = Build("mkdir -p out && echo built >> ../runs.txt && echo binary > out/server")


@pytest.mark.parametrize("value", ["", "   ", [], ["make", 1], 3, b"make"])
def test_a_build_is_a_shell_string_or_a_list_of_strings(value: object) -> None:
    with pytest.raises(OptionError, match=r"webperf.process\(build=...\)"):
        parse_build(value)
    assert parse_build(None) is None
    assert parse_build("make") == Build("make")
    assert parse_build(["make", "server"]) == Build(("make", "server"))
    assert Build(("make", "server")).argv == ["make", "server"]
    assert Build("make && make").argv == ["/bin/sh", "-c", "make && make"]


def test_what_a_build_wrote_is_what_changed(tmp_path: Path) -> None:
    (tmp_path / "kept").write_text("x")
    (tmp_path / ".git").mkdir()
    before = snapshot(tmp_path)
    (tmp_path / "new").write_text("y")
    (tmp_path / ".git" / "index").write_text("z")
    assert written(before, snapshot(tmp_path)) == ["new"]


def tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return root / "src"


def test_a_tree_with_the_same_content_is_restored_not_rebuilt(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    first, second = tree(tmp_path / "a"), tree(tmp_path / "b")
    log = build_in(BUILD, root=first.parent, cwd=first, env={}, tree="t1", side="B", cache=cache)
    assert log.startswith(f"$ {BUILD.describe()}  # in {first}")
    assert (first / "out" / "server").read_text() == "binary\n"
    log = build_in(BUILD, root=second.parent, cwd=second, env={}, tree="t1", side="A", cache=cache)
    assert "restored from the build cache" in log
    assert (second / "out" / "server").read_text() == "binary\n"
    # restored, not run there: the counter holds the one run made in the first tree
    assert (second.parent / "runs.txt").read_text() == "built\n"
    # other content, another command or another environment: built
    build_in(BUILD, root=second.parent, cwd=second, env={}, tree="t2", side="A", cache=cache)
    assert (second.parent / "runs.txt").read_text() == "built\nbuilt\n"
    assert cache_key("t", BUILD, ".", {"A": "1"}) != cache_key("t", BUILD, ".", {"A": "2"})


def test_without_a_cache_every_build_runs(tmp_path: Path) -> None:
    src = tree(tmp_path)
    for _ in range(2):
        build_in(BUILD, root=tmp_path, cwd=src, env={}, tree="t", side="B", cache=BuildCache(None))
    assert (tmp_path / "runs.txt").read_text() == "built\nbuilt\n"


def test_a_failed_build_names_the_side_the_command_and_its_output(tmp_path: Path) -> None:
    src = tree(tmp_path)
    failing = Build("echo 'main.c:1: error: expected ;' >&2; exit 2")
    with pytest.raises(TargetError) as raised:
        build_in(
            failing,
            root=tmp_path,
            cwd=src,
            env={},
            tree="t",
            side="the base (A, x)",
            cache=BuildCache(tmp_path / "cache"),
        )
    message = str(raised.value)
    assert message.startswith(f"the base (A, x): build={failing.describe()!r} failed (exit code 2)")
    assert "main.c:1: error: expected ;" in message
    assert not list((tmp_path / "cache").glob("*.tar"))  # a failure is not kept


def test_a_missing_build_tool_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="'no-such-make' was not found"):
        build_in(
            Build(("no-such-make",)),
            root=tmp_path,
            cwd=tmp_path,
            env={},
            tree="t",
            side="B",
            cache=BuildCache(None),
        )
