"""The session under pytest-xdist (workers send, the controller reports) and the hooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_report_html import measurement

from pytest_webperf.run.session import Extensions, WebperfSession
from pytest_webperf.settings.config import RunConfig, resolve


def run_config(**cli: Any) -> RunConfig:
    # an external target: the machine info asks no container engine
    return resolve({"target_url": "http://127.0.0.1:1", **cli}, {}, {})


def test_a_worker_writes_nothing_and_the_controller_reports_what_it_sends(
    tmp_path: Path,
) -> None:
    config = run_config(json=tmp_path / "out.json", save=True)
    worker = WebperfSession(config, tmp_path)
    worker.distribution.worker = "gw1"
    worker.record([measurement("t.py::a[c2]"), measurement("t.py::a[c2]", name="GET /y")])
    worker.finish()
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "baselines").exists()
    assert worker.finished == []

    controller = WebperfSession(config, tmp_path)
    controller.distribution.collected = ("t.py::a[c2]", "t.py::b[c2]")
    output = json.loads(json.dumps(worker.worker_output()))  # as execnet carries it
    controller.receive("gw0", {"measurements": [measurement("t.py::b[c2]").to_dict()]})
    controller.receive("gw1", output)
    controller.receive("gw2", {"measurements": [], "waited_s": 0.0})  # no webperf tests
    assert [m.to_dict() for m in controller.measurements] == [  # in collection order
        *output["measurements"],
        measurement("t.py::b[c2]").to_dict(),
    ]
    assert controller.distribution.measured_by == {"t.py::a[c2]": ["gw1"], "t.py::b[c2]": ["gw0"]}
    (line, _) = controller.distribution.summary()
    assert line.startswith("webperf: 2 tests measured on workers gw0, gw1; webperf tests run one")
    controller.finish()
    written = json.loads((tmp_path / "out.json").read_text())
    assert [t["nodeid"] for t in written["tests"]] == ["t.py::a[c2]", "t.py::a[c2]", "t.py::b[c2]"]
    assert (tmp_path / "baselines").is_dir()


def test_without_xdist_the_summary_says_nothing_of_workers(tmp_path: Path) -> None:
    session = WebperfSession(run_config(), tmp_path)
    session.record([measurement()])
    assert session.distribution.summary() == []
    with session.turn():  # no lock: nothing to wait for
        pass


def test_the_hooks_add_to_the_machine_info_and_the_json_only(tmp_path: Path) -> None:
    def machine_info(info: dict[str, Any]) -> None:
        info["runner_pool"] = "blue"

    def json_report(data: dict[str, Any]) -> None:
        data["ci"] = {"build": 7}
        data["tests"][0]["ticket"] = "PERF-1"

    config = run_config(json=tmp_path / "out.json", markdown=tmp_path / "out.md")
    plain = WebperfSession(config, tmp_path)
    extended = WebperfSession(config, tmp_path, Extensions(machine_info, json_report))
    assert extended.machine.extra == {"runner_pool": "blue"}
    assert extended.store.machine_id != plain.store.machine_id
    extended.record([measurement()])
    extended.finish()
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["ci"] == {"build": 7} and written["tests"][0]["ticket"] == "PERF-1"
    assert written["machine"]["runner_pool"] == "blue"
    assert written["machine_id"] == extended.store.machine_id
    assert "PERF-1" not in (tmp_path / "out.md").read_text()


def test_a_hook_that_breaks_the_machine_info_is_named(tmp_path: Path) -> None:
    from pytest_webperf.errors import WebperfError

    def drop_kernel(info: dict[str, Any]) -> None:
        del info["kernel"]

    session = WebperfSession(run_config(), tmp_path, Extensions(drop_kernel))
    with pytest.raises(WebperfError, match="pytest_webperf_update_machine_info removed kernel"):
        _ = session.machine


def test_tests_measured_by_every_worker_are_said_so(tmp_path: Path) -> None:
    controller = WebperfSession(run_config(), tmp_path)
    for worker in ("gw0", "gw1"):  # --dist each
        controller.receive(worker, {"measurements": [measurement("t.py::a[c2]").to_dict()]})
    first, _, repeated = controller.distribution.summary()
    assert first.startswith("webperf: 1 test measured on workers gw0, gw1;")
    assert repeated.startswith("webperf: 1 test measured by more than one worker")
    assert len(controller.measurements) == 2


def test_a_worker_that_died_is_named(tmp_path: Path) -> None:
    controller = WebperfSession(run_config(), tmp_path)
    controller.distribution.lost.append("gw1")
    controller.receive("gw0", {"measurements": [measurement("t.py::a[c2]").to_dict()]})
    assert "webperf: worker gw1 went down: what it measured is not in this report" in (
        controller.distribution.summary()
    )


def test_the_machine_id_follows_the_user_that_ran_however_it_was_given(tmp_path: Path) -> None:
    """--webperf-user, WEBPERF_USER and webperf_user set the run's user; a marker or
    webperf.http(user=...) a test's: the measurement's generator. Same user, same id."""
    import dataclasses

    base = {"target_url": "http://127.0.0.1:1"}
    by_option = WebperfSession(resolve({**base, "user": "fast"}, {}, {}), tmp_path)
    by_env = WebperfSession(resolve(base, {"WEBPERF_USER": "fast"}, {}), tmp_path)
    by_ini = WebperfSession(resolve(base, {}, {"user": "fast"}), tmp_path)
    default = WebperfSession(resolve(base, {}, {}), tmp_path)
    fast_run = measurement("t.py::a", runs=())
    ids = {s.store.machine_id for s in (by_option, by_env, by_ini)}
    ids |= {s.store_for(fast_run).machine_id for s in (by_option, by_env, by_ini)}
    # a marker or keyword: the run's user is the default, the measurement says fast
    fast = dataclasses.replace(fast_run, generator="fast")
    ids.add(default.store_for(fast).machine_id)
    assert len(ids) == 1
    assert default.store.machine_id not in ids  # the default user (native or lean) differs
    lean = dataclasses.replace(fast_run, generator="lean")
    assert (
        by_option.store_for(lean).machine_id
        == WebperfSession(resolve({**base, "user": "lean"}, {}, {}), tmp_path).store.machine_id
    )
    # MQTT load is paho clients: no HTTP user changes its id
    mqtt = dataclasses.replace(fast_run, generator="mqtt")
    assert by_option.store_for(mqtt).machine_id == default.store_for(mqtt).machine_id
    # --webperf-machine-id names the machine whatever the user
    named = WebperfSession(resolve({**base, "machine_id": "ci"}, {}, {}), tmp_path)
    assert named.store_for(fast).machine_id == named.store_for(lean).machine_id == "ci"


def test_a_save_goes_under_the_id_of_the_user_that_ran(tmp_path: Path) -> None:
    import dataclasses

    session = WebperfSession(run_config(save=True), tmp_path)
    fast = dataclasses.replace(measurement("t.py::a"), generator="fast")
    session.record([fast, measurement("t.py::b")])
    session.finish()
    saved = sorted(p.parent.name for p in (tmp_path / "baselines").glob("*/*.json"))
    assert saved == sorted([session.store_for(fast).machine_id, session.store.machine_id])
    assert saved[0] != saved[1]
    again = WebperfSession(run_config(), tmp_path)
    assert again.verdict(fast).verdict is not None
    assert again.store_for(fast).load("t.py::a", "GET /x") is not None
