"""The drain rule and the publishers' report, without a broker."""

from __future__ import annotations

import itertools

from pytest_webperf.measurement.mqtt import drain, published_from


def test_drain_ends_when_every_consumer_has_everything() -> None:
    waited, arriving = drain(10, {"a": lambda: 10, "b": lambda: 12}, timeout=5, quiet=2)
    assert arriving == {"a": False, "b": False}
    assert waited < 5


def test_a_consumer_that_stopped_is_not_arriving() -> None:
    _, arriving = drain(10, {"dead": lambda: 3}, timeout=5, quiet=0)
    assert arriving == {"dead": False}


def test_a_consumer_still_moving_at_the_timeout_is_arriving() -> None:
    counter = itertools.count()
    _, arriving = drain(10**9, {"slow": lambda: next(counter)}, timeout=0, quiet=60)
    assert arriving == {"slow": True}


def test_published_from_the_swarm_report() -> None:
    published = published_from({"clients": [[1, 3, []], [2, 5, [3, 4]]]})
    assert published.total == 8
    assert published.unacked_total == 2
    assert not published.acked(2, 4) and published.acked(1, 2)
