"""A long-lived connection of the native stream loop as a Locust user, and the ledger of
its generator process (swarm processes only; ``websocket.py`` and ``sse.py`` make the
users of each protocol).

As the native HTTP and MQTT users: Locust spawns, counts, stops and distributes the
users; each user *is* one connection of its process's ``engine.NativeEngine``, added
when Locust starts it. Before the warm-up the swarm waits until every connection of the
run has tried to open (``webperf_ready``), then lets the publishers go (``webperf_go``:
a fan-out's subscribers are all listening before the first message). At the final roll
the loop stops sending (``webperf_stop_sending``); at Locust's ``test_stopping`` it
drains what is still owed (until nothing is, or nothing arrived for ``quiet_s``, at most
``drain_s``), closes every connection and writes the ledger (or hands it to the master,
which merges them: ``longlived/accounting.py``).
"""

from __future__ import annotations

import atexit
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import gevent
from gevent.event import Event
from locust import User, task

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.longlived.load import StreamLoad
from pytest_webperf.swarm.child.loop_user import LoopUser
from pytest_webperf.swarm.engine import Failure, NativeEngine, histogram_from
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.streamloop import ECHO, IDLE, PUBLISHER, STREAM, SUBSCRIBER

POLL_S = 0.05


def resident_kib() -> int:
    """This process's resident memory now (VmRSS: ``ru_maxrss`` keeps the peak of the
    process that exec'd us, FINDINGS)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def roles(load: StreamLoad, index: int, processes: int, first_id: int) -> Iterator[tuple[int, int]]:
    """The (role, id) of each user of generator process ``index`` in turn: a fan-out's
    first users publish (this process's share), the others subscribe; otherwise every
    user echoes, idles or reads its stream. Ids are the process's own (disjoint)."""
    publishers = load.publishers_of(index, processes)
    number = first_id
    while True:
        if load.mode == "fanout":
            role = PUBLISHER if number - first_id < publishers else SUBSCRIBER
        else:
            role = {"echo": ECHO, "idle": IDLE, "sse": STREAM}[load.mode]
        yield role, number
        number += 1


class StreamLedger:
    """This process's part of the run's accounting, written (or handed to the master)
    once the loop has drained and closed."""

    def __init__(self, load: StreamLoad, loop: NativeEngine, *, to_file: bool, local: bool) -> None:
        self.load = load
        self.loop = loop
        self.to_file = to_file  # else a worker's: the master merges and writes them
        self.local = local  # every publisher and subscriber is in this process
        self.rss_before_kib = resident_kib()
        self.rss_open_kib = 0
        self.open_at_end = -1
        self.connections = 0
        self.report: dict[str, Any] | None = None

    def mark_end(self) -> None:
        """The measured phase ends: what is open, what the process holds with it."""
        if self.open_at_end < 0:
            state = self.loop.state()
            self.open_at_end = state["open"]
            self.connections = state["added"]
            self.rss_open_kib = resident_kib()

    def owed(self) -> int | None:
        """Messages still expected here, when this process can know (None: a fan-out
        across processes, whose subscribers also hear other processes' publishers)."""
        state: dict[str, int] = self.loop.state()
        owed = state.get("echo_sent", 0) - state.get("echo_distinct", 0)
        if self.load.mode == "fanout":
            if not self.local:
                return None
            owed += state["subs"] * state["pub_sent"] - state["sub_distinct"]
        return owed

    def drain(self) -> float:
        """Wait until nothing is owed, or nothing arrived for ``quiet_s``, at most
        ``drain_s``: the time waited."""
        start = time.monotonic()
        while time.monotonic() - start < self.load.drain_s:
            owed = self.owed()
            if owed is not None and owed <= 0:
                break
            last = self.loop.state()["last_receipt_ns"] / 1e9
            if time.monotonic() - max(last, start) >= self.load.quiet_s:
                break
            gevent.sleep(POLL_S)
        return time.monotonic() - start

    def failures(self, fails: list[Failure]) -> dict[str, int]:
        """The whole run's failures by kind, as the intervals name them (the opening's,
        before the warm-up, are only here)."""
        named: dict[str, int] = {}
        for row in fails:
            name, _ = self.loop.session.name(row, self.loop.timeout_s)
            named[name] = named.get(name, 0) + int(row[2])
        return named

    def on_stopping(self, **_: Any) -> None:
        if self.report is not None:
            return
        self.loop.stop_sending()
        self.mark_end()
        waited = self.drain()
        # the closes take seconds at 10,000 connections: the hub goes on meanwhile
        # (a worker's heartbeats to the master)
        ledger = gevent.get_hub().threadpool.apply(self.loop.finish)
        self.report = {
            **{k: v for k, v in ledger.items() if not isinstance(v, tuple | list)},
            "processes": 1,
            "connections": self.connections,
            "upgrade": histogram_from(ledger["upgrade"]).to_dict(),
            "ttfe": histogram_from(ledger.get("ttfe", (0, 0, 0, 0, []))).to_dict(),
            "echo": list(ledger.get("echo", [0] * 5)),
            "sse": list(ledger.get("sse", [0] * 5)),
            "published": [list(p) for p in ledger.get("published", ())],
            "subscribers": [list(s) for s in ledger.get("subscribers", ())],
            "rates": list(ledger.get("rates", ())),
            "failures": self.failures(ledger["fails"]),
            "rolls": [[list(roll) for roll in self.loop.rolls]],
            "open_at_end": max(0, self.open_at_end),
            "rss_before_kib": self.rss_before_kib,
            "rss_open_kib": self.rss_open_kib,
            "drain_s": waited,
        }
        if self.to_file and self.load.report_path:
            write_text_atomic(Path(self.load.report_path), json.dumps(self.report))


class NativeStreamUser(LoopUser):
    """One connection of the process's native stream loop (the swarm's own user class)."""

    abstract = True
    loop: ClassVar[NativeEngine]
    ledger: ClassVar[StreamLedger]
    roles: ClassVar[Iterator[tuple[int, int]]]

    @classmethod
    def webperf_ready(cls, users: int) -> bool:
        """Whether each of this process's ``users`` connections has tried to open."""
        state: dict[str, int] = cls.loop.state()
        return state["added"] >= users and state["tried"] >= state["added"]

    @classmethod
    def webperf_go(cls) -> None:
        cls.loop.go()

    @classmethod
    def webperf_stop_sending(cls) -> None:
        """The final roll: no message is sent after this (answers still arrive)."""
        cls.loop.stop_sending()
        cls.ledger.mark_end()

    @task
    def hold(self) -> None:
        role, ident = next(self.roles)
        handle = self.loop.add(ident=ident, role=role)
        try:
            Event().wait()  # until Locust stops this user
        finally:  # the connection goes with the user (after the end: a no-op)
            self.loop.remove(handle)


def make_user(
    spec: SwarmSpec, index: int, loop: NativeEngine, channel: tuple[str, str]
) -> type[User]:
    """The swarm's stream user over ``loop``, for generator process ``index``."""
    assert spec.stream is not None
    load = spec.stream
    atexit.register(loop.finish)

    class WebperfStreamUser(NativeStreamUser):
        pass

    WebperfStreamUser.host = spec.host
    WebperfStreamUser.loop = loop
    WebperfStreamUser.ledger = StreamLedger(
        load, loop, to_file=not spec.distributed, local=spec.processes == 1
    )
    WebperfStreamUser.roles = roles(load, index, spec.processes, spec.client_ids(index).start)
    WebperfStreamUser.channel = channel
    return WebperfStreamUser
