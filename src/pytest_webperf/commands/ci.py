"""Where the author looks: the pull request's comment, check annotations, JUnit properties.

``python -m pytest_webperf.commands.ci comment``, run by the action (``action.yml``) after the
tests: posts the Markdown summary as one comment on the pull request and, on every
later push, edits that comment in place (found by a hidden marker among the pull
request's comments, all pages), with a link to the HTML report artifact. It also prints
a ``::error file=...,line=...::`` line per failed test, which GitHub turns into an
annotation on the test's ``def`` line, and a ``::warning`` one per test with checks not
checked (undecided). The GitHub API is reached with ``urllib`` through
``GitHub``; the tests replace it with a recorded response.

``junit_properties``: what ``--junitxml`` carries per test (``record_property``, from
``plugin.py``): each measurement's verdict and main figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pytest_webperf.models.measurement import Measurement
from pytest_webperf.report.verdicts import not_checked

MARKER = "<!-- pytest-webperf comment -->"
LIMIT = 65_000  # GitHub refuses a comment body over 65,536 characters
FAILED = frozenset({"regression", "broken"})


def junit_properties(measurement: Measurement) -> list[tuple[str, str]]:
    """``webperf[NAME].verdict`` and its figures: rps, p95 (ms), cpu_per_req (us), and
    each relative check's change with its interval."""
    prefix = f"webperf[{measurement.name}]"
    verdict = measurement.verdict
    found: list[tuple[str, str]] = [
        (f"{prefix}.verdict", verdict.status if verdict is not None else "none")
    ]
    runs = measurement.runs
    if runs:
        found.append((f"{prefix}.rps", f"{measurement.rps:.6g}"))
        p95 = [r.latency.p95_ms for r in runs]
        found.append((f"{prefix}.p95_ms", f"{sum(p95) / len(p95):.6g}"))
        cpu = [c for r in runs if (c := r.cpu_per_req_us) is not None]
        if cpu:
            found.append((f"{prefix}.cpu_per_req_us", f"{sum(cpu) / len(cpu):.6g}"))
    for check in verdict.checks if verdict is not None else ():
        change, low, high = check.get("change"), check.get("low"), check.get("high")
        if change is None:
            continue
        text = f"{change * 100:+.2f}%"
        if low is not None and high is not None:
            text += f" ({low * 100:+.2f}%..{high * 100:+.2f}%)"
        found.append((f"{prefix}.{check.get('check')}", f"{text} {check.get('outcome')}"))
    return found


