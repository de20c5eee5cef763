"""``build=`` end to end, as users' projects do it: a pip project whose server runs from a
virtual environment the build makes (uvicorn, which reads no ``$PORT``: a launcher gives
it the port), an npm project whose ``node_modules`` the build installs, and a Go module
the build compiles.

Each is run twice in the same checkout, as in the issue that found the cache restoring
half a virtual environment: an A/A run at the first commit, then, with that run's outputs
left in the working tree, an A/B run at the next commit against the first. Both sides
must start both times; where the output can move between trees, the second run's base
comes from the build cache, built by the first. What is judged is errors alone: these
tests read no timed figure.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from pathlib import Path

import pytest
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import SHORT

RUN = [
    *SHORT,
    "--webperf-duration=0.5s",
    "--webperf-warmup=0s",
    "--webperf-repeat=1",
    "--webperf-against-budget=1s",  # one pair: both sides started is the point
    "--webperf-profile=off",
    "--webperf-compare-fail=errors:50%",
    "--webperf-json=ab.json",
]
# what the builds, the runs and the tools write (pytester moves $HOME here: .cache,
# .config, .rustup, ...), ignored as a user's repository would
IGNORED = ".*\n!/.gitignore\nnode_modules/\nbin/\ngo/\nstdout\nstderr\nrunpytest-*\nab.json\n"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty repository directory; the build cache in ``tmp_path/builds``, and the
    toolchains' own download and compile caches where they are for the user (pytester
    moves ``$HOME`` into the repository)."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    caches = {
        "GOCACHE": home / ".cache" / "go-build",
        "GOMODCACHE": home / "go" / "pkg" / "mod",
        "npm_config_cache": home / ".npm",
        "PIP_CACHE_DIR": home / ".cache" / "pip",
    }
    for name, default in caches.items():
        monkeypatch.setenv(name, os.environ.get(name) or str(default))
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", str(tmp_path / "builds"))
    (pytester.path / ".gitignore").write_text(IGNORED)
    return pytester.path


AA = ("--webperf-against=HEAD", "--webperf-against-always")
AB = ("--webperf-against=HEAD~1",)


def twice(
    pytester: pytest.Pytester, runs: tuple[tuple[str, ...], ...], code: str, builds: Path
) -> list[str]:
    """Two runs in the same checkout, each at a commit of its own (``code`` changed), the
    first run's outputs left in the working tree: both sides started both times and
    every request answered. ``runs``: each run's A/B arguments (AA or AB). Returns the
    trees builds ran in (``$BUILDS``: a line per build)."""
    repo = pytester.path
    commit_base(repo)
    for number, against in enumerate(runs):
        if number > 0 or against == AB:  # a commit of its own, or a base to compare with
            comment = "#" if code.endswith(".py") else "//"
            with (repo / code).open("a") as source:
                source.write(f"{comment} change {number}\n")
            git(repo, "commit", "-q", "-am", f"change {number}")
        result = pytester.runpytest_subprocess(*RUN, *against)
        result.assert_outcomes(passed=1)
        (entry,) = json.loads((repo / "ab.json").read_text())["tests"]
        assert entry["repetitions"] and entry["base_repetitions"], entry["verdict"]
        assert entry["verdict"]["status"] == "pass", entry["verdict"]
    return builds.read_text().splitlines()


def archives(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "builds").glob("*.tar"))


def inner_test(body: str, build: str, builds: Path) -> str:
    """The inner test: ``webperf.process(COMMAND, build=...)``, each build counted."""
    return f"""
def test_built(webperf):
    target = webperf.process(
        {body},
        name="built",
        build={build!r} + ' && echo "$PWD" >> "$BUILDS"',
        env={{"BUILDS": {str(builds)!r}}},
    )
    webperf.http(target, path="/")
"""


# uvicorn reads no $PORT: the user's launcher hands it over
SERVE = """
import os

import uvicorn

