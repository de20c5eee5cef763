"""The documentation site builds strictly, and a broken link or anchor fails the build
as the test command runs it (``scripts/test.sh``: ``mkdocs build``, not ``--quiet``,
which drops warnings before strict mode counts them: mkdocs/mkdocs#4126)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")


def build(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [str(MKDOCS), "build", "--site-dir", str(root / "site")]
    return subprocess.run(
        command, check=False, cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A copy of what the site is built from."""
    if not MKDOCS.exists():
        pytest.fail(f"no mkdocs beside {sys.executable}: run scripts/setup.sh")
    for name in ("docs", "scripts"):
        shutil.copytree(ROOT / name, tmp_path / name)
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_site_builds_strictly(site: Path) -> None:
    result = build(site)
    assert result.returncode == 0, result.stderr
    assert (site / "site" / "tutorial" / "index.html").exists()


@pytest.mark.parametrize(
    "link", ["[a](reference/checks.md#no-such-anchor)", "[a](no-such-page.md)"]
)
def test_a_broken_link_fails_the_build(site: Path, link: str) -> None:
    page = site / "docs" / "tutorial.md"
    page.write_text(page.read_text() + f"\n{link}\n")
    result = build(site)
    assert result.returncode != 0
    assert "Aborted with 1 warnings in strict mode" in result.stderr + result.stdout


def test_no_figure_is_dated_by_a_session_number() -> None:
    # a reader knows a day and a commit, not which working session of ours ran a command
    docs = Path(__file__).resolve().parents[2] / "docs"
    dated = [
        f"{page.relative_to(docs)}: {match.group(0)}"
        for page in docs.rglob("*.md")
        for match in re.finditer(r"\b[Ss]ession \d+\b", page.read_text())
    ]
    assert dated == []
