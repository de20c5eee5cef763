"""The README and docs/ say nothing the tool refuses: every ``--webperf-*`` option they
quote exists (and a literal value given to it parses), every ``webperf SUBCOMMAND``
quoted in code runs ``--help``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pytest_webperf import cli
from pytest_webperf.settings.config import BY_NAME, SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_OPTION = re.compile(r"--webperf-[a-z0-9]+(?:-[a-z0-9]+)*")
# a literal value: ``--webperf-x=VALUE`` up to a space, backtick or bracket, or quoted
_OPTION_VALUE = re.compile(
    r"(--webperf-[a-z0-9-]+)=(?:\"([^\"]*)\"|'([^']*)'|((?:[^\s`'\"\)\]\[|]|\[[^\]\s]*\])+))"
)  # (an endpoint check's brackets, p95[create]:10%, are part of the value)
_CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`]+)`", re.S)
# a command line's ``webperf SUB``: at its start, after a prompt, a path, ``&&``, ``;``,
# ``|`` or ``(`` (not inside a line of output such as ``Failed: webperf regression``)
_COMMAND = re.compile(
    r"(?:^[ \t]*(?:\$[ \t]+)?|&&[ \t]*|;[ \t]*|\|[ \t]*|\([ \t]*|/)webperf[ \t]+([a-z][a-z-]*)",
    re.M,
)


def doc_name(path: Path) -> str:
    """A page's path from the repository's root (two pages may share a file name)."""
    return path.relative_to(ROOT).as_posix()


def code_of(path: Path) -> str:
    """The quoted code of a Markdown file: fenced blocks and inline spans, one per line
    (a span's text and the next one's are never read as one command)."""
    return "\n\n".join(a or b for a, b in _CODE.findall(path.read_text()))


def quoted_options() -> set[tuple[str, str]]:
    return {(doc_name(p), o) for p in DOCS for o in _OPTION.findall(p.read_text())}


def quoted_values() -> set[tuple[str, str, str]]:
    """Options given a literal value in code: placeholders (REF, HOST:PORT, ...),
    shell variables and ellipses are not literal."""
    found = set()
    for path in DOCS:
        for option, *values in _OPTION_VALUE.findall(code_of(path)):
            value = "".join(values)
            value = value.split("\\")[0].rstrip(".,;:")  # a table's `a\|b`: a
            if not value or "$" in value or "..." in value or "<" in value:
                continue
            if re.fullmatch(r"[A-Z][A-Z0-9_:.-]*", value) or "OWNER" in value:
                continue  # REF, NAME, HOST:PORT: a placeholder
            found.add((doc_name(path), option, value))
    return found


def quoted_subcommands() -> set[tuple[str, str]]:
    return {(doc_name(p), s) for p in DOCS for s in _COMMAND.findall(code_of(p))}


def subcommands() -> set[str]:
    parser = cli.build_parser() if hasattr(cli, "build_parser") else None
    if parser is None:
        return set()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name for a in actions for name in a.choices}


def test_the_docs_quote_options_and_commands() -> None:
    """The extraction finds what the README obviously quotes (a test of the test)."""
    options = {o for _, o in quoted_options()}
    assert {"--webperf-concurrency", "--webperf-against", "--webperf-user"} <= options
    assert {"worker", "list", "build", "noise"} <= {s for _, s in quoted_subcommands()}
    assert ("README.md", "--webperf-concurrency", "100,500,1000") in quoted_values()


@pytest.mark.parametrize(("doc", "option"), sorted(quoted_options()))
def test_every_quoted_option_exists(doc: str, option: str, pytestconfig: pytest.Config) -> None:
    options = {s.option for s in SETTINGS}
    assert option in options, f"{doc} quotes {option}, which pytest-webperf does not have"


@pytest.mark.parametrize(("doc", "option", "value"), sorted(quoted_values()))
def test_every_quoted_value_parses(doc: str, option: str, value: str) -> None:
    setting = BY_NAME.get(option.removeprefix("--webperf-").replace("-", "_"))
    assert setting is not None, f"{doc} quotes {option}, which pytest-webperf does not have"
    if setting.flag:
        pytest.fail(f"{doc}: {option} is a switch and takes no value (given {value!r})")
    try:
        setting.parse(value)
    except ValueError as exc:
        pytest.fail(f"{doc}: {option}={value} is refused: {exc}")


@pytest.mark.parametrize(("doc", "subcommand"), sorted(quoted_subcommands()))
def test_every_quoted_subcommand_runs_help(
    doc: str, subcommand: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([subcommand, "--help"])
    out = capsys.readouterr()
    assert exited.value.code == 0, f"{doc} quotes `webperf {subcommand}`: {out.err.strip()}"
    assert f"webperf {subcommand}" in out.out


def test_the_plugins_parser_has_every_setting(pytestconfig: pytest.Config) -> None:
    """The options above are checked against ``config.SETTINGS``: the ones the plugin's
    ``pytest_addoption`` registers, as this very run shows."""
    for setting in SETTINGS:
        assert pytestconfig.getoption(setting.option, default="missing") != "missing"
