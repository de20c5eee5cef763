"""Perf maps (``profiling/perfmap.py``): parsing, lookup where entries overlap, perf
script's frames named from a copy, JIT names alike across tiers and lines; the copies
taken through a process's root."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.profiling.perfmap import (
    PerfMap,
    jit_function,
    jit_name,
    map_frame,
    map_of,
    namespace_pid,
    resolve_script,
    snapshot,
)

MAP = """\
1000 100 JS:*quicksort /srv/app/app.js:6:19
1100 80 JS:^handle /srv/app/node_modules/router/index.js:150:43
0x2000 0x40 java.util.List webperf.Server.quicksort(java.util.List)
1000 20 JS:*render /srv/app/app.js:20:1
not a line
"""


def test_lookup_takes_the_later_entry_where_two_overlap() -> None:
    table = PerfMap.parse(MAP)
    assert table.lookup(0x1005) == "JS:*render /srv/app/app.js:20:1"  # written later
    assert table.lookup(0x1050) == "JS:*quicksort /srv/app/app.js:6:19"
    assert table.lookup(0x2010) == "java.util.List webperf.Server.quicksort(java.util.List)"
    assert table.lookup(0x1180) is None and table.lookup(0x10) is None


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 200)), min_size=1, max_size=40),
    st.integers(0, 10_300),
)
def test_lookup_is_the_last_written_entry_that_covers_the_address(
    entries: list[tuple[int, int]], address: int
) -> None:
    text = "".join(f"{start:x} {size:x} f{i}\n" for i, (start, size) in enumerate(entries))
    covering = [i for i, (start, size) in enumerate(entries) if start <= address < start + size]
    found = PerfMap.parse(text).lookup(address)
    if found is not None:  # overlaps are looked for among the 16 nearest starts
        assert found in {f"f{i}" for i in covering}
    if len(entries) <= 16:
        assert found == (f"f{covering[-1]}" if covering else None)


def test_resolve_script_names_map_frames_of_their_own_pid() -> None:
    script = (
        "node 42 1003009\n"
        "\t    1050 [unknown] (/tmp/perf-42.map)\n"
        "\t    1050 [unknown] (/tmp/perf-43.map)\n"
        "\t    7777 [unknown] (/usr/lib/libz.so.1)\n\n"
    )
    out, seen, named = resolve_script(script, {42: PerfMap.parse(MAP)})
    assert (seen, named) == (2, 1)
    assert "1050 JS:*quicksort /srv/app/app.js:6:19 (/tmp/perf-42.map)" in out
    assert "[unknown] (/tmp/perf-43.map)" in out and "[unknown] (/usr/lib/libz.so.1)" in out


def test_a_name_perf_read_from_a_stale_host_map_is_replaced_from_the_copy() -> None:
    script = (  # perf named them from the host's /tmp/perf-42.map: another process's
        "node 42 1003009\n"
        "\t    1050 Function:~ node:internal/fixed_queue:1 (/tmp/perf-42.map)\n"
        "\t    2010 LazyCompile:*setupBuffer node:internal/bootstrap/node:1 (/tmp/perf-42.map)\n"
        "\t    1050 Function:~ node:internal/fixed_queue:1 (/tmp/perf-43.map)\n\n"
    )
    out, seen, named = resolve_script(script, {42: PerfMap.parse(MAP)})
    assert (seen, named) == (3, 2)
    assert "1050 JS:*quicksort /srv/app/app.js:6:19 (/tmp/perf-42.map)" in out
    assert "2010 java.util.List webperf.Server.quicksort(java.util.List) (/tmp/perf-42.map)" in out
    assert "1050 [unknown] (/tmp/perf-43.map)" in out  # no copy: never the stale name
    assert "fixed_queue" not in out and "setupBuffer" not in out


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        ("JS:*quicksort /srv/app/app.js:6:19", "quicksort (app.js)"),
        ("JS:~quicksort /srv/app/app.js:9:19", "quicksort (app.js)"),  # tier, line: alike
        ("LazyCompile:*handle /a/node_modules/router/index.js:150:43", "handle (router/index.js)"),
        ("Function:^emit node:events:471:44", "emit (node:events)"),
        ("JS:^ /srv/app/app.js:26:23", "(anonymous) app.js:26"),  # its line: no other name
        (
            "JS:*handle /a/node_modules/express/lib/router/index.js:9:3",
            "handle (express/lib/router/index.js)",
        ),
        ("py::Handler.do_GET:/srv/app/server.py", "Handler.do_GET (server.py)"),
        ("py::<lambda>:/srv/app/server.py", "<lambda> (server.py)"),
        (
            "py::route:/venv/lib/python3.12/site-packages/fastapi/routing.py",
            "route (fastapi/routing.py)",
        ),
        (
            "py::serve_forever:/usr/lib/python3.12/socketserver.py",
            "serve_forever (socketserver.py)",
        ),
        ("RegExp:^(?:\\/quicksort)(?:\\/$)?$", "[RegExp] (v8)"),
        ("Builtin:ArrayPrototypePush", "ArrayPrototypePush (v8)"),
        (
            "java.util.List webperf.Server.quicksort(java.util.List)",
            "webperf.Server.quicksort (java)",
        ),
        (
            "void java.lang.System.arraycopy(java.lang.Object, int, java.lang.Object, int, int)",
            "java.lang.System.arraycopy (java)",
        ),
        ("Lwebperf/Server;::quicksort", "webperf.Server.quicksort (java)"),
        ("TRACE-2$quicksort$8", "quicksort (php)"),
        ("TRACE-7$Store::add$31", "Store::add (php)"),
        ("JIT$render", "render (php)"),
        ("JIT$$exception_handler", "[jit stub] (php)"),
        ("I2C/C2I adapters", None),
        ("Interpreter", None),
        ("StubRoutines (2)", None),
    ],
)
def test_jit_names_are_alike_across_tiers_and_lines(symbol: str, name: str | None) -> None:
    assert jit_name(symbol) == name


@pytest.mark.parametrize(
    ("symbol", "kind"),
    [
        ("JS:*quicksort /srv/app/app.js:6:19", "user"),
        ("JS:*handle /a/node_modules/router/index.js:150:43", "library"),
        ("Function:^emit node:events:471:44", "runtime"),
        ("Builtin:ArrayPrototypePush", "runtime"),
        ("py::render:/srv/app/app.py", "user"),
        ("py::route:/venv/lib/python3.12/site-packages/fastapi/routing.py", "library"),
        (
            "py::serve_forever:/root/.pyenv/versions/3.12.1/lib/python3.12/socketserver.py",
            "runtime",
        ),
        ("py::_find_and_load:<frozen importlib._bootstrap>", "runtime"),
        ("java.util.List webperf.Server.quicksort(java.util.List)", "user"),
        ("void java.lang.System.arraycopy(java.lang.Object)", "runtime"),
    ],
)
def test_a_jit_function_is_the_users_a_librarys_or_the_runtimes(symbol: str, kind: str) -> None:
    found = jit_function(symbol)
    assert found is not None and found[2] == kind


def test_a_map_frame_never_names_its_pid() -> None:
    assert map_frame("[unknown]") == "[unknown] (jit)"
    assert map_frame("Interpreter") == "Interpreter (jit)"
    assert map_frame("JS:*quicksort /srv/app.js:1:1") == "quicksort (app.js)"


def test_a_process_map_is_copied_through_its_root(tmp_path: Path) -> None:
    assert namespace_pid(os.getpid()) is not None
    assert namespace_pid(2**22 + 12345) is None
    assert snapshot([2**22 + 12345], tmp_path) == {}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    written = Path(f"/tmp/perf-{child.pid}.map")
    try:
        if namespace_pid(child.pid) != child.pid:
            pytest.skip("this test runs in a pid namespace of its own")
        written.write_text("1000 100 JS:*f /x.js:1:1\n")
        time.sleep(0.05)
        assert map_of(child.pid) == Path(f"/proc/{child.pid}/root/tmp/perf-{child.pid}.map")
        copies = snapshot([child.pid, os.getpid()], tmp_path)
        assert set(copies) == {child.pid}
        assert copies[child.pid].read_text() == written.read_text()
    finally:
        child.kill()
        child.wait()
        written.unlink(missing_ok=True)