uvicorn.run("app:app", host="127.0.0.1", port=int(os.environ["PORT"]), lifespan="off")
"""
ASGI_APP = """
async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})
"""
# pip installs into the environment from outside it: no ensurepip, seconds per side
VENV = (
    "python3 -m venv --without-pip .srv && "
    "python3 -m pip --python .srv/bin/python install -q -r requirements.txt"
)


def test_a_pip_project_run_from_its_virtual_environment_starts_both_sides_twice(
    pytester: pytest.Pytester, project: Path, tmp_path: Path
) -> None:
    (project / "requirements.txt").write_text("uvicorn==0.32.1\n")
    (project / "serve.py").write_text(SERVE)
    (project / "app.py").write_text(ASGI_APP)
    pytester.makepyfile(
        test_built=inner_test('[".srv/bin/python", "serve.py"]', VENV, tmp_path / "builds.txt")
    )
    # an A/B run, then an A/A run at the next commit: its base has the content of the
    # working tree the first run's environment was left in
    built = twice(pytester, (AB, AA), "app.py", tmp_path / "builds.txt")
    # a virtual environment names its tree: built in each, never kept (the working tree's
    # a second time over the first run's, as pip does)
    assert built.count(str(project)) == 2 and len(built) == 4, built
    assert archives(tmp_path) == []


SERVER_JS = """
const http = require("http");
const semver = require("semver");
http.createServer((req, res) => res.end(semver.valid("1.2.3") || "invalid"))
  .listen(Number(process.env.PORT), "127.0.0.1");
"""
PACKAGE_JSON = {
    "name": "built",
    "version": "1.0.0",
    "private": True,
    "dependencies": {"semver": "7.6.3"},
}
PACKAGE_LOCK = {
    "name": "built",
    "version": "1.0.0",
    "lockfileVersion": 3,
    "requires": True,
    "packages": {
        "": {"name": "built", "version": "1.0.0", "dependencies": {"semver": "7.6.3"}},
        "node_modules/semver": {
            "version": "7.6.3",
            "integrity": (
                "sha512-oVekP1cKtI+CTDvHWYFUcMtsK/00wmAEfyqKfNdARm8u1wNVhSgaX7A8d4UuIlUI5e84iEwO"
                "hs7ZPYRmzU9U6A=="
            ),
            "license": "ISC",
            "bin": {"semver": "bin/semver.js"},
            "engines": {"node": ">=10"},
        },
    },
}


def test_an_npm_project_gets_its_node_modules_from_the_cache_the_second_time(
    pytester: pytest.Pytester, project: Path, tmp_path: Path
) -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("no npm and node on this machine: the project cannot be built")
    (project / "package.json").write_text(json.dumps(PACKAGE_JSON, indent=2))
    (project / "package-lock.json").write_text(json.dumps(PACKAGE_LOCK, indent=2))
    (project / "server.js").write_text(SERVER_JS)
    command = '["node", "server.js"]'
    pytester.makepyfile(
        test_built=inner_test(command, "npm ci --no-audit --no-fund", tmp_path / "builds.txt")
    )
    built = twice(pytester, (AA, AB), "server.js", tmp_path / "builds.txt")
    # the first run's base built and kept; the second's base restored from it
    assert len(built) == 3 and built.count(str(project)) == 2, built
    assert len(archives(tmp_path)) == 1


MAIN_GO = """package main

import (
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil)
}
"""


def test_a_go_module_gets_its_binary_from_the_cache_the_second_time(
    pytester: pytest.Pytester, project: Path, tmp_path: Path
) -> None:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain (go) on this machine: the module cannot be built")
    (project / "go.mod").write_text("module example.com/built\n\ngo 1.21\n")
    (project / "main.go").write_text(MAIN_GO)
    pytester.makepyfile(
        test_built=inner_test('["bin/server"]', "go build -o bin/server .", tmp_path / "builds.txt")
    )
    built = twice(pytester, (AA, AB), "main.go", tmp_path / "builds.txt")
    assert len(built) == 3 and built.count(str(project)) == 2, built
    assert len(archives(tmp_path)) == 1
