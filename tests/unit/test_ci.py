"""The pull request's comment and the annotations (``commands/ci.py``), against a recorded GitHub
API response (two pages of a pull request's comments, the shape of the REST API's
``GET /repos/{owner}/{repo}/issues/{number}/comments``): no live call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_webperf.commands import ci

PAGES = json.loads((Path(__file__).parent / "fixtures" / "github_pr_comments.json").read_text())


class Recorded:
    """The API as recorded: comments in pages of 100; writes are kept, not sent."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        self.pages = pages
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(self, method: str, url: str, body: Any = None) -> Any:
        self.calls.append((method, url, body))
        if method == "GET":
            page = int(url.rsplit("page=", 1)[1])
            return self.pages[page - 1] if page <= len(self.pages) else []
        return {"id": 1, "body": body["body"]}


def test_the_comment_is_found_on_a_later_page_and_edited_in_place() -> None:
    api = Recorded([PAGES["page1"], PAGES["page2"]])
    body = ci.comment_body("## webperf\n\nall pass", "https://example.invalid/artifact/7")
    assert ci.post_or_update(api, "octo-org/shop", 42, body) == "updated comment 2400000100"
    assert [c[:2] for c in api.calls] == [
        ("GET", "/repos/octo-org/shop/issues/42/comments?per_page=100&page=1"),
        ("GET", "/repos/octo-org/shop/issues/42/comments?per_page=100&page=2"),
        ("PATCH", "/repos/octo-org/shop/issues/comments/2400000100"),
    ]
    sent = api.calls[-1][2]["body"]
    assert sent.startswith(ci.MARKER + "\n## webperf")
    assert sent.endswith("[The HTML report (artifact)](https://example.invalid/artifact/7)\n")


def test_without_its_comment_it_posts_one() -> None:
    api = Recorded([PAGES["page1"]])  # 100 comments, none of them ours
    assert ci.post_or_update(api, "octo-org/shop", 42, ci.comment_body("x", None)) == "posted"
    method, url, body = api.calls[-1]
    assert (method, url) == ("POST", "/repos/octo-org/shop/issues/42/comments")
    assert body == {"body": f"{ci.MARKER}\nx\n"}


def test_a_summary_over_githubs_limit_is_cut_at_a_line() -> None:
    body = ci.comment_body("| row |\n" * 20_000, "u")
    assert len(body) <= 65_536
    assert "... (cut: the full summary is in the job)" in body and body.endswith("(u)\n")


def test_failed_tests_become_error_annotations_at_their_def(tmp_path: Path) -> None:
    (tmp_path / "perf").mkdir()
    (tmp_path / "perf" / "test_app.py").write_text(
        "import x\n\n\ndef test_app(webperf):\n    pass\n"
    )
    report = {
        "tests": [
            {
                "nodeid": "perf/test_app.py::test_app[c50]",
                "name": "GET /hello",
                "verdict": {"status": "regression", "reasons": ["cpu_per_req +10% beyond +5%"]},
            },
            {
                "nodeid": "perf/test_app.py::test_app[c8]",
                "name": "GET /",
                "verdict": {"status": "pass"},
            },
            {"nodeid": "gone.py::test_gone", "name": "GET /", "verdict": {"status": "broken"}},
        ]
    }
    assert ci.error_lines(report, tmp_path) == [
        "::error file=perf/test_app.py,line=4,title=webperf perf/test_app.py::test_app[c50]::"
        "[GET /hello] cpu_per_req +10%25 beyond +5%25",
        "::error file=gone.py,line=1,title=webperf gone.py::test_gone::[GET /] broken",
    ]


def test_tests_with_checks_not_checked_become_warning_annotations(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text("def test_app(webperf):\n    pass\n")
    unchecked = {
        "check": "cpu_per_req:5%",
        "metric": "cpu_per_req",
        "outcome": "undecided",
        "detectable": 3.93,
        "threshold": 0.05,
        "checked": False,
        "would_decide": "would decide: about 40 pairs (3 so far, ~10 min at this run's pace)",
    }
    report = {
        "tests": [
            {
                "nodeid": "test_app.py::test_app[c8]",
                "name": "GET /",
                "verdict": {"status": "undecided", "checks": [unchecked]},
            }
        ]
    }
    assert ci.error_lines(report, tmp_path) == [
        "::warning file=test_app.py,line=1,title=webperf test_app.py::test_app[c8]: not "
        "checked::[GET /] cpu_per_req:5%25: not checked: could detect >= 393%25, asked 5%25; "
        "would decide: about 40 pairs (3 so far, ~10 min at this run's pace)"
    ]


def test_the_command_comments_on_the_events_pull_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42}}))
    summary = tmp_path / "webperf.md"
    summary.write_text("## webperf\n")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo-org/shop")
    api = Recorded([PAGES["page2"]])
    assert ci.main(["--markdown", str(summary), "--report-url", "u"], api=api) == 0
    assert "webperf: pull request #42: updated comment 2400000100" in capsys.readouterr().out
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(tmp_path / "push.json"))  # a push: none
    assert ci.main(["--markdown", str(summary)], api=Recorded([])) == 0
    assert "no pull request" in capsys.readouterr().out