class Api(Protocol):
    def __call__(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any: ...


class GitHub:
    """The REST API with a token (``GITHUB_TOKEN``); JSON in, JSON out."""

    def __init__(self, token: str, base: str = "https://api.github.com") -> None:
        self.token, self.base = token, base.rstrip("/")

    def __call__(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any:
        full = url if url.startswith("http") else f"{self.base}{url}"
        request = urllib.request.Request(
            full,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")


def comment_body(markdown: str, report_url: str | None) -> str:
    """The marker, the summary (cut to GitHub's limit) and the link to the report."""
    link = f"\n\n[The HTML report (artifact)]({report_url})" if report_url else ""
    text = markdown.strip()
    room = LIMIT - len(MARKER) - len(link) - 80
    if len(text) > room:
        text = text[:room].rsplit("\n", 1)[0] + "\n\n... (cut: the full summary is in the job)"
    return f"{MARKER}\n{text}{link}\n"


def find_comment(api: Api, repo: str, number: int) -> int | None:
    """The id of this action's comment on pull request ``number`` (any page)."""
    page = 1
    while True:
        comments = api("GET", f"/repos/{repo}/issues/{number}/comments?per_page=100&page={page}")
        for comment in comments:
            if MARKER in str(comment.get("body", "")):
                return int(comment["id"])
        if len(comments) < 100:
            return None
        page += 1


def post_or_update(api: Api, repo: str, number: int, body: str) -> str:
    """Edit the comment in place if there is one, else post it; what was done."""
    found = find_comment(api, repo, number)
    if found is None:
        api("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})
        return "posted"
    api("PATCH", f"/repos/{repo}/issues/comments/{found}", {"body": body})
    return f"updated comment {found}"


def _escape(text: str) -> str:
    """A workflow command's message: %, CR and LF encoded as GitHub asks."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _def_line(nodeid: str, root: Path) -> tuple[str, int]:
    """The test's file and the line of its ``def`` (1 when it cannot be found)."""
    path, _, rest = nodeid.partition("::")
    function = re.split(r"[\[:]", rest.rsplit("::", 1)[-1])[0]
    try:
        source = (root / path).read_text(encoding="utf-8").splitlines()
        return path, next(
            i + 1
            for i, text in enumerate(source)
            if re.match(rf"\s*(async\s+)?def {re.escape(function)}\(", text)
        )
    except (OSError, StopIteration):
        return path, 1


def error_lines(report: Mapping[str, Any], root: Path) -> list[str]:
    """``::error file=...,line=...::`` per failed measurement, at its test's ``def``, and
    ``::warning`` per measurement with checks not checked (undecided): a green job then
    says on the test's line that it was not checked, and what would decide it."""
    lines = []
    for entry in report.get("tests", ()):
        verdict = entry.get("verdict") or {}
        nodeid = str(entry.get("nodeid", ""))
        if verdict.get("status") in FAILED:
            reasons = "; ".join(str(r) for r in verdict.get("reasons", ())) or verdict.get("status")
            kind, title, text = "error", f"webperf {nodeid}", str(reasons)
        elif unchecked := not_checked(entry):
            kind, title, text = "warning", f"webperf {nodeid}: not checked", "; ".join(unchecked)
        else:
            continue
        path, line = _def_line(nodeid, root)
        message = _escape(f"[{entry.get('name')}] {text}")
        lines.append(f"::{kind} file={path},line={line},title={title}::{message}")
    return lines


def pull_request_number(event_path: str | None) -> int | None:
    """The pull request of the workflow's event (``GITHUB_EVENT_PATH``), if it has one."""
    if not event_path or not Path(event_path).is_file():
        return None
    event = json.loads(Path(event_path).read_text())
    number = (event.get("pull_request") or {}).get("number")
    return int(number) if number is not None else None


def main(argv: Sequence[str] | None = None, api: Api | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m pytest_webperf.commands.ci", description=__doc__)
    top.add_argument("--markdown", required=True, help="the Markdown summary (--webperf-markdown)")
    top.add_argument("--report", help="the JSON report (--webperf-json): annotations")
    top.add_argument("--report-url", help="where the HTML report is (the artifact's URL)")
    top.add_argument("--root", default=".", help="the directory test paths are relative to")
    args = top.parse_args(argv)
    if args.report and Path(args.report).is_file():
        for line in error_lines(json.loads(Path(args.report).read_text()), Path(args.root)):
            print(line)
    number = pull_request_number(os.environ.get("GITHUB_EVENT_PATH"))
    repo, token = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_TOKEN")
    markdown = Path(args.markdown)
    if number is None or not repo or not markdown.is_file():
        print("webperf: no pull request (or no summary): no comment")
        return 0
    if api is None:
        if not token:
            print("webperf: no GITHUB_TOKEN: no comment", file=sys.stderr)
            return 0
        api = GitHub(token, os.environ.get("GITHUB_API_URL", "https://api.github.com"))
    body = comment_body(markdown.read_text(encoding="utf-8"), args.report_url)
    try:
        done = post_or_update(api, repo, number, body)
    except OSError as exc:  # urllib's errors: a comment is not worth failing the job
        print(f"::warning::webperf: the pull request comment failed: {exc}")
        return 0
    print(f"webperf: pull request #{number}: {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
