"""``webperf new`` writes a catalogue entry the catalogue accepts; ``webperf prune``
removes only the tags the catalogue no longer builds (against a fake engine)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_webperf.cli import main
from pytest_webperf.commands.prune import PrunePlan, current_tags, plan
from pytest_webperf.targets import engine
from pytest_webperf.targets.base import free_port, probe_http, wait_healthy
from pytest_webperf.targets.catalog import Catalog, image_tag


def test_new_writes_an_entry_the_catalogue_accepts(tmp_path: Path, capsys):
    assert main(["new", "my-server", "--directory", str(tmp_path)]) == 0
    spec = Catalog([tmp_path]).get("my-server")
    assert spec.health == "/health" and "/hello" in spec.routes
    dockerfile = (tmp_path / "my-server" / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM debian:bookworm-slim\n")
    assert "wrote" in capsys.readouterr().out


def test_new_refuses_to_overwrite(tmp_path: Path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "server.py").write_text("mine")
    assert main(["new", "taken", "--directory", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "taken" / "server.py").read_text() == "mine"


def test_new_refuses_a_bad_name(tmp_path: Path, capsys):
    assert main(["new", "My Server", "--directory", str(tmp_path)]) == 2
    assert "bad server name" in capsys.readouterr().err


@pytest.mark.parametrize("bind", [None, "127.0.0.2"])
def test_the_example_server_answers_health_and_hello(tmp_path: Path, bind: str | None):
    """On 127.0.0.1, or where its server.toml's bind_env says (--webperf-target-bind)."""
    main(["new", "example", "--directory", str(tmp_path)])
    assert Catalog([tmp_path]).get("example").bind_env == "BIND"
    port, host = free_port(), bind or "127.0.0.1"
    server = subprocess.Popen(
        [sys.executable, str(tmp_path / "example" / "server.py")],
        env={**os.environ, "PORT": str(port), **({"BIND": bind} if bind else {})},
        stdout=subprocess.DEVNULL,
    )
    try:
        assert wait_healthy(lambda: probe_http(host, port, "/health"), lambda: None, 30).ready
        with urllib.request.urlopen(f"http://{host}:{port}/hello", timeout=5) as response:
            assert response.read() == b"<h1>Hello World</h1>"
        assert probe_http(host, port, "/nope").detail.startswith("HTTP 404")
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_plan_sorts_tags():
    current = {"webperf/nginx": "webperf/nginx:new", "webperf/go": "webperf/go:1"}
    tags = ["webperf/nginx:old", "webperf/nginx:new", "webperf/gone:3", "debian:bookworm-slim"]
    assert plan([*tags, "webperf/go:1"], current) == PrunePlan(
        stale=("webperf/nginx:old",), unknown=("webperf/gone:3",)
    )


class FakeImage:
    def __init__(self, *tags: str) -> None:
        self.tags = list(tags)


class FakeImages:
    def __init__(self, images: list[FakeImage], in_use: set[str]) -> None:
        self.images, self.in_use, self.removed = images, in_use, []

    def list(self, name: str | None = None) -> list[FakeImage]:
        assert name == "webperf/*"
        return self.images

    def remove(self, tag: str) -> None:
        if tag in self.in_use:
            raise docker.errors.APIError("conflict", explanation="image is being used")
        self.removed.append(tag)


class FakeEngine:
    def __init__(self, images: FakeImages) -> None:
        self.images = images


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    main(["new", "alpha", "--directory", str(tmp_path)])
    main(["new", "beta", "--directory", str(tmp_path)])
    return tmp_path


def fake_engine(monkeypatch: Any, catalogue: Path, in_use: set[str]) -> FakeImages:
    catalog = Catalog([catalogue])
    alpha = image_tag(catalog.get("alpha"))
    images = FakeImages(
        [
            FakeImage(alpha),
            FakeImage("webperf/alpha:0ld"),
            FakeImage("webperf/beta:0ld", "webperf/beta:older"),
            FakeImage("webperf/elsewhere:1"),
        ],
        in_use,
    )
    monkeypatch.setattr(engine, "docker_client", lambda: FakeEngine(images))
    monkeypatch.setattr("pytest_webperf.cli.default_directories", list)
    return images


def test_prune_removes_what_the_catalogue_no_longer_builds(monkeypatch, catalogue, capsys):
    images = fake_engine(monkeypatch, catalogue, in_use={"webperf/beta:older"})
    assert main(["--servers", str(catalogue), "prune"]) == 0
    assert images.removed == ["webperf/alpha:0ld", "webperf/beta:0ld"]
    out = capsys.readouterr().out
    assert "kept     webperf/beta:older (image is being used)" in out
    assert "kept     webperf/elsewhere:1 (not a server of this catalogue" in out


def test_prune_dry_run_removes_nothing(monkeypatch, catalogue, capsys):
    images = fake_engine(monkeypatch, catalogue, in_use=set())
    assert main(["--servers", str(catalogue), "prune", "--dry-run"]) == 0
    assert images.removed == []
    out = capsys.readouterr().out.splitlines()
    assert "stale    webperf/alpha:0ld" in out and "stale    webperf/beta:older" in out


def test_current_tags_follow_image_from(catalogue):
    (catalogue / "alias").mkdir()
    (catalogue / "alias" / "server.toml").write_text('image_from = "alpha"\n')
    catalog = Catalog([catalogue])
    assert set(current_tags(catalog)) == {"webperf/alpha", "webperf/beta"}
