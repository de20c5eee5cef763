"""What the parent sends a swarm child."""

from __future__ import annotations

import json

import pytest

from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.spec import SwarmSpec


def test_round_trips_through_json() -> None:
    spec = SwarmSpec(
        host="http://127.0.0.1:8080",
        users=500,
        duration_s=10,
        warmup_s=2,
        spawn_rate=100,
        workload=Workload(path="/20kb", headers=(("X-A", "1"),)),
        user_class="lean",
        timeout_s=5,
        interval_s=0.5,
        workers=2,
        cpus=(0, 1),
    )
    assert SwarmSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_old_specs_without_new_fields_still_load() -> None:
    spec = SwarmSpec.from_dict({"host": "http://127.0.0.1:1", "users": 3, "duration_s": 1})
    assert (spec.workers, spec.cpus, spec.user_class) == (1, (), "fast")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"users": 0}, "at least one user"),
        ({"workers": 0}, "at least one generator process"),
        ({"cpus": (-1,)}, "CPU numbers"),
        ({"users": 2, "workers": 3}, "fewer --webperf-workers"),
    ],
)
def test_refuses_what_cannot_run(changes: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"host": "http://127.0.0.1:1", "users": 10, "duration_s": 1}
    with pytest.raises(ValueError, match=message):
        SwarmSpec(**{**arguments, **changes})  # type: ignore[arg-type]


def test_deadline_covers_spawn_warmup_run_and_workers() -> None:
    one = SwarmSpec(host="h", users=100, duration_s=10, warmup_s=2, spawn_rate=10, timeout_s=5)
    assert one.effective_spawn_rate == 10
    assert one.deadline_s >= 100 / 10 + 2 + 10 + 5
    two = SwarmSpec(
        host="h", users=100, duration_s=10, warmup_s=2, spawn_rate=10, timeout_s=5, workers=2
    )
    assert two.deadline_s > one.deadline_s
    assert SwarmSpec(host="h", users=250, duration_s=1).effective_spawn_rate == 250
