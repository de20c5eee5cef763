"""What every pytest run pays for the plugin: pytest loads it in every project where it is
installed, webperf tests or not, and every end-to-end test starts pytest again. The
engine's client, testcontainers and the HTML templates are imported when a run needs
them, not when the plugin loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LATER = ("docker", "testcontainers", "jinja2")


def test_loading_the_plugin_imports_no_engine_client_and_no_html_templates() -> None:
    code = (
        "import sys, pytest_webperf.plugin\n"
        f"print(' '.join(m for m in {LATER!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == []


def test_the_kinds_of_target_are_still_importable_from_the_package() -> None:
    from pytest_webperf.targets import ContainerTarget, Limits, ProcessTarget, start_target

    assert ContainerTarget.__module__ == "pytest_webperf.targets.container"
    assert Limits and ProcessTarget and start_target


def test_a_run_without_webperf_tests_neither_imports_nor_asks_the_engine(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n\n\ndef pytest_unconfigure(config):\n"
        f"    print('LOADED', ' '.join(m for m in {LATER!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("LOADED")]
    assert line.split()[1:] == []
