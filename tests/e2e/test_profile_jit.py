"""Differential CPU profiles of JIT runtimes in containers, end to end: a Node server (the
catalogue's Node 18 image's packages, a small app) and a Tomcat servlet (the catalogue's
Tomcat 10 on OpenJDK 17 with one more servlet), each in a throwaway repository whose
change makes one function three times costlier; 3 pairs of 3 s, lightly loaded.

perf samples them; the JavaScript functions are named with their file through V8's perf
map (``NODE_OPTIONS=--perf-basic-prof``, set by webperf while profiling is on), the Java
methods through the map HotSpot writes on request (the attach protocol), both read
through the container's mount namespace and copied when sampling stops. The A/B run
names the function first; the A/A run names nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import PROFILED
from tests.e2e.profiled_server import CATALOGUE, CHECKSUM_JS
from tests.e2e.profiled_server import node_server as catalogue_node

from pytest_webperf.profiling.capture import perf_problem

pytest_plugins = ["pytester"]

needs_perf = pytest.mark.skipif(
    perf_problem() is not None, reason=f"perf cannot sample: {perf_problem()}"
)

RUN = [*PROFILED, "--webperf-repeat=3", "--webperf-json=p.json"]

TEST = """
def test_work(webperf):
    target = webperf.server("{server}")
    webperf.http(target, path="/work", interval="{interval}")  # paced: lightly loaded
"""

NODE_APP = (
    """\
"use strict";
// A small HTTP server whose work per request is in named functions.
const http = require("http");

const ROUNDS = {rounds}; // how many times checksum() walks the page
const PAGE = Buffer.alloc(1 << 18, 7);

function work(n) {{
  let total = 0;
  for (let i = 0; i < n; i++) {{
    total = (total + i * i) % 1000003;
  }}
  return total;
}}

"""
    + CHECKSUM_JS
    + """
function render(value, check) {{
  return JSON.stringify({{ value, check, at: Date.now() }});
}}

http
  .createServer((req, res) => {{
    const body = render(work(60000), checksum(PAGE));
    res.writeHead(200, {{ "Content-Length": Buffer.byteLength(body) }});
    res.end(body);
  }})
  .listen(Number(process.env.PORT), "127.0.0.1");
"""
)

NODE_TOML = """\
name = "nodework"
description = "test-only Node server: work() and checksum() per request"
kind = "http"
port_env = "PORT"
health = "/work"
startup_timeout = 60
routes = ["/work"]
"""


def node_server(repo: Path, rounds: int) -> None:
    """The catalogue's Node image, this app."""
    catalogue_node(repo, "nodework", NODE_APP.format(rounds=rounds), NODE_TOML)


SERVLET = """\
package webperf;

import jakarta.servlet.annotation.WebServlet;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Test-only: work() and checksum() per request, in methods of their own. */
@WebServlet(urlPatterns = {{"/work"}})
public class WorkServlet extends HttpServlet {{
    static final int ROUNDS = {rounds}; // how many times checksum() walks the page
    static final byte[] PAGE = new byte[1 << 18];

    static {{
        Arrays.fill(PAGE, (byte) 7);
    }}

    static long work(int n) {{
        long total = 0;
        for (int i = 0; i < n; i++) {{
            total = (total + (long) i * i) % 1000003;
        }}
        return total;
    }}

    static int checksum(byte[] data) {{
        int value = 0;
        for (int round = 0; round < ROUNDS; round++) {{
            for (int i = 0; i < data.length; i++) {{
                value = value * 31 + data[i];
            }}
        }}
        return value;
    }}

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {{
        byte[] body = (work(60000) + " " + checksum(PAGE) + "\\n").getBytes(StandardCharsets.UTF_8);
        resp.setStatus(200);
        resp.setContentType("text/plain");
        resp.setContentLength(body.length);
        resp.getOutputStream().write(body);
    }}
}}
"""


def tomcat_server(repo: Path, rounds: int) -> None:
    """The catalogue's Tomcat (its Dockerfile, cached), one more servlet."""
    directory = repo / "servers" / "tomcatwork"
    if not directory.exists():
        shutil.copytree(CATALOGUE / "tomcat", directory)
        toml = directory / "server.toml"
        text = toml.read_text().replace('name = "tomcat"', 'name = "tomcatwork"', 1)
        toml.write_text(text.replace('health = "/health"', 'health = "/work"', 1))
    (directory / "src" / "webperf" / "WorkServlet.java").write_text(SERVLET.format(rounds=rounds))


def profile_of(repo: Path) -> Any:
    (entry,) = json.loads((repo / "p.json").read_text())["tests"]
    return entry["profile"]


def a_b(pytester: pytest.Pytester, server: str, *options: str, changed: bool) -> Any:
    """An A/B run of ``server``'s repository (checksum 3x in B), or an A/A one."""
    make = node_server if server == "nodework" else tomcat_server
    interval = "10ms" if server == "nodework" else "20ms"
    make(pytester.path, 1)
    pytester.makepyfile(test_work=TEST.format(server=server, interval=interval))
    commit_base(pytester.path)
    against = ["--webperf-against=HEAD", "--webperf-against-always"]
    if changed:
        make(pytester.path, 3)
        git(pytester.path, "commit", "-q", "-am", "checksum walks the page three times")
        against = ["--webperf-against=HEAD~1"]
    result = pytester.runpytest_subprocess(*RUN, *options, *against, timeout=900)
    assert "Traceback" not in result.stdout.str()
    profile = profile_of(pytester.path)
    assert "why" not in profile, profile
    assert profile["tools"] == ["perf"] and profile["pairs"] == 3
    return profile


@needs_perf
def test_a_javascript_function_is_named_with_its_file(
    pytester: pytest.Pytester, engine: None
) -> None:
    profile = a_b(pytester, "nodework", "--webperf-warmup=1s", changed=True)
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "checksum (app.js)", changes
    assert changes[0]["low_us"] > 0
    assert "work (app.js)" in profile["base_folded"]  # named through the copied map


@needs_perf
def test_a_node_a_a_run_names_nothing(pytester: pytest.Pytester, engine: None) -> None:
    profile = a_b(pytester, "nodework", "--webperf-warmup=1s", changed=False)
    assert profile["changes"] == [], profile["changes"]
    assert "checksum (app.js)" in profile["base_folded"]
    assert profile["unresolved"]


TOMCAT = ["--webperf-warmup=3s", "--webperf-restart-every=0"]  # one JVM per side, warmed


@needs_perf
def test_a_java_method_is_named(pytester: pytest.Pytester, engine: None) -> None:
    profile = a_b(pytester, "tomcatwork", *TOMCAT, changed=True)
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "webperf.WorkServlet.checksum (java)", changes
    assert changes[0]["low_us"] > 0


@needs_perf
def test_a_tomcat_a_a_run_names_nothing(pytester: pytest.Pytester, engine: None) -> None:
    profile = a_b(pytester, "tomcatwork", *TOMCAT, changed=False)
    assert profile["changes"] == [], profile["changes"]
    assert "webperf.WorkServlet.work (java)" in profile["base_folded"]
