"""A user's own paced Locust users (``swarm/locustfile.Pacer``): a fixed schedule of
tasks, each request charged for how late its task started (no Locust, no gevent here:
the clock and the current user are given)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.swarm.child.locustfile import Pacer

MS = 1_000_000  # ns


class User:
    """Stands for a user's greenlet (weakly referenced, as greenlets are)."""


class FakePacer(Pacer):
    def __init__(self) -> None:
        self.now = 0
        super().__init__(clock=lambda: self.now)
        self.user: User = User()

    def _current(self) -> User:
        return self.user


def test_a_task_on_time_has_no_lag_and_a_late_one_is_charged_its_delay() -> None:
    pacer = FakePacer()
    pacer.begin()
    pacer.now = 10 * MS
    assert pacer.lag_us(2_000) == 0  # the first task is due at its first request (sent at 8 ms)
    assert pacer.lag_us(1_000) == 0  # a second request of the same task: the same lag
    pacer.now = 12 * MS
    assert pacer.next_wait(100 * MS) == (108 - 12) / 1000  # due 100 ms after the first
    pacer.now = 109 * MS
    assert pacer.lag_us(1_000) == 0  # sent at 108 ms: on time
    pacer.now = 1_300 * MS  # the server stalled: this task's response took 1.19 s
    assert pacer.next_wait(100 * MS) == 0  # due at 208 ms: late, sent at once
    pacer.now = 1_305 * MS
    assert pacer.lag_us(4_000) == (1_301 - 208) * 1000  # sent at 1.301 s, due at 208 ms
    pacer.now = 1_306 * MS
    assert pacer.next_wait(100 * MS) == 0  # due at 308 ms: never skipped, sent at once
    pacer.now = 1_310 * MS
    assert pacer.lag_us(3_000) == (1_307 - 308) * 1000


def test_another_user_s_requests_are_not_paced() -> None:
    pacer = FakePacer()
    pacer.begin()
    pacer.user = User()  # a greenlet that never began: not one of the paced users'
    assert pacer.lag_us(1_000) is None


@given(st.lists(st.integers(0, 500), min_size=1, max_size=40), st.integers(1, 200))
def test_lags_never_negative_and_the_schedule_never_skips(
    service_ms: list[int], period_ms: int
) -> None:
    pacer = FakePacer()
    pacer.begin()
    sent = []
    for service in service_ms:
        pacer.now += service * MS
        lag = pacer.lag_us(service * 1000)
        assert lag is not None and lag >= 0
        sent.append(pacer.now - service * MS)
        pacer.now += int(pacer.next_wait(period_ms * MS) * 1e9)
    task = pacer.tasks[pacer.user]
    assert task.due == sent[0] + len(service_ms) * period_ms * MS  # one due time per task
