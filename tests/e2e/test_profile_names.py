"""The profiles name the user's own JavaScript functions, counted and timed: a Node server in
a container (the catalogue's Node 18 image, a small app) in a throwaway repository whose
change makes ``checksum()`` three times costlier, in two A/B runs: counted (callgrind, V8's
perf map copied from the container when the window is dumped; 2 pairs of 100 requests)
and timed (perf, 3 pairs of 3 s, paced). The function is named first in both, with its
instructions per request counted; the anonymous request handler carries its file and line;
no frame is a bare address.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import PROFILED
from tests.e2e.profiled_server import CHECKSUM_JS
from tests.e2e.profiled_server import node_server as catalogue_node

from pytest_webperf.profiling import valgrind
from pytest_webperf.profiling.capture import perf_problem

pytest_plugins = ["pytester"]

needs_tools = pytest.mark.skipif(
    perf_problem() is not None or valgrind.problem() is not None,
    reason=f"perf and valgrind: {perf_problem() or valgrind.problem()}",
)

APP = (
    """\
"use strict";
// checksum() walks ?kb= KiB of the page ROUNDS times per request; the handler is anonymous.
const http = require("http");

const ROUNDS = {rounds};
const PAGE = Buffer.alloc(1 << 17, 7);

"""
    + CHECKSUM_JS
    + """
http
  .createServer((req, res) => {{
    const kb = Number(req.url.split("kb=")[1] || 128);
    const body = JSON.stringify({{ check: checksum(PAGE.subarray(0, kb * 1024)), kb }});
    res.writeHead(200, {{ "Content-Length": Buffer.byteLength(body) }});
    res.end(body);
  }})
  .listen(Number(process.env.PORT), "127.0.0.1");
"""
)
HANDLER_LINE = 1 + APP.splitlines().index("  .createServer((req, res) => {{")

TOML = """\
name = "nodenames"
description = "test-only Node server: checksum() per request, an anonymous handler"
kind = "http"
port_env = "PORT"
health = "/work"
startup_timeout = 60
routes = ["/work"]
"""

COUNTED = """
def test_counted(webperf):  # a smaller page: Node's baseline code under Valgrind is slow
    target = webperf.server("nodenames")
    webperf.http(target, path="/work?kb=4", count=True, requests=100)
"""

TIMED = """
def test_timed(webperf):
    webperf.http(webperf.server("nodenames"), path="/work?kb=128", interval="10ms")
"""

RUN = [*PROFILED, "--webperf-warmup=1s", "--webperf-against=HEAD~1", "--webperf-json=names.json"]


def node_server(repo: Path, rounds: int) -> None:
    """The catalogue's Node image, this app."""
    catalogue_node(repo, "nodenames", APP.format(rounds=rounds), TOML)


def profile(pytester: pytest.Pytester, tests: str, *options: str) -> tuple[Any, Any]:
    """One A/B run of ``tests`` in a repository whose change makes checksum() three
    times costlier: its output and the test's profile."""
    node_server(pytester.path, 1)
    pytester.makepyfile(test_names=tests)
    commit_base(pytester.path)
    node_server(pytester.path, 3)
    git(pytester.path, "commit", "-q", "-am", "checksum walks the page three times")
    result = pytester.runpytest_subprocess(*RUN, *options, timeout=900)
    assert "Traceback" not in result.stdout.str()
    (test,) = json.loads((pytester.path / "names.json").read_text())["tests"]
    return result, test["profile"]


@needs_tools
def test_a_javascript_function_is_named_and_counted(
    pytester: pytest.Pytester, engine: None
) -> None:
    result, counted = profile(pytester, COUNTED, "--webperf-repeat=2")
    first = counted["changes"][0]
    assert first["function"] == "checksum (app.js)" and first["credible"], counted["changes"][:3]
    assert first["kind"] == "user" and first["change_ir"] > 100_000, first  # its own code
    # counted on V8's baseline code: the builtins it calls (no symbols in Debian's libnode)
    # are shown under it, and its own instructions hold them
    assert first["own_ir"] > first["change_ir"], first
    assert not any(c["function"].startswith(("0x", "[unknown]")) for c in counted["changes"])
    result.stdout.fnmatch_lines(["*+* Ir/req  checksum (app.js) (with the library, runtime*"])
    assert any("baseline code" in n for n in counted["notes"]), counted["notes"]


@needs_tools
def test_a_javascript_function_is_named_timed_and_an_anonymous_one_by_its_line(
    pytester: pytest.Pytester, engine: None
) -> None:
    _, timed = profile(pytester, TIMED, "--webperf-repeat=3")
    assert "why" not in timed, timed
    assert timed["changes"] and timed["changes"][0]["function"] == "checksum (app.js)", timed
    anonymous = f"(anonymous) app.js:{HANDLER_LINE}"
    assert anonymous in timed["change_folded"], timed["change_folded"][:2000]
