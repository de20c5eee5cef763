"""Every example the documentation marks as runnable (``docs_examples.py``) runs as
written, at a small scale: the page's test files and the files beside them in one
pytest run, against the real catalogue servers they name."""

from __future__ import annotations

import pytest
from tests.e2e.docs_examples import PAGES, examples

pytest_plugins = ["pytester"]
SMALL = [
    "-p",
    "no:locust",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=1",
    "--webperf-concurrency=4",
]
RUNNABLE = [p for p in PAGES if any(e.kind == "runs" for e in examples(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.stem)
def test_the_pages_examples_run(page, pytester: pytest.Pytester, engine: None) -> None:
    found = examples(page)
    for example in found:
        target = pytester.path / example.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(example.code)
    result = pytester.runpytest_subprocess(*SMALL)
    tests = sum(e.kind == "runs" for e in found)
    assert result.ret == 0, "\n".join(result.outlines[-40:])
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= tests, outcomes
