"""Installed from a wheel into someone else's project, everything still works.

The wheel is built from a copy of the sources (no git metadata, so the fallback
version too), installed into a fresh virtual environment in a temporary directory
(dependencies through pip's cache, no system site-packages), and that
environment's own pytest and ``webperf`` run projects that have no checkout of
this repository around them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.e2e.shared import once

from pytest_webperf.targets.catalog import Catalog, image_tag

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "src", "servers")
QUICK = (
    "-p",
    "no:cacheprovider",
    "--webperf-concurrency=2",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=1",
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _run(*cmd: str | Path, cwd: Path | None = None) -> None:
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode:
        pytest.fail(f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel, built once per session (all workers), and a venv with it installed."""
    return installed_in(once(tmp_path_factory, "wheel", build_and_install))


@pytest.fixture(scope="session")
def pure(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel without the native loop (``WEBPERF_PURE=1``, as where no compiler is)."""

    def build(base: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("WEBPERF_PURE", "1")
            build_and_install(base)

    return installed_in(once(tmp_path_factory, "pure", build))


def installed_in(base: Path) -> Installed:
    (wheel,) = (base / "dist").glob("pytest_webperf-*.whl")
    return Installed(wheel, base / "venv")


def build_and_install(base: Path) -> None:
    source = base / "source"
    source.mkdir()
    # not "build": the sources' own package targets/build/ would go with setuptools' dirs
    # (which are at the root, not among SOURCES)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", base / "dist", source)
    (wheel,) = (base / "dist").glob("pytest_webperf-*.whl")
    venv = base / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An empty project directory; nothing of this checkout leaks into its runs."""
    for name in list(os.environ):
        if name in ("PYTHONPATH", "PYTEST_ADDOPTS", "VIRTUAL_ENV") or name.startswith("WEBPERF_"):
            monkeypatch.delenv(name)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    return pytester


def repo_tag(name: str) -> str:
    """The tag this checkout's servers/ gives ``name``: the wheel must find the same image."""
    catalog = Catalog([ROOT / "servers"])
    return image_tag(catalog.image_spec(catalog.get(name)))


def test_the_wheel_ships_the_catalogue(installed: Installed) -> None:
    shipped = {
        name.removeprefix("pytest_webperf/servers/")
        for name in zipfile.ZipFile(installed.wheel).namelist()
        if name.startswith("pytest_webperf/servers/")
    }
    in_git = subprocess.run(
        ["git", "ls-files", "servers"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert shipped == {name.removeprefix("servers/") for name in in_git}


SHIPPED_TESTS = """
import os
from pathlib import Path

import pytest_webperf
from pytest_webperf.targets.catalog import BUILTIN_DIR


def test_from_the_installed_package():
    assert Path(os.environ["VENV"]) in Path(pytest_webperf.__file__).parents
    assert BUILTIN_DIR == Path(pytest_webperf.__file__).parent / "servers"


def test_shipped_nginx(webperf):
    target = webperf.server("nginx")
    assert target.describe()["parts"]["nginx"]["image"] == os.environ["NGINX_TAG"]
    result = webperf.http(target, path="/hello")
    assert result.requests > 0 and result.errors == 0


def test_own_composite_on_the_shipped_broker(webperf):
    target = webperf.server("hello-mqtt")  # servers/hello-mqtt: nginx's image + mosquitto
    parts = target.describe()["parts"]
    assert parts["mosquitto"]["image"] == os.environ["MOSQUITTO_TAG"]
    result = webperf.http(target, path="/hello")
    assert result.requests > 0 and result.errors == 0
"""

OWN_COMPOSITE = """\
name = "hello-mqtt"
description = "the project's own composite: nginx's image, with the shipped broker beside it"
image_from = "nginx"

[[depends]]
server = "mosquitto"
port_env = "MQTT_PORT"
"""


def test_shipped_servers_and_a_composite_on_them(
    installed: Installed, project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, engine: None
) -> None:
    project.mkdir("tests")
    (project.path / "tests" / "test_shipped.py").write_text(SHIPPED_TESTS)
    (project.path / "servers" / "hello-mqtt").mkdir(parents=True)
    (project.path / "servers" / "hello-mqtt" / "server.toml").write_text(OWN_COMPOSITE)
    monkeypatch.setenv("VENV", str(installed.venv))
    monkeypatch.setenv("NGINX_TAG", repo_tag("nginx"))
    monkeypatch.setenv("MOSQUITTO_TAG", repo_tag("mosquitto"))
    result = project.run(installed.bin("pytest"), *QUICK, timeout=240)
    result.stdout.fnmatch_lines(["*test_shipped_nginx*no-baseline*", "*3 passed*"])
    assert result.ret == 0
    assert "not built" not in result.stdout.str()  # the native loop generated the load


def test_the_wheel_carries_the_native_loop_and_the_pure_one_falls_back(
    installed: Installed, pure: Installed, project: pytest.Pytester, engine: None
) -> None:
    def native(wheel: Path) -> list[str]:
        names = zipfile.ZipFile(wheel).namelist()
        return [n for n in names if n.startswith("pytest_webperf/swarm/_hotloop")]

    (compiled,) = native(installed.wheel)
    assert compiled.endswith(".so")
    assert native(pure.wheel) == [] and pure.wheel.name.endswith("-py3-none-any.whl")
    project.makepyfile(
        test_mine="""
        def test_hello(webperf):
            assert webperf.http(webperf.server("nginx"), path="/hello").errors == 0

        def test_again(webperf):
            assert webperf.http(webperf.server("nginx"), path="/hello").errors == 0
        """
    )
    result = project.run(pure.bin("pytest"), *QUICK, "test_mine.py", timeout=240)
    result.stdout.fnmatch_lines(["*2 passed*"])
    said = [line for line in result.stdout.lines if "native request loop is not built" in line]
    assert len(said) == 1 and "the lean user" in said[0]  # once, at the start
    native_asked = project.run(pure.bin("pytest"), "--webperf-user=native", "test_mine.py")
    assert native_asked.ret == pytest.ExitCode.USAGE_ERROR
    native_asked.stderr.fnmatch_lines(
        ["*--webperf-user=native: the native request loop is not built*"]
    )


def test_a_users_copy_of_nginx_replaces_the_shipped_one(
    installed: Installed, project: pytest.Pytester, engine: None
) -> None:
    shipped = installed.venv.glob("lib/python*/site-packages/pytest_webperf/servers/nginx")
    shutil.copytree(next(shipped), project.path / "servers" / "nginx")
    listed = project.run(installed.bin("webperf"), "list")
    listed.stdout.fnmatch_lines(["nginx * http * servers (replaces built-in) *"])
    listed.stdout.fnmatch_lines(["mosquitto * mqtt * built-in *"])
    built = project.run(installed.bin("webperf"), "build", "nginx", timeout=240)
    # the copy has the shipped files, so the same content hash: no second image
    built.stdout.fnmatch_lines([f"nginx * {repo_tag('nginx')}"])
    project.makepyfile(
        test_mine="""
        def test_my_nginx(webperf):
            assert webperf.http(webperf.server("nginx"), path="/hello").errors == 0
        """
    )
    result = project.run(installed.bin("pytest"), *QUICK, "test_mine.py", timeout=240)
    result.stdout.fnmatch_lines(["*1 passed*"])


def test_the_example_project_runs_from_the_wheel(
    installed: Installed, project: pytest.Pytester, engine: None
) -> None:
    shutil.copytree(ROOT / "examples" / "greeter", project.path, dirs_exist_ok=True)
    result = project.run(installed.bin("pytest"), "tests/perf", *QUICK, timeout=240)
    result.stdout.fnmatch_lines(["*test_hello*app*no-baseline*", "*1 passed*"])
    assert result.ret == 0
