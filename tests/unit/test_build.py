"""A process target's build (``targets/build/``): run in a tree, its whole output kept by
the tree's content and restored, all or nothing, instead of a second build."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from pytest_webperf.errors import OptionError, TargetError
from pytest_webperf.targets.build import staging
from pytest_webperf.targets.build.cache import BuildCache, cache_key
from pytest_webperf.targets.build.command import Build, parse_build
from pytest_webperf.targets.build.made import Made, build_in
from pytest_webperf.targets.build.outputs import foreign, pinned, snapshot, written
from pytest_webperf.targets.gitref import Content

# counts its runs in $RUNS (outside the trees) and writes its output under the tree
BUILD = Build('mkdir -p out && echo "$PWD" >> "$RUNS" && echo binary > out/server')
CONTENT = Content("t1", frozenset({"src/main.c"}))


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
    (tmp_path / "empty").mkdir()  # an empty directory is an output too
    (tmp_path / ".git" / "index").write_text("z")
    assert written(before, snapshot(tmp_path)) == ["empty", "new"]


def tree(root: Path) -> Path:
    """A tree holding CONTENT alone: its source directory."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return root / "src"


def make(root: Path, cache: BuildCache, runs: Path, *, build: Build = BUILD, **kw: str) -> Made:
    return build_in(
        build,
        root=root,
        cwd=root / "src",
        env={"RUNS": str(runs), **kw},
        content=CONTENT,
        side="B",
        cache=cache,
    )


