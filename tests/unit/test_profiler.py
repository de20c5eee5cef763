"""The profiler's parsing (perf script with perf maps, py-spy raw), what a run says
without a profiler, the rates it plans, and the profiles of A/B pairs as the JSON holds
them (the judge's diff of them: ``test_attribution.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.measurement.pairs import Pairs, profile_of
from pytest_webperf.measurement.profiles import Profiler
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.profiling import capture as profiler
from pytest_webperf.profiling import runtimes
from pytest_webperf.profiling.capture import Capture, Recording
from pytest_webperf.profiling.folding import (
    Window,
    fold_perf_script,
    fold_py_spy,
    fold_window,
    held_frames,
    unnamed_libraries,
)
from pytest_webperf.profiling.stacks import parse_folded
from pytest_webperf.stats.histogram import Histogram

PERF_SCRIPT = """\
  6349   10101010
\tffffffff813a4413 finish_task_switch.isra.0 ([kernel.kallsyms])
\t          10ad6a setsockopt (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    56490877eb88 [unknown] ([unknown])

  6349   10101010
\t           5470e ngx_linux_sendfile_chain (/usr/sbin/nginx)
\t           b5530 [unknown] (/usr/sbin/nginx)
  6348   10101010
\t           5470e ngx_linux_sendfile_chain (/usr/sbin/nginx)
\t           b5530 [unknown] (/usr/sbin/nginx)
"""


def test_perf_script_folds_root_first_without_garbage_frames() -> None:
    stacks, period = fold_perf_script(PERF_SCRIPT)
    assert period == pytest.approx(0.0101010)
    assert stacks == {
        "setsockopt (libc.so.6);finish_task_switch.isra.0 (kernel)": 1,
        "[unknown] (nginx);ngx_linux_sendfile_chain (nginx)": 2,
    }
    assert fold_perf_script("") == ({}, None)


def test_py_spy_frames_lose_the_process_and_the_line() -> None:
    raw = (
        'process 6109:"python3 srv.py";<module> (srv.py:1);slow (srv.py:2) 164\n'
        'process 6110:"python3 srv.py";<module> (srv.py:1);slow (srv.py:3) 6\n'
        "<module> (srv.py:1);fast (srv.py:4) 38\n"
    )
    assert fold_py_spy(raw) == {
        "<module> (srv.py);slow (srv.py)": 170,
        "<module> (srv.py);fast (srv.py)": 38,
    }


def test_a_target_with_no_process_gives_a_reason() -> None:
    recording = Recording({"server": 2**22 + 12345})  # no such pid
    recording.start()
    try:
        assert recording.collect() == "server: no process to sample"
    finally:
        recording.close()


def test_a_target_with_no_part_here_gives_a_reason() -> None:
    recording = Recording({})  # an external target: nothing on this host
    recording.start()
    try:
        assert recording.collect() == "no process of the target on this host"
    finally:
        recording.close()


def test_no_perf_binary_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    profiler.perf_problem.cache_clear()
    monkeypatch.setattr(profiler.shutil, "which", lambda name: None)
    monkeypatch.setattr(profiler, "py_spy_path", lambda: None)
    try:
        why = profiler.problem()
        assert why is not None and "no perf binary" in why and "py-spy" in why
        note = profiler.header_note("auto", "origin/main")
        assert note is not None and note.startswith("webperf: no CPU profiles")
        assert profiler.header_note("off", "origin/main") is None
        assert profiler.header_note("auto", None) is None
        assert profiler.header_note("on", None) is None  # each measurement says why
    finally:
        profiler.perf_problem.cache_clear()


def test_a_python_target_without_py_spy_says_its_profile_names_no_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if profiler.perf_problem() is not None:
        pytest.skip(f"perf cannot sample here: {profiler.perf_problem()}")
    monkeypatch.setattr(profiler, "py_spy_path", lambda: None)
    server = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # busy: sampled
    recording = Recording({"server": server.pid})
    try:
        recording.prepare()  # perf takes a second or two to start sampling
        time.sleep(2.5)
        recording.start()
        time.sleep(0.5)
        capture = recording.collect()
    finally:
        recording.close()
        server.kill()
        server.wait()
    assert isinstance(capture, Capture), capture
    assert capture.tools == ("perf",)
    assert any("no py-spy found" in note for note in capture.notes), capture.notes


def make_run(repetition: int, requests: int, cpu_s: float | None = None) -> RunResult:
    return RunResult(
        repetition=repetition,
        concurrency=1,
        duration_s=1.0,
        requests=requests,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=Latency.of(Histogram()),
        series=(),
        server_cpu_seconds=cpu_s,
    )


def _pairs(a: dict[str, int], b: dict[str, int], n: int = 3) -> tuple[Pairs, Profiler]:
    pairs = Pairs()
    profiler = Profiler(3.0, n)
    pairs.captures = profiler.captures
    for i in range(n):
        pairs.base.append(make_run(repetition=i + 1, requests=1000, cpu_s=0.1))
        pairs.change.append(make_run(repetition=i + 1, requests=1000, cpu_s=0.3))
        pairs.captures["A"].append(Capture(a, 0.01, ("perf",), rates={"perf": 997}))
        pairs.captures["B"].append(Capture(b, 0.01, ("perf",), rates={"perf": 997}))
        pairs.order.append("AB" if i % 2 == 0 else "BA")
    return pairs, profiler


def test_profile_of_pairs_keeps_each_side_s_repetitions_and_stacks() -> None:
    a = {"main;serve;hash (libcrypto.so.3)": 400, "main;serve;parse (srv)": 400}
    b = {"main;serve;hash (libcrypto.so.3)": 1200, "main;serve;parse (srv)": 400}
    profile = profile_of(*_pairs(a, b))
    assert profile is not None
    assert parse_folded(profile["base_folded"]) == {k: 3 * v for k, v in a.items()}
    assert parse_folded(profile["change_folded"]) == {k: 3 * v for k, v in b.items()}
    assert profile["tools"] == ["perf"] and profile["samples"] == {"A": 2400, "B": 4800}
    first = profile["base_repetitions"][0]
    assert first["leaves"] == {"hash (libcrypto.so.3)": 400, "parse (srv)": 400}
    assert first["cpu_per_request_us"] == 100.0 and first["rate_hz"] == {"perf": 997}
    assert len(profile["repetitions"]) == 3


def test_profile_of_says_why_there_is_none() -> None:
    assert profile_of(Pairs(), None) is None
    assert profile_of(Pairs(), Profiler(3.0, 3, unavailable="no perf binary")) == {
        "why": "no perf binary"
    }
    pairs, profiler = _pairs({}, {}, 2)
    pairs.captures["A"][:] = ["perf cannot sample here"] * 2
    pairs.captures["B"][:] = ["perf cannot sample here"] * 2
    assert profile_of(pairs, profiler) == {"why": "perf cannot sample here"}


def test_rates_are_planned_from_what_the_pairs_used() -> None:
    profiler = Profiler(3.0, 3)
    assert profiler.rates == {"perf": 997, "py-spy": 997}  # a quarter of a core guessed
    busy = {"main;f": 3000}
    runs = {"A": [make_run(1, 1000, cpu_s=6.0)], "B": [make_run(1, 1000, cpu_s=6.0)]}
    profiler.captures["A"].append(Capture(busy, 0.001, ("perf",), rates={"perf": 997}))
    profiler.captures["B"].append(Capture(busy, 0.001, ("perf",), rates={"perf": 997}))
    profiler.replan(runs)  # two cores busy: 3,000 samples already, the lowest rate will do
    assert profiler.rates == {"perf": 99, "py-spy": 99}
    replayed = Profiler(3.0, 3, schedule=[{"perf": 1999}, {"perf": 499}])
    assert replayed.rates == {"perf": 1999}
    replayed.replan(runs)
    assert replayed.rates == {"perf": 499}


SERVLET = (
    "webperf.Servlet.doGet(jakarta.servlet.http.HttpServletRequest, "
    "jakarta.servlet.http.HttpServletResponse)"
)
MAPPED = (
    "  4242   1003009\n"
    "\t    1050 [unknown] (/tmp/perf-4242.map)\n"
    f"\t    2010 {SERVLET} (/tmp/perf-4242.map)\n"
    "\t    3000 Interpreter (/tmp/perf-4242.map)\n"
    "\t      10 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
    "  4242   1003009\n"
    "\t   11063 [unknown] (/usr/lib/x86_64-linux-gnu/libz.so.1.2.13)\n"
    "\t    1050 JS:*quicksort /srv/app/app.js:6:19 (/tmp/perf-4242.map)\n"
)


def test_perf_map_frames_are_named_alike_whatever_the_pid() -> None:
    stacks, _ = fold_perf_script(MAPPED)
    assert stacks == {  # an unnamed frame under its nearest named caller: never alone
        "start_thread (libc.so.6);Interpreter (jit);webperf.Servlet.doGet (java);"
        "webperf.Servlet.doGet (java) > [unknown] (jit)": 1,
        "quicksort (app.js);quicksort (app.js) > [unknown] (libz.so.1.2.13)": 1,
    }
    assert unnamed_libraries(MAPPED) == {"/usr/lib/x86_64-linux-gnu/libz.so.1.2.13": 1}


@pytest.mark.parametrize(
    ("stack", "shown"),
    [
        (
            ["main (srv)", "[unknown] (libz.so.1)"],
            ["main (srv)", "main (srv) > [unknown] (libz.so.1)"],
        ),
        (  # one frame per object under one caller, however deep; a callback stays
            ["a (srv)", "[unknown] (libz.so.1)", "[unknown] (libz.so.1)", "memcpy (libc.so.6)"],
            ["a (srv)", "a (srv) > [unknown] (libz.so.1)", "memcpy (libc.so.6)"],
        ),
        (["[unknown] (libz.so.1)", "f (srv)"], ["[unknown] (libz.so.1)", "f (srv)"]),
    ],
)
def test_an_unnamed_frame_is_shown_under_its_nearest_named_caller(
    stack: list[str], shown: list[str]
) -> None:
    assert held_frames(stack) == shown


@given(st.lists(st.sampled_from(["a (x)", "b (y)", "[unknown] (z)", "[unknown] (jit)"])))
def test_a_held_stack_keeps_every_named_frame_and_no_bare_unknown_below_one(
    stack: list[str],
) -> None:
    shown = held_frames(stack)
    assert [f for f in shown if "[unknown]" not in f] == [f for f in stack if "[unknown]" not in f]
    first = next((i for i, f in enumerate(stack) if "[unknown]" not in f), len(stack))
    assert all(not f.startswith("[unknown]") for f in shown[first:])


def test_the_runtimes_get_their_profiling_flags_once() -> None:
    env = runtimes.profile_env({"PORT": "1"}, {"NODE_OPTIONS": "--max-old-space-size=64"})
    assert env["NODE_OPTIONS"].split() == [
        "--max-old-space-size=64",
        "--perf-basic-prof",
        "--interpreted-frames-native-stack",
    ]
    assert env["JAVA_TOOL_OPTIONS"] == "-XX:+PreserveFramePointer" and env["PORT"] == "1"
    assert runtimes.profile_env(env) == env


def test_a_library_is_traced_to_its_debian_package(tmp_path: Path) -> None:
    info = tmp_path / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "zlib1g:amd64.list").write_text("/.\n/lib/x86_64-linux-gnu/libz.so.1.2.13\n")
    (info / "libc6:amd64.list").write_text("/lib/x86_64-linux-gnu/libc.so.6\n")
    (info / "libnginx-mod-echo:amd64.list").write_text("/usr/share/doc/echo/nginx\n")
    (info / "nginx-core:amd64.list").write_text("/usr/sbin/nginx\n")
    root = str(tmp_path)
    assert runtimes._package_in(root, "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13") == "zlib1g"
    assert runtimes._package_in(root, "/lib/x86_64-linux-gnu/libc.so.6") == "libc6"
    assert runtimes._package_in(root, "/usr/sbin/nginx") == "nginx-core"  # the path, whole
    assert runtimes._package_in(root, "/usr/lib/libnone.so") is None
    note = runtimes.library_note("libz.so.1.2.13", "zlib1g")
    assert "install zlib1g-dbgsym (Debian's debug archive) in the image" in note
    assert "nearest named caller" in note
    counted = runtimes.symbols_fix("zlib1g")
    assert 'debug_symbols = ["zlib1g"]' in counted and "DEBUGINFOD_URLS" in counted


def test_this_process_is_a_python_runtime() -> None:
    assert runtimes.runtime_of(os.getpid()) == "python"
    assert runtimes.runtime_of(2**22 + 12345) == "native"


TIMED = (
    "  4242 100.500000:   1003009 \n\t    10 early (srv)\n\n"
    "  4242 101.000000:   1003009 \n\t    10 inside (srv)\n\n"
    "  4242 101.200000:   1003009 \n\t    10 inside (srv)\n\n"
    "  4242 103.000000:   1003009 \n\t    10 late (srv)\n"
)


def test_only_the_samples_of_the_measured_window_are_folded() -> None:
    folded = fold_window(TIMED, Window(100.9, 102.0))
    assert folded.stacks == {"inside (srv)": 2} and folded.outside == 2
    assert folded.first_s == 101.0 and folded.period_s == pytest.approx(0.001003009)
    assert fold_window(TIMED, None).stacks == {"early (srv)": 1, "inside (srv)": 2, "late (srv)": 1}
    assert fold_window(TIMED, Window(100.9)).stacks == {"inside (srv)": 2, "late (srv)": 1}
