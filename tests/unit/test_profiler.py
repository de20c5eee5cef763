"""The profiler's parsing (perf script, py-spy raw), what a run says without a profiler,
and the differential profile of A/B pairs as the JSON holds it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pytest_webperf.measurement.pairs import Pairs, profile_of
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.profiling import capture as profiler
from pytest_webperf.profiling.capture import Capture, Recording, fold_perf_script, fold_py_spy
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
        on = profiler.header_note("on", None)
        assert on is not None and "A/B runs only" in on
    finally:
        profiler.perf_problem.cache_clear()


def test_a_python_target_without_py_spy_says_its_profile_names_no_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if profiler.perf_problem() is not None:
        pytest.skip(f"perf cannot sample here: {profiler.perf_problem()}")
    monkeypatch.setattr(profiler, "py_spy_path", lambda: None)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    recording = Recording({"server": server.pid})
    try:
        recording.start()
        time.sleep(0.3)
        capture = recording.collect()
    finally:
        recording.close()
        server.kill()
        server.wait()
    assert isinstance(capture, Capture), capture
    assert capture.tools == ("perf",)
    assert any("no py-spy found" in note for note in capture.notes), capture.notes


def make_run(repetition: int, requests: int) -> RunResult:
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
    )


def _pairs(a: dict[str, int], b: dict[str, int], n: int = 3) -> Pairs:
    pairs = Pairs()
    for i in range(n):
        pairs.base.append(make_run(repetition=i + 1, requests=1000))
        pairs.change.append(make_run(repetition=i + 1, requests=1000))
        pairs.captures["A"].append(Capture(a, 0.01, ("perf",)))
        pairs.captures["B"].append(Capture(b, 0.01, ("perf",)))
        pairs.order.append("AB" if i % 2 == 0 else "BA")
    return pairs


def test_profile_of_pairs_ranks_and_keeps_both_sides() -> None:
    a = {"main;serve;hash (libcrypto.so.3)": 400, "main;serve;parse (srv)": 400}
    b = {"main;serve;hash (libcrypto.so.3)": 1200, "main;serve;parse (srv)": 400}
    profile = profile_of(_pairs(a, b), None)
    assert [c["function"] for c in profile["changes"]] == ["hash (libcrypto.so.3)"]
    assert profile["changes"][0]["change_us"] > 0
    assert parse_folded(profile["base_folded"]) == {k: 3 * v for k, v in a.items()}
    assert parse_folded(profile["change_folded"]) == {k: 3 * v for k, v in b.items()}
    assert profile["tools"] == ["perf"] and profile["pairs"] == 3


def test_profile_of_says_why_there_is_none() -> None:
    assert profile_of(Pairs(), "no perf binary") == {"why": "no perf binary"}
    pairs = _pairs({}, {}, 2)
    pairs.captures = {"A": ["perf cannot sample here"] * 2, "B": ["perf cannot sample here"] * 2}
    assert profile_of(pairs, None) == {"why": "perf cannot sample here"}
