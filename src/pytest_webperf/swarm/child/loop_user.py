"""The base of the users that are connections of a C loop (swarm only): the native MQTT
user (``native_mqtt.py``) and the stream user (``stream.py``).

Locust spawns, counts, stops and distributes the users; each user is one connection
of its process's loop. The first user a process starts attaches the loop to the
process once: the loop's figures join the recorder at every roll (``channel``), and
its ledger hands the report over when Locust stops (on a worker, to the master).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from locust import User, constant

from pytest_webperf.swarm.child.locust_stats import recorder_for


class Loop(Protocol):
    def take(self) -> list[Any]: ...


class Ledger(Protocol):
    def on_stopping(self, **kwargs: Any) -> None: ...


class LoopUser(User):
    """One connection of the process's C loop; subclasses set ``loop``, ``ledger`` and
    ``channel`` (the recorder's channel: protocol and name)."""

    abstract = True
    webperf_records_itself: ClassVar[bool] = True
    wait_time = constant(0)
    loop: ClassVar[Loop]
    ledger: ClassVar[Ledger]
    channel: ClassVar[tuple[str, str]]
    attached: ClassVar[bool] = False

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        cls = type(self)
        if not cls.attached:  # the loop's figures join the recorder at every roll
            loop = cls.loop  # one session's engine: one part per take
            recorder_for(environment).channel(*cls.channel).sources.append(lambda: loop.take()[0])
            environment.webperf_ledger = cls.ledger  # a worker hands its report to the master
            environment.events.test_stopping.add_listener(cls.ledger.on_stopping)
            cls.attached = True