def runs(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_tree_with_the_same_content_is_restored_not_rebuilt(tmp_path: Path) -> None:
    cache, counter = BuildCache(tmp_path / "cache"), tmp_path / "runs.txt"
    first, second = tree(tmp_path / "a"), tree(tmp_path / "b")
    made = make(first.parent, cache, counter)
    assert made.log.startswith(f"$ {BUILD.describe()}  # in {first}")
    assert made.restored is None and "# kept in the build cache (" in made.log
    made = make(second.parent, cache, counter)
    assert made.restored is not None and made.restored.parent == tmp_path / "cache"
    assert f"restored from the build cache ({made.restored})" in made.log
    assert (second / "out" / "server").read_text() == "binary\n"
    assert runs(counter) == [str(first)]  # restored, not run there
    # another environment: another key, built
    third = tree(tmp_path / "c")
    make(third.parent, cache, counter, CC="clang")
    assert runs(counter) == [str(first), str(third)]
    assert cache_key("t", BUILD, ".", {"A": "1"}) != cache_key("t", BUILD, ".", {"A": "2"})


def test_the_key_follows_the_toolchain_and_the_programs_the_command_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    tool = bin_ / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    build = Build("mytool --out bin/server")
    key = cache_key("t", build, ".", {})
    assert cache_key("t", build, ".", {}) == key  # stable
    os.utime(tool, ns=(1, 1))  # an upgraded tool
    assert cache_key("t", build, ".", {}) != key
    key = cache_key("t", build, ".", {})
    monkeypatch.setenv("GOFLAGS", "-race")
    assert cache_key("t", build, ".", {}) != key
    monkeypatch.delenv("GOFLAGS")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")  # not the toolchain's: the same key
    assert cache_key("t", build, ".", {}) == key


def test_a_tree_is_made_once_per_run(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    src = tree(tmp_path / "a")
    first = make(src.parent, BuildCache(tmp_path / "cache"), counter)
    again = make(src.parent, BuildCache(tmp_path / "cache"), counter)
    assert runs(counter) == [str(src)]
    assert again.log == f"$ {BUILD.describe()}  # in {src}: made earlier in this run\n{first.log}"


def test_without_a_cache_every_build_runs(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    for name in "ab":
        made = make(tree(tmp_path / name).parent, BuildCache(None), counter)
        assert "not kept: no build cache (WEBPERF_BUILD_CACHE=off)" in made.log
    assert len(runs(counter)) == 2


# what pip does to a virtual environment: the whole of it when there is none, else only
# what changed (here one file); a restore of the second kind of run lacks the interpreter
VENV_LIKE = Build(
    "if [ -e env/bin/server ]; then echo more > env/lib/extra; else mkdir -p env/bin env/lib "
    '&& echo binary > env/bin/server && chmod +x env/bin/server; fi; echo "$PWD" >> "$RUNS"'
)


def test_a_build_over_a_tree_that_held_outputs_still_gives_an_empty_tree_a_whole_output(
    tmp_path: Path,
) -> None:
    cache, counter = BuildCache(tmp_path / "cache"), tmp_path / "runs.txt"
    used = tree(tmp_path / "used")
    # the outputs of an earlier run, at another commit
    subprocess.run(VENV_LIKE.argv, cwd=used, env={**os.environ, "RUNS": str(counter)}, check=True)
    made = make(used.parent, cache, counter, build=VENV_LIKE)
    assert made.restored is None
    assert "not taken from or kept in the build cache: the tree held src/env/" in made.log
    assert not list((tmp_path / "cache").glob("*.tar"))  # nothing partial was kept
    empty = tree(tmp_path / "empty")
    make(empty.parent, cache, counter, build=VENV_LIKE)
    assert (empty / "env" / "bin" / "server").read_text() == "binary\n"
    # and that clean build is kept whole: the next empty tree is restored with it
    restored = tree(tmp_path / "restored")
    assert make(restored.parent, cache, counter, build=VENV_LIKE).restored is not None
    assert os.access(restored / "env" / "bin" / "server", os.X_OK)
    assert runs(counter) == [str(used), str(used), str(empty)]


# what npm and python -m venv make: relative links (node_modules/.bin), an absolute link
# to the interpreter outside the tree, an executable, an empty directory
REAL_OUTPUTS = Build(
    "mkdir -p node_modules/semver/bin node_modules/.bin venv/bin venv/include && "
    "echo 'console.log(1)' > node_modules/semver/bin/semver.js && "
    "chmod +x node_modules/semver/bin/semver.js && "
    "ln -s ../semver/bin/semver.js node_modules/.bin/semver && "
    "ln -s /bin/sh venv/bin/python3 && ln -s python3 venv/bin/python"
)


def test_links_absolute_and_relative_executables_and_empty_directories_round_trip(
    tmp_path: Path,
) -> None:
    cache, counter = BuildCache(tmp_path / "cache"), tmp_path / "runs.txt"
    make(tree(tmp_path / "a").parent, cache, counter, build=REAL_OUTPUTS)
    src = tree(tmp_path / "b")
    assert make(src.parent, cache, counter, build=REAL_OUTPUTS).restored is not None
    assert os.readlink(src / "node_modules" / ".bin" / "semver") == "../semver/bin/semver.js"
    assert (src / "node_modules" / ".bin" / "semver").read_text() == "console.log(1)\n"
    assert os.readlink(src / "venv" / "bin" / "python3") == "/bin/sh"
    assert os.readlink(src / "venv" / "bin" / "python") == "python3"
    mode = (src / "node_modules" / "semver" / "bin" / "semver.js").stat().st_mode
    assert mode & stat.S_IXUSR
    assert (src / "venv" / "include").is_dir()


def test_an_output_naming_its_tree_is_built_in_each_tree_never_kept(tmp_path: Path) -> None:
    cache, counter = BuildCache(tmp_path / "cache"), tmp_path / "runs.txt"
    venv = Build(
        'mkdir -p .srv/bin && printf "home = /usr/bin\\ncommand = python3 -m venv $PWD/.srv\\n"'
        ' > .srv/pyvenv.cfg && echo "$PWD" >> "$RUNS"'
    )
    for name in "ab":
        made = make(tree(tmp_path / name).parent, cache, counter, build=venv)
        assert made.restored is None
        assert (
            f"not kept in the build cache: src/.srv/pyvenv.cfg names the tree it was built "
            f"in ({tmp_path / name})"
        ) in made.log
    assert len(runs(counter)) == 2 and not list((tmp_path / "cache").glob("*.tar"))


def test_what_pins_an_output_to_its_tree(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_text(f"#!{root}/.venv/bin/python\n")
    (root / "bin" / "compiled").write_bytes(b"\x7fELF\0" + str(root).encode())
    (root / "bin" / "other").write_text(f"{root}-other/x\n")  # another directory's name
    (root / "bin" / "up").symlink_to(root / "bin" / "compiled")
    (root / "bin" / "out").symlink_to("/usr/bin/env")
    assert pinned(root, ["bin/compiled", "bin/other", "bin/out"]) is None
    assert pinned(root, ["bin/compiled", "bin/tool"]) == "bin/tool"
    assert pinned(root, ["bin/up"]) == "bin/up"


def test_a_tree_holding_anything_but_its_content_is_not_clean(tmp_path: Path) -> None:
    src = tree(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("x")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "main.cpython-311.pyc").write_text("")
    assert foreign(tmp_path, CONTENT.paths) is None
    (tmp_path / "sub" / "module").mkdir(parents=True)  # a submodule: one path of the content
    (tmp_path / "sub" / "module" / "file").write_text("")
    content = {*CONTENT.paths, "sub/module"}
    assert foreign(tmp_path, content) is None
    (src / "out").mkdir()
    assert foreign(tmp_path, content) is None  # an empty directory holds nothing
    (src / "out" / "server").write_text("")
    assert foreign(tmp_path, content) == "src/out/server"


def entries(root: Path) -> dict[str, tuple[int, bytes | str]]:
    """Everything under ``root``: mode and content (a link's target)."""
    found: dict[str, tuple[int, bytes | str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory, name)
            mode = path.lstat().st_mode
            if path.is_symlink():
                found[str(path.relative_to(root))] = (mode, os.readlink(path))
            elif path.is_file():
                found[str(path.relative_to(root))] = (mode, path.read_bytes())
            else:
                found[str(path.relative_to(root))] = (mode, b"")
    return found


def archive(path: Path, members: list[tuple[str, bytes | None]]) -> None:
    """A tar of ``members``: (name, content), None for a directory."""
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def held(tmp_path: Path) -> Path:
    """A tree holding a file the archive replaces and a directory it adds to."""
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.c").write_text("source\n")
    (root / "src" / "generated.h").write_text("old\n")
    return root


def test_a_restore_cut_short_while_unpacking_leaves_the_tree_as_it_was(
    tmp_path: Path, held: Path
) -> None:
    cache = BuildCache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    # the second member cannot be written: its parent is a file
    archive(
        tmp_path / "cache" / "k.tar",
        [("out", None), ("out/server", b"binary"), ("out/server/x", b"x"), ("z", b"z")],
    )
    before = entries(held)
    assert cache.restore("k", held) is None
    assert entries(held) == before


def test_a_restore_failing_while_moving_into_place_moves_everything_back(
    tmp_path: Path, held: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = BuildCache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    members: list[tuple[str, bytes | None]] = [
        ("a-first", b"1"),
        ("src", None),
        ("src/generated.h", b"new\n"),  # replaces the tree's own
        ("src/out", None),
        ("src/out/server", b"binary"),
        ("z-last", b"2"),
    ]
    archive(tmp_path / "cache" / "k.tar", members)
    before = entries(held)
    rename, calls = os.rename, []

    def failing(source: str | Path, target: str | Path) -> None:
        calls.append(target)
        if str(target).endswith("z-last"):
            raise OSError("no space left on device")
        rename(source, target)

    monkeypatch.setattr(staging.os, "rename", failing)
    assert cache.restore("k", held) is None
    monkeypatch.undo()
    assert len(calls) > 3  # it failed midway, after moving the others
    assert entries(held) == before
    # and whole when nothing fails
    assert cache.restore("k", held) == tmp_path / "cache" / "k.tar"
    assert (held / "src" / "generated.h").read_text() == "new\n"
    assert (held / "src" / "out" / "server").read_bytes() == b"binary"
    assert not [p for p in held.iterdir() if p.name.startswith(staging.STAGING_PREFIX)]


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", ".git/config"])
def test_a_member_leaving_the_tree_is_refused_and_nothing_is_written(
    tmp_path: Path, held: Path, name: str
) -> None:
    cache = BuildCache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    archive(tmp_path / "cache" / "k.tar", [("fine", b"1"), (name, b"2")])
    before = entries(held)
    assert cache.restore("k", held) is None
    assert entries(held) == before and not (tmp_path / "escape").exists()


def test_a_failed_build_names_the_side_the_command_and_its_output(tmp_path: Path) -> None:
    src = tree(tmp_path)
    failing = Build("echo 'main.c:1: error: expected ;' >&2; exit 2")
    with pytest.raises(TargetError) as raised:
        build_in(
            failing,
            root=tmp_path,
            cwd=src,
            env={},
            content=CONTENT,
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
            content=Content("t", frozenset()),
            side="B",
            cache=BuildCache(None),
        )
