"""The docs' code says nothing that cannot run: every Python, TOML and YAML block
parses, every ``compare_fail=`` a page quotes is a valid set of checks, the checks page
names every metric the judge knows (and no other), and every runnable-example marker
(``tests/e2e/docs_examples.py``) sits on a block."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from tests.e2e.docs_examples import MARKER, examples, markers

from pytest_webperf.errors import OptionError
from pytest_webperf.gate.grammar import parse_checks
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.settings.config import SETTINGS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_COMPARE_FAIL = re.compile(r"compare_fail=\"([^\"]*)\"")


def blocks(language: str) -> list[tuple[str, int, str]]:
    """(page, number, code) of every fenced block in ``language``."""
    found = []
    for path in DOCS:
        fences = _FENCE.findall(path.read_text())
        name = path.relative_to(ROOT).as_posix()
        found += [(name, i, code) for i, (lang, code) in enumerate(fences) if lang == language]
    return found


def ids(found: list[tuple[str, int, str]]) -> list[str]:
    return [f"{page}#{number}" for page, number, _ in found]


PYTHON, TOML, YAML = blocks("python"), blocks("toml"), blocks("yaml")


def test_the_pages_have_code_blocks() -> None:
    """A test of the test: the extraction finds what the pages obviously hold."""
    assert len(PYTHON) > 10 and TOML and YAML


@pytest.mark.parametrize(("page", "number", "code"), PYTHON, ids=ids(PYTHON))
def test_every_python_block_parses(page: str, number: int, code: str) -> None:
    try:
        ast.parse(textwrap.dedent(code))  # a snippet of a function's body may be indented
    except SyntaxError as exc:
        pytest.fail(f"{page}: Python block {number} does not parse: {exc}")


@pytest.mark.parametrize(("page", "number", "code"), TOML, ids=ids(TOML))
def test_every_toml_block_parses(page: str, number: int, code: str) -> None:
    try:
        tomllib.loads(code)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{page}: TOML block {number} does not parse: {exc}")


@pytest.mark.parametrize(("page", "number", "code"), YAML, ids=ids(YAML))
def test_every_yaml_block_parses(page: str, number: int, code: str) -> None:
    try:
        yaml.safe_load(code)
    except yaml.YAMLError as exc:
        pytest.fail(f"{page}: YAML block {number} does not parse: {exc}")


BY_OPTION = {s.option: s for s in SETTINGS}
QUOTED_CHECKS = sorted(
    {
        (p.relative_to(ROOT).as_posix(), s)
        for p in DOCS
        for s in _COMPARE_FAIL.findall(p.read_text())
    }
)


def test_the_pages_quote_checks() -> None:
    assert any(spec.startswith("p95[") for _, spec in QUOTED_CHECKS)


@pytest.mark.parametrize(("page", "spec"), QUOTED_CHECKS)
def test_every_quoted_compare_fail_parses(page: str, spec: str) -> None:
    try:
        parse_checks(spec)
    except (ValueError, OptionError) as exc:
        pytest.fail(f"{page}: compare_fail={spec!r} is refused: {exc}")


def test_the_checks_page_names_every_metric_and_only_those() -> None:
    """The metric table's first column: each backticked name (and its aliases)."""
    page = (ROOT / "docs" / "reference" / "checks.md").read_text()
    table = page[page.index("## Metrics") :].split("\n## ")[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([a-z0-9_]+)`", row)}
    known = set(METRICS) | {alias for m in METRICS.values() for alias in m.aliases}
    assert sorted(set(METRICS) - named) == [], "metrics missing from docs/reference/checks.md"
    assert sorted(named - known) == [], "docs/reference/checks.md names unknown metrics"


@pytest.mark.parametrize("page", DOCS[1:], ids=lambda p: p.relative_to(ROOT / "docs").as_posix())
def test_every_example_marker_sits_on_a_block(page: Path) -> None:
    found = examples(page)
    assert len(found) == markers(page), f"a {MARKER} line not right before a fenced block"
    for example in found:
        if example.kind == "runs":
            assert example.language == "python"
            ast.parse(example.code)


def option_rows() -> list[tuple[list[str], str]]:
    """(options, default) of each row of the options page's table."""
    page = (ROOT / "docs" / "reference" / "options.md").read_text()
    rows = []
    for line in page.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`--webperf-"):
            options = re.findall(r"`(--webperf-[a-z0-9-]+)", cells[0])
            rows.append((options, cells[1].strip("`")))
    return rows


def test_the_options_page_lists_every_option_and_only_those() -> None:
    listed = {option for options, _ in option_rows() for option in options}
    known = {s.option for s in SETTINGS}
    assert sorted(known - listed) == [], "options missing from docs/reference/options.md"
    assert sorted(listed - known) == [], "docs/reference/options.md lists unknown options"


@pytest.mark.parametrize(
    ("option", "default"),
    [(o[0], d) for o, d in option_rows() if len(o) == 1],
)
def test_the_options_page_states_each_default(option: str, default: str) -> None:
    """A blank default means none (None, or an empty list); ``off`` a switch not given."""
    setting = BY_OPTION[option]
    if setting.flag:
        assert default == "off" and setting.default is False
    elif default.startswith("see "):  # the defaults are said elsewhere
        assert setting.default is None
    elif default in ("", "none", "fingerprint"):
        assert setting.default in (None, (), 0) or option == "--webperf-machine-id"
    else:
        assert setting.parse(default) == setting.default, f"{option}: default {default!r}"
