"""The import paths the CHANGELOG calls public keep working, whatever moves inside the
package (as httpx pins its ``__all__``): a user's test, locustfile or conftest that
imports them is not broken by a reorganisation."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pytest_webperf.api
import pytest_webperf.errors
import pytest_webperf.models

PUBLIC = {
    pytest_webperf.api: ["Webperf"],
    pytest_webperf.models: ["SCHEMA_VERSION", "Measurement", "RunResult", "Verdict"],
}
ERRORS = [
    "BaselineError",
    "CatalogError",
    "EngineUnavailable",
    "OptionError",
    "SwarmError",
    "TargetError",
    "WebperfError",
]


@pytest.mark.parametrize("module", list(PUBLIC), ids=lambda m: m.__name__)
def test_each_public_module_exports_exactly_its_names(module: object) -> None:
    assert sorted(module.__all__) == sorted(PUBLIC[module])  # type: ignore[index, attr-defined]
    for name in PUBLIC[module]:  # type: ignore[index]
        assert getattr(module, name) is not None


def test_the_errors_are_where_they_always_were() -> None:
    for name in ERRORS:
        error = getattr(pytest_webperf.errors, name)
        assert issubclass(error, pytest_webperf.errors.WebperfError)


def test_the_lean_user_imports_from_its_public_home() -> None:
    # in a fresh interpreter: importing a Locust user imports Locust, which patches the
    # process with gevent (as a locustfile's process is)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pytest_webperf.swarm.lean import LeanHttpUser; "
            "from locust import User; assert issubclass(LeanHttpUser, User)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
