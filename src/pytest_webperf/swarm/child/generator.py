"""One generator process, whoever runs it (the local swarm in ``child.py``, each worker
of the distributed one in ``master.py``): its placement and open-files limit, its user
classes and the recorder their requests land in, its CPU time, and how its users stop.

Imported by both; it imports neither (before it, ``master.py`` took these from
``child.py``, which starts the master: a cycle).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.swarm.recorder import Interval, Recorder
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.userspec import is_custom

Emit = Callable[..., None]
Process = dict[str, Any]  # {"pid", "role", "cpus", "cpu_s"}


@dataclass
class Roll:
    """One hand-over of every process's interval."""

    interval: Interval
    processes: list[Process]  # cumulative CPU seconds per process
    at: float  # monotonic time of the hand-over (the master's clock with workers)
    final: bool = False  # the measured phase's last: the users stopped sending first


def raise_open_files(users: int, emit: Emit) -> None:
    """Open-files soft limit up to the hard limit; say when it caps the concurrency."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = users + 100  # one socket per user, plus the interpreter's own
    if hard != resource.RLIM_INFINITY and needed > hard:
        emit(
            "note",
            message=(
                f"open-files limit {hard} caps this generator process below {users} users "
                f"(needs ~{needed}); raise the hard limit (ulimit -Hn) "
                "or use more --webperf-workers"
            ),
        )


def place(cpus: Sequence[int]) -> list[int]:
    """Pin this process to ``cpus`` (if any); the CPUs it may run on."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    return sorted(os.sched_getaffinity(0))


def worker_cpus(spec: SwarmSpec, index: int) -> tuple[int, ...]:
    """Worker ``index``'s share of ``spec.cpus``: one CPU each, round robin."""
    return (spec.cpus[index % len(spec.cpus)],) if spec.cpus else ()


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def quick_stop(runner: Any) -> bool:
    """Whether every user class stops cleanly when marked stopping (``webperf_quick_stop``).

    Others (the MQTT user: it stops on Locust's ``test_stopping`` and then waits
    for acknowledgements) are left to Locust's own stop."""
    classes = runner.environment.user_classes
    return bool(classes) and all(getattr(c, "webperf_quick_stop", False) for c in classes)


def stop_sending(runner: Any) -> None:
    """Mark every running user stopping (user classes that stop quickly): a closed loop
    ends after its current request (and any other user at its next ``wait()``); a user
    class that sends from elsewhere (a native loop's thread) is told by its
    ``webperf_stop_sending``, whether or not it stops quickly (the stream users drain
    and close at Locust's stop). Synchronous: nothing new is sent after."""
    from locust.user.task import LOCUST_STATE_RUNNING, LOCUST_STATE_STOPPING

    if quick_stop(runner):
        for user_greenlet in list(runner.user_greenlets):
            user = user_greenlet.args[0] if user_greenlet.args else None
            if user is not None and user._state == LOCUST_STATE_RUNNING:
                user._state = LOCUST_STATE_STOPPING
    for cls in runner.environment.user_classes:
        hook = getattr(cls, "webperf_stop_sending", None)
        if hook is not None:
            hook()


def waits_for_open(runner: Any) -> bool:
    """Whether a user class opens long-lived connections that must all be open before
    the warm-up (``webperf_ready``: the stream users)."""
    return any(hasattr(cls, "webperf_ready") for cls in runner.environment.user_classes)


def users_ready(runner: Any) -> bool:
    """Whether every user of this process has tried to open its connection."""
    users = int(runner.user_count)
    return all(
        cls.webperf_ready(users)
        for cls in runner.environment.user_classes
        if hasattr(cls, "webperf_ready")
    )


def await_ready(runner: Any, timeout_s: float) -> bool:
    """Until every user of this process has tried to open its connection, at most
    ``timeout_s``; whether they all did."""
    import gevent

    deadline = time.monotonic() + timeout_s
    while not users_ready(runner):
        if time.monotonic() > deadline:
            return False
        gevent.sleep(0.02)
    return True


def go(runner: Any) -> None:
    """Every connection of the run is open (or tried): the publishers start."""
    for cls in runner.environment.user_classes:
        hook = getattr(cls, "webperf_go", None)
        if hook is not None:
            hook()


