"""The arithmetic of paced and counted requests (no gevent, no Locust: unit-testable).

A paced user intends its k-th request at ``start + k * period`` and sends it then, or
as soon as its connection is free when the previous response came late (a late
schedule is never skipped). Latency counts from the intended start (what a user
arriving on schedule would have waited: coordinated omission corrected, as wrk2 does);
the service time from the actual send; the lag is how late the send was.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Timing:
    latency_us: int  # intended start -> response
    service_us: int  # send -> response
    lag_us: int  # how late it was sent (>= 0)


def timing(intended_ns: int, sent_ns: int, done_ns: int) -> Timing:
    """One paced request's times, from when it was due, when it was sent and when its
    response was complete (one clock, ns)."""
    if not sent_ns <= done_ns:
        raise ValueError(f"a response before its request ({sent_ns} > {done_ns})")
    return Timing(
        latency_us=(done_ns - min(intended_ns, sent_ns)) // 1000,
        service_us=(done_ns - sent_ns) // 1000,
        lag_us=max(0, sent_ns - intended_ns) // 1000,
    )


def kept(requests: int, seconds: float, users: int, period_s: float) -> float:
    """The share of the offered rate (``users`` requests per ``period_s``) that ``requests``
    over ``seconds`` achieved."""
    if seconds <= 0 or period_s <= 0 or users < 1:
        return 0.0
    return requests / seconds / (users / period_s)


def first_due(now_ns: int, period_ns: int, fraction: float) -> int:
    """A user's first intended start: spread over one period (``fraction`` in [0, 1)),
    so that N users pace at N per period, not in bursts of N."""
    if period_ns <= 0:
        raise ValueError(f"a pacing period is > 0, not {period_ns} ns")
    if not 0 <= fraction < 1:
        raise ValueError(f"fraction {fraction} outside [0, 1)")
    return now_ns + int(fraction * period_ns)


class Tickets:
    """A fixed request count shared by this process's users (``requests=N``): closed
    until the measured phase opens it, then one ticket per request; finished when every
    ticket's request has completed."""

    def __init__(self) -> None:
        self.remaining: int | None = None  # None: not open yet
        self.outstanding = 0  # taken, not yet completed

    def open(self, count: int) -> None:
        self.remaining = count

    def take(self) -> bool | None:
        """True: send one; False: none left; None: not open yet (wait)."""
        if self.remaining is None:
            return None
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        self.outstanding += 1
        return True

    def completed(self) -> None:
        self.outstanding -= 1

    @property
    def finished(self) -> bool:
        return self.remaining == 0 and self.outstanding == 0


class ArrivalSchedule:
    """When requests are due at a total arrival rate (k6's constant arrival rate), shared
    by ``processes`` generator processes, this one being ``index``.

    Slot ``s`` (a global request number) is due at ``floor(s * 1e9 / rate)`` ns on the
    machine's monotonic clock, whoever starts when: process ``index`` takes the slots
    ``s = index (mod processes)``, so the processes' requests interleave instead of
    bursting together, and together they send exactly ``rate`` per second. The rate is
    held as a fraction, so due times are exact integers (no drift over a long run)."""

    def __init__(self, rate: float, processes: int = 1, index: int = 0) -> None:
        if not rate > 0:
            raise ValueError(f"an arrival rate is > 0 requests per second, not {rate}")
        if processes < 1 or not 0 <= index < processes:
            raise ValueError(f"process {index} of {processes}")
        fraction = Fraction(rate).limit_denominator(1_000_000)
        self.rate = rate
        self.processes = processes
        self.index = index
        self._per_ns = (fraction.numerator, fraction.denominator * 1_000_000_000)

    @property
    def per_ns(self) -> tuple[int, int]:
        """(numerator, ns): ``numerator`` slots fall due every ``ns`` nanoseconds."""
        return self._per_ns

    def due(self, slot: int) -> int:
        """When slot ``slot`` is due (ns)."""
        per_ns, ns = self._per_ns
        return slot * ns // per_ns

    def first(self, now_ns: int) -> int:
        """This process's first slot due at or after ``now_ns``."""
        per_ns, ns = self._per_ns
        slot = -(-now_ns * per_ns // ns)  # the first global slot due at or after now
        return slot + (self.index - slot) % self.processes

    def next(self, slot: int) -> int:
        """This process's slot after ``slot``."""
        return slot + self.processes
