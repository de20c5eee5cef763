"""Unit tests of the JSON baseline store."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.errors import BaselineError
from pytest_webperf.gate import baseline
from pytest_webperf.gate.baseline import HISTORY_LIMIT, BaselineStore
from pytest_webperf.models.measurement import Measurement, RunResult, Verdict
from pytest_webperf.models.samples import Latency, ResourceSample, Snapshot
from pytest_webperf.models.workload import Workload
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.targets import gitref

NODEID = "suites/test_http.py::test_hello[nginx-c500]"


def make(rps: float, name: str = "/hello", nodeid: str = NODEID) -> Measurement:
    hist = Histogram()
    for us in (900, 1000, 1500, 20000):
        hist.record(us)
    runs = tuple(
        RunResult(
            repetition=i,
            concurrency=500,
            duration_s=20.0,
            requests=int(rps * 20),
            errors=1,
            timeouts=1,
            connect_errors=0,
            bytes=123456,
            latency=Latency.of(hist),
            series=(Snapshot(1.0, 1.0, 500, int(rps), 0, 0, 100, 1.0, 2.0, 3.0),),
            histogram=hist,
            resources=(ResourceSample(1.0, "nginx", 55.5, 12.25, 3, 3),),
            server_cpu_seconds=4.5,
        )
        for i in range(3)
    )
    return Measurement(
        nodeid=nodeid,
        name=name,
        server="nginx",
        concurrency=500,
        workload=Workload(),
        runs=runs,
        target={"image": "webperf/nginx:abc"},
        verdict=Verdict("pass"),
    )


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    return BaselineStore(tmp_path / "baselines", "intel-xeon-2c-1234abcd")


def test_save_then_load_round_trips(store: BaselineStore) -> None:
    m = make(1000.0)
    (path,) = store.save([m], {"git": {"commit": "abc123", "dirty": False}})
    assert path == store.path_for(NODEID)
    assert path.parent == store.base_dir / "intel-xeon-2c-1234abcd"
    loaded = store.load(NODEID, "/hello")
    assert loaded is not None
    assert loaded.to_dict() == m.to_dict() | {"verdict": None}  # the run's verdict is not kept
    entry = store.load_entry(NODEID, "/hello")
    assert entry is not None
    assert entry.metadata["git"] == {"commit": "abc123", "dirty": False}
    assert entry.machine_id == "intel-xeon-2c-1234abcd"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", entry.saved_at)
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and data["nodeid"] == NODEID


def test_missing_baselines_are_none(store: BaselineStore) -> None:
    assert store.load(NODEID, "/hello") is None
    store.save([make(1000.0)])
    assert store.load(NODEID, "/other") is None
    assert store.load("suites/test_http.py::test_other", "/hello") is None


def test_several_measurements_of_one_test_share_a_file(store: BaselineStore) -> None:
    paths = store.save([make(1000.0, "/hello"), make(500.0, "/quicksort")])
    assert len(paths) == 1
    small = store.load(NODEID, "/quicksort")
    assert small is not None and small.rps == pytest.approx(500.0)
    store.save([make(1100.0, "/hello")])  # saving one name keeps the other
    assert store.load(NODEID, "/quicksort") is not None


def test_history_is_appended_bounded_and_the_latest_wins(store: BaselineStore) -> None:
    for i in range(HISTORY_LIMIT + 5):
        store.save([make(1000.0 + i)], {"run": i})
    history = store.history(NODEID, "/hello")
    assert len(history) == HISTORY_LIMIT
    assert [h["metadata"]["run"] for h in history] == list(range(5, HISTORY_LIMIT + 5))
    assert history[-1]["summary"]["rps"] == [pytest.approx(1000.0 + HISTORY_LIMIT + 4)] * 3
    assert history[0]["summary"]["cpu_per_req"] == [pytest.approx(4.5e6 / 20100)] * 3
    latest = store.load(NODEID, "/hello")
    assert latest is not None and latest.rps == pytest.approx(1000.0 + HISTORY_LIMIT + 4)


@settings(max_examples=40)
@given(st.text(min_size=1, max_size=300))
def test_file_names_are_safe_and_unique(nodeid: str) -> None:
    name = baseline.file_name(nodeid)
    assert re.fullmatch(r"[A-Za-z0-9._-]+-[0-9a-f]{8}\.json", name)
    assert not name.startswith(".") and len(name) <= 100
    assert baseline.file_name(nodeid + "x") != name


def test_ids_that_slug_alike_get_different_files() -> None:
    assert baseline.file_name("t.py::a[x/y]") != baseline.file_name("t.py::a[x-y]")
    assert baseline.file_name(NODEID).startswith("suites-test_http.py--test_hello-nginx-c500-")


def test_a_crash_during_the_write_keeps_the_old_file(
    store: BaselineStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save([make(1000.0)])
    path = store.path_for(NODEID)
    before = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(BaselineError, match=r"cannot write the baseline .*simulated crash"):
        store.save([make(2000.0)])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    loaded = store.load(NODEID, "/hello")
    assert loaded is not None and loaded.rps == pytest.approx(1000.0)


def test_a_crash_while_writing_the_temp_file_keeps_the_old_file(
    store: BaselineStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save([make(1000.0)])
    path = store.path_for(NODEID)
    before = path.read_bytes()

    def crash(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(BaselineError, match="disk full"):
        store.save([make(2000.0)])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert len(list(path.parent.iterdir())) == 1


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "cannot be read"),
        ("", "cannot be read"),
        ("[]", "top level is not an object"),
        ('{"measurements": {}}', "'schema' is None"),
        ('{"schema": 1, "measurements": []}', "'measurements' is not an object"),
        ('{"schema": 1, "measurements": {"/hello": {"latest": {}}}}', "lacks 'latest.measurement'"),
        (
            '{"schema": 1, "measurements": {"/hello": {"latest": {"measurement": {}}, '
            '"history": []}}}',
            "measurement '/hello' cannot be read",
        ),
    ],
)
def test_a_corrupt_file_names_the_file_and_the_fix(
    store: BaselineStore, content: str, says: str
) -> None:
    path = store.path_for(NODEID)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(BaselineError) as info:
        store.load(NODEID, "/hello")
    message = str(info.value)
    assert str(path) in message and says in message
    assert "delete it, or re-run with --webperf-save" in message


def test_saving_over_a_corrupt_file_keeps_it_aside(store: BaselineStore) -> None:
    path = store.path_for(NODEID)
    path.parent.mkdir(parents=True)
    path.write_text("{truncated")
    store.save([make(1000.0)])
    assert store.load(NODEID, "/hello") is not None
    (aside,) = [p for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert aside.read_text() == "{truncated"


def test_a_newer_schema_is_refused_and_never_overwritten(store: BaselineStore) -> None:
    path = store.path_for(NODEID)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 2, "measurements": {}}')
    with pytest.raises(BaselineError, match=r"newer pytest-webperf .*upgrade"):
        store.load(NODEID, "/hello")
    with pytest.raises(BaselineError, match="newer pytest-webperf"):
        store.save([make(1000.0)])
    assert path.read_text() == '{"schema": 2, "measurements": {}}'


def test_other_machines_are_listed_and_used_only_when_asked(tmp_path: Path) -> None:
    other = BaselineStore(tmp_path, "amd-epyc-8c-00000000")
    other.save([make(3000.0)])
    here = BaselineStore(tmp_path, "intel-xeon-2c-1234abcd")
    assert here.load(NODEID, "/hello") is None
    assert here.other_machines(NODEID, "/hello") == ["amd-epyc-8c-00000000"]
    assert here.other_machines(NODEID, "/nope") == []
    entry = here.load_entry(NODEID, "/hello", allow_other_machine=True)
    assert entry is not None and entry.machine_id == "amd-epyc-8c-00000000"
    here.save([make(1000.0)])
    mine = here.load(NODEID, "/hello", allow_other_machine=True)
    assert mine is not None and mine.rps == pytest.approx(1000.0)  # own machine first


def test_git_commit_of_a_work_tree_or_none(tmp_path: Path) -> None:
    info = gitref.git_commit(Path(__file__).parent)
    if info is not None:  # the tests may run from an exported tree
        assert re.fullmatch(r"[0-9a-f]{40}", info["commit"])
    assert gitref.git_commit(tmp_path) is None


PROFILE = {
    "tools": ["perf"],
    "repetitions": [
        {"leaves": {"f": 90, "g": 10}, "samples": 100, "requests": 50, "cpu_per_request_us": 9.0}
    ],
    "change_folded": "main;f 90\nmain;g 10\n",
    "base_folded": "main;f 1\n",
    "changes": [],
}


def test_a_baseline_keeps_the_digest_of_its_profile_in_latest_only(store: BaselineStore) -> None:
    import dataclasses

    from pytest_webperf.profiling import digest

    store.save([dataclasses.replace(make(100.0), profile=PROFILE)])
    store.save([dataclasses.replace(make(110.0), profile=PROFILE)])
    loaded = store.load(NODEID, "/hello")
    assert loaded is not None and loaded.profile is not None
    assert digest.check(loaded.profile) is None
    assert loaded.profile["folded"] == "main;f 90\nmain;g 10\n"
    assert "changes" not in loaded.profile and "base_folded" not in loaded.profile
    assert "profile" not in json.dumps(store.history(NODEID, "/hello"))
    assert baseline.kept_profile({"why": "no perf"}) is None and baseline.kept_profile(None) is None


def test_old_profiles_are_stripped_and_the_store_measured(store: BaselineStore, capsys) -> None:
    import dataclasses

    from pytest_webperf.cli import main

    store.save([dataclasses.replace(make(100.0), profile=PROFILE)])
    (size,) = baseline.store_sizes(store.base_dir)
    assert size.machine_id == store.machine_id and size.files == 1 and size.profiles == 1
    assert baseline.strip_profiles(store.base_dir, "2000-01-01T00:00:00+00:00") == []
    dry = baseline.strip_profiles(store.base_dir, "9999-01-01", dry_run=True)
    assert [name for _, name, _ in dry] == ["/hello"]
    assert baseline.store_sizes(store.base_dir)[0].profiles == 1  # a dry run writes nothing
    time.sleep(1.1)  # saved_at is to the second
    assert (
        main(["prune", "--baselines", str(store.base_dir), "--profiles-older-than", "0.001s"]) == 0
    )
    out = capsys.readouterr().out
    assert "1 profile(s)" in out and "removed 1 profile(s)" in out
    assert baseline.store_sizes(store.base_dir)[0].profiles == 0
    loaded = store.load(NODEID, "/hello")
    assert loaded is not None and loaded.profile is None and loaded.runs  # the rest is kept
    assert main(["prune", "--profiles-older-than", "30d"]) == 2  # no store named