def halt(runner: Any) -> None:
    """Stop every user at once, before Locust's own stop.

    Locust stops users one kill callback at a time, and gevent runs only a few
    milliseconds of callbacks per loop turn while the other users keep the turn
    busy with I/O: minutes at 10,000 users. Marking them all stopping first lets
    the loops end by themselves; what is left is killed together.
    """
    if not quick_stop(runner):
        return
    stop_sending(runner)
    group = runner.user_greenlets
    group.join(timeout=1.0)
    group.kill(block=True, timeout=10)


def tickets_of(environment: Any) -> Any:
    """The fixed request count of this process's user class (``webperf_tickets``: an
    object with ``open(n)`` and ``finished``), or None."""
    for cls in environment.user_classes:
        tickets = getattr(cls, "webperf_tickets", None)
        if tickets is not None:
            return tickets()
    return None


def users_of(spec: SwarmSpec, index: int) -> int:
    """About how many users worker ``index`` gets (Locust distributes them evenly)."""
    share, extra = divmod(spec.users, spec.processes)
    return share + (1 if index < extra else 0)


def load_user_class(spec: SwarmSpec, index: int = 0) -> type[Any]:
    """The spec's built-in user class, built here (a remote worker knows nothing else);
    ``index``: this generator process's worker index (MQTT client ids)."""
    if spec.user_class == "fast":
        from pytest_webperf.swarm.child import fast

        return fast.make_user(spec)
    if spec.user_class == "mqtt":
        from pytest_webperf.swarm.child import paho

        return paho.make_user(spec, index)
    if spec.user_class == "mqtt-native":
        from pytest_webperf.swarm.child import native_mqtt

        return native_mqtt.make_user(spec, index)
    if spec.user_class == "lean" and spec.workload.http2:
        from pytest_webperf.swarm.child.http2 import user as http2

        return http2.make_user(spec, index)
    if spec.user_class == "lean":
        from pytest_webperf.swarm.child import lean

        return lean.make_user(spec, index)
    if spec.user_class == "native":
        from pytest_webperf.swarm.child import native_http

        return native_http.make_user(spec, index)
    if spec.user_class == "websocket":
        from pytest_webperf.swarm.child import websocket

        return websocket.make_user(spec, index)
    if spec.user_class == "sse":
        from pytest_webperf.swarm.child import sse

        return sse.make_user(spec, index)
    return load_user_classes(spec, index)[0]


def load_user_classes(spec: SwarmSpec, index: int = 0) -> list[type[Any]]:
    """The spec's user classes: the built-in one, or the user's own (``module:Class``,
    ``file:/path.py[:A,B]``: ``swarm/child/locustfile.py``)."""
    if not is_custom(spec.user_class):
        return [load_user_class(spec, index)]
    from pytest_webperf.swarm.child import locustfile

    try:
        return locustfile.load(spec.user_class)
    except locustfile.LoadFailed as exc:
        raise RuntimeError(str(exc)) from None


def environment_for(
    spec: SwarmSpec, index: int = 0, emit: Emit | None = None
) -> tuple[Any, Recorder]:
    """A Locust environment whose requests land in a fresh recorder."""
    from locust.env import Environment

    environment = Environment(user_classes=[], host=spec.host)
    return environment, equip(environment, spec, index, emit)


def equip(environment: Any, spec: SwarmSpec, index: int = 0, emit: Emit | None = None) -> Recorder:
    """Give ``environment`` the spec's user classes and a fresh recorder their requests
    land in: users that record themselves feed Locust's stats from it, the others'
    Locust ``request`` events land in it (one channel per request name), and the
    user's own classes' task exceptions too."""
    from pytest_webperf.swarm.child import locust_stats

    classes = load_user_classes(spec, index)
    environment.user_classes = classes
    environment.host = spec.host
    recorder = Recorder()
    environment.webperf_recorder = recorder  # users record here
    if any(getattr(cls, "webperf_records_itself", False) for cls in classes):
        locust_stats.attach(environment, recorder)  # Locust's stats from our intervals
    if not all(getattr(cls, "webperf_records_itself", False) for cls in classes):
        environment.events.request.add_listener(recorder.on_request)
    if is_custom(spec.user_class):
        from pytest_webperf.swarm.child import locustfile

        note = emit or (lambda *a, **k: None)
        locustfile.equip_users(classes, recorder, spec.host, lambda m: note("note", message=m))
        environment.events.user_error.add_listener(recorder.on_user_error)
    return recorder
