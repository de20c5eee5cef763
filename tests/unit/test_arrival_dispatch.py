"""The arrival-rate dispatcher in a gevent hub (no Locust, no sockets): which idle user
takes each due request, that none is skipped or taken twice, and stopping. No timing
is asserted: only the order of hand-outs, which the schedule fixes."""

from __future__ import annotations

import gevent

from pytest_webperf.swarm.child.arrival import Arrivals
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.recorder import Channel


def swarm(arrivals: Arrivals, users: int, slots: int, request_s: float) -> list[tuple[int, int]]:
    """``users`` greenlets taking due requests until ``slots`` were handed out, each
    request lasting ``request_s`` (0: it never yields); (user, due ns) per hand-out."""
    channel = Channel("GET", "/x")
    taken: list[tuple[int, int]] = []
    stop = False

    def user(number: int) -> None:
        while (due := arrivals.take(number, lambda: stop, channel)) is not None:
            taken.append((number, due))
            if request_s:
                gevent.sleep(request_s)

    greenlets = [gevent.spawn(user, n) for n in range(users)]
    while len(taken) < slots:
        gevent.sleep(0.01)
    stop = True
    gevent.joinall(greenlets, timeout=5)
    assert all(g.dead for g in greenlets)  # parked users were released
    interval = channel.take()
    assert interval.users_opened == {arrivals.process: len(arrivals.opened)}
    return taken


def consecutive(arrivals: Arrivals, taken: list[tuple[int, int]]) -> None:
    """Every due time handed out once, none skipped (users woken together, when the
    dispatcher itself ran late, may record theirs out of order)."""
    schedule, dues = arrivals.schedule, sorted(due for _, due in taken)
    first = schedule.first(dues[0])
    assert dues == [schedule.due(first + k) for k in range(len(dues))]


def test_a_user_that_is_always_free_takes_every_request_alone() -> None:
    arrivals = Arrivals(ArrivalSchedule(2000))
    taken = swarm(arrivals, users=5, slots=100, request_s=0)
    consecutive(arrivals, taken)
    # the first to come takes them; another only when the dispatcher woke so late that
    # requests fell due while the first was busy (never on an idle machine): the users
    # that took any are always the first ones
    used = {user for user, _ in taken}
    assert used == set(range(len(used))) and len(arrivals.opened) == len(used)


def test_busy_users_bring_in_more_up_to_the_cap_and_late_requests_are_still_sent() -> None:
    # requests due every 1 ms, each lasting 10 ms, 3 users: every user is needed, and
    # the schedule falls behind; every due request is still handed out, in order
    arrivals = Arrivals(ArrivalSchedule(1000))
    taken = swarm(arrivals, users=3, slots=60, request_s=0.01)
    consecutive(arrivals, taken)
    assert len(arrivals.opened) == 3
    assert {user for user, _ in taken} == {0, 1, 2}


def test_processes_take_their_own_slots() -> None:
    arrivals = Arrivals(ArrivalSchedule(2000, processes=3, index=1))
    taken = swarm(arrivals, users=2, slots=30, request_s=0)
    slots = sorted(arrivals.schedule.first(due) for _, due in taken)
    assert all(slot % 3 == 1 for slot in slots)
    assert slots == list(range(slots[0], slots[0] + 3 * len(slots), 3))
