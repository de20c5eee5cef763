"""The arrival-rate dispatcher of one generator process (gevent; no Locust import).

k6's constant arrival rate: requests fall due at the times of an ``ArrivalSchedule``
whatever the responses do, and each is sent by an idle user; the users are the cap.
One greenlet, the dispatcher, sleeps until the next due time and hands that request
to the idle user that joined first; the other idle users wait parked and claim
nothing, so a user opens its connection only when every user before it was busy:
the users a run ever opened are the connections the server's pace needed. A user
that finishes while a request is overdue (every user was busy when it fell due)
takes it at once: a due request is sent late, never dropped.
"""

from __future__ import annotations

import heapq
import os
import socket
import time
from collections.abc import Callable

import gevent
from gevent.event import AsyncResult

from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.recorder import Channel

POLL_S = 0.1  # how often parked users are checked for being stopped


class Arrivals:
    """Due requests handed to idle users, one process's share of the schedule."""

    def __init__(
        self, schedule: ArrivalSchedule, clock: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self.schedule = schedule
        self.clock = clock
        # this process, also among remote workers' (containers often share pids)
        self.process = f"{socket.gethostname()}:{os.getpid()}"
        self.slot: int | None = None  # the next slot nobody took yet
        self._numbers: dict[int, int] = {}  # id(user) -> its number, in the order they came
        self.in_use: set[int] = set()  # users given a request, not yet back for another
        self.opened: set[int] = set()  # users that ever took one: opened a connection
        self.channel: Channel | None = None  # where the users in use are noted
        self._idle: list[int] = []  # parked users' numbers (a heap: the first joined first)
        # number -> (its wake-up, whether it is stopping)
        self._parked: dict[int, tuple[AsyncResult, Callable[[], bool]]] = {}
        self._dispatcher: gevent.Greenlet | None = None

    def take(self, user: object, stopped: Callable[[], bool], channel: Channel) -> int | None:
        """Block until ``user`` is to send a request (its last one, if any, is done): its
        due time (ns); None once ``stopped()``. The users in use and ever opened are noted
        in ``channel`` at each hand-out."""
        number = self._numbers.setdefault(id(user), len(self._numbers) + 1)
        self.in_use.discard(number)
        if stopped():
            return None
        self.channel = channel
        now = self.clock()
        if self.slot is None:
            self.slot = self.schedule.first(now)
        if self.schedule.due(self.slot) <= now:  # overdue: every user was busy
            return self._assign(number)
        result: AsyncResult = AsyncResult()
        self._parked[number] = (result, stopped)
        heapq.heappush(self._idle, number)
        if self._dispatcher is None:
            self._dispatcher = gevent.spawn(self._dispatch)
        due: int | None = result.get()
        return due

    def _assign(self, number: int) -> int:
        assert self.slot is not None
        slot, self.slot = self.slot, self.schedule.next(self.slot)
        self.in_use.add(number)
        self.opened.add(number)
        if self.channel is not None:
            self.channel.current.note_users(self.process, len(self.in_use), len(self.opened))
        return self.schedule.due(slot)

    def _dispatch(self) -> None:
        """While users are parked: at each due time, the first-joined of them sends."""
        try:
            while self._parked:
                assert self.slot is not None
                wait = self.schedule.due(self.slot) - self.clock()
                if wait > 0:
                    gevent.sleep(min(wait / 1e9, POLL_S))
                    self._release_stopped()
                    continue
                number = heapq.heappop(self._idle)
                result, stopping = self._parked.pop(number)
                result.set(None if stopping() else self._assign(number))  # none after the end
        finally:
            self._dispatcher = None

    def _release_stopped(self) -> None:
        stopped = [number for number, (_, stopping) in self._parked.items() if stopping()]
        for number in stopped:
            result, _ = self._parked.pop(number)
            result.set(None)
        if stopped:
            self._idle = list(self._parked)
            heapq.heapify(self._idle)


_ARRIVALS: dict[tuple[float, int, int], Arrivals] = {}


def arrivals_for(rate: float, processes: int, index: int) -> Arrivals:
    """This process's dispatcher for ``rate`` requests/s over ``processes`` generator
    processes, this one being ``index`` (local and remote workers alike)."""
    key = (rate, processes, index)
    found = _ARRIVALS.get(key)
    if found is None:
        found = _ARRIVALS[key] = Arrivals(ArrivalSchedule(rate, processes, index))
    return found
