"""Whether a target is measured against its base: decided once, by ``Against.pair``
(``webperf.server`` and ``webperf.process`` both ask it)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_webperf.targets import against as base


class Started:
    def __init__(self, name: str) -> None:
        self.name, self.host, self.port = name, "127.0.0.1", 1


def against(always: bool) -> base.Against:
    return base.Against(tree=Any, catalog=Any, always=always)  # type: ignore[arg-type]


@pytest.mark.parametrize("always", [False, True])
@pytest.mark.parametrize("changed", [False, True])
def test_a_base_is_started_when_the_target_changed_or_always(changed: bool, always: bool) -> None:
    started: list[Started] = []

    def start_base() -> Any:
        started.append(Started("A"))
        return started[-1]

    change = Started("B")
    paired = against(always).pair(change, changed=changed, start_base=start_base, compared="x")  # type: ignore[arg-type]
    assert paired.change is change and paired.changed is changed
    if changed or always:
        assert started and paired.base is started[0]
    else:  # unchanged: not measured, reported "unchanged", its base never started
        assert not started and paired.base is None


@pytest.mark.parametrize("always", [False, True])
def test_a_target_new_since_the_base_is_measured_alone(always: bool) -> None:
    change = Started("B")
    paired = against(always).pair(change, changed=False, start_base=None, compared="x")  # type: ignore[arg-type]
    assert paired.base is None and paired.changed is True


@pytest.mark.parametrize("always", [False, True])
def test_a_base_that_starts_nothing_leaves_the_target_new(always: bool) -> None:
    # a command naming a file new since the base: start_base gives None
    change = Started("B")
    paired = against(always).pair(change, changed=True, start_base=lambda: None, compared="x")  # type: ignore[arg-type]
    assert paired.base is None and paired.changed is True
