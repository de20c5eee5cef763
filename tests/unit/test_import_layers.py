"""The import contracts (``.importlinter``, run by ``lint-imports`` in the test command)
hold for the package as it is, and fail, naming the import, when a module imports
upward or when the pytest side imports the swarm's child side: a copy of the package
with one such import added is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``src`` (first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT), "--no-logo", "--no-cache", str(ROOT / ".importlinter")],
        capture_output=True,
        text=True,
        env=env,
        cwd=src,
        timeout=120,
        check=False,
    )


def test_the_package_keeps_the_contract_and_an_upward_import_breaks_it(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "pytest_webperf",
        src / "pytest_webperf",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"),
    )
    kept = lint(src)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    values = src / "pytest_webperf" / "values.py"  # a leaf: nothing of the package above it
    values.write_text(
        values.read_text()
        + "\n\ndef _upward() -> None:\n    import pytest_webperf.fixture.handle\n"
    )
    broken = lint(src)
    assert broken.returncode != 0
    assert "pytest_webperf.values is not allowed to import pytest_webperf.fixture:" in broken.stdout
    assert "- pytest_webperf.values -> pytest_webperf.fixture.handle (l." in broken.stdout


def test_the_pytest_side_never_imports_the_swarms_child_side(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "pytest_webperf",
        src / "pytest_webperf",
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"),
    )
    loop = src / "pytest_webperf" / "measurement" / "loop.py"  # runs in the pytest process
    loop.write_text(loop.read_text() + "\n\nimport pytest_webperf.swarm.child.lean  # noqa\n")
    broken = lint(src)
    assert broken.returncode != 0
    assert "Only the swarm imports its child side" in broken.stdout
    assert "pytest_webperf.measurement.loop -> pytest_webperf.swarm.child.lean (l." in broken.stdout


def test_the_child_side_contract_names_every_module_of_the_pytest_side() -> None:
    # a module the forbidden contract does not name is not checked: every top-level
    # module and package, and every module of swarm/ but its child side, must be there
    # (``swarm/__main__.py`` starts the child and ``swarm/lean.py`` re-exports its
    # public user: both import the child side by design)
    package = ROOT / "src" / "pytest_webperf"
    text = (ROOT / ".importlinter").read_text()
    contract = text[text.index("[importlinter:contract:swarm-child]") :]
    named = set(contract.split("forbidden_modules")[0].split())
    tops = {p.stem for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if (p / "__init__.py").is_file()
    }
    tops -= {"__init__", "swarm"}
    swarm = {p.stem for p in (package / "swarm").glob("*.py")} - {"__init__", "__main__", "lean"}
    expected = {f"pytest_webperf.{t}" for t in tops} | {f"pytest_webperf.swarm.{m}" for m in swarm}
    assert sorted(expected - named) == []
