"""The swarm child: ``python -m pytest_webperf.swarm --events-fd N < spec.json``.

Runs Locust in this process only (``import locust`` monkey-patches it with
gevent), spawns the users, lets them warm up, then writes one JSON line per
interval to the events pipe: ``spawned``, ``note``, ``measure-start``,
``interval`` (phase warmup|measure), ``done`` and, once Locust has stopped,
``locust`` (its own request totals, all phases). Every run stops by itself:
the child also arms an alarm past which it exits.

With ``spec.workers > 1`` or remote workers the child is a Locust master
(``swarm/master.py``) and starts the local workers itself (``--worker INDEX
--master-port PORT``, same spec on stdin), so they are in its process group and
die with it; remote ones (``--remote HOST:PORT``) join it and get the spec from
it. Locust's master/worker stats keep only rounded milliseconds, so the
per-second microsecond histograms travel apart: at every tick the master sends
``webperf_roll`` to all workers, each rolls its own recorder and answers
``webperf_interval`` with its interval and CPU time, and the master emits the
exact sum (histograms add). At the last tick the users
stop sending before the roll, so what was recorded is what the server answered
less at most one request in flight per user.

Each process reports itself (pid, role, CPU placement) in ``spawned``, and its
cumulative CPU seconds in ``measure-start``, every ``interval`` and ``done``
(``processes``), so the parent knows what each generator process cost.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from pytest_webperf.swarm.recorder import Interval, Recorder
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.userspec import is_custom, label, user_failure

Emit = Callable[..., None]
Process = dict[str, Any]  # {"pid", "role", "cpus", "cpu_s"}


@dataclass
class Roll:
    """One hand-over of every process's interval."""

    interval: Interval
    processes: list[Process]  # cumulative CPU seconds per process
    at: float  # monotonic time of the hand-over (the master's clock with workers)
    final: bool = False  # the measured phase's last: the users stopped sending first


COUNT_POLL_S = 0.005  # how often a fixed-count phase checks whether its requests are done


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
    """Mark every running user stopping: a closed loop ends after its current request
    (and any other user at its next ``wait()``); a user class that sends from elsewhere
    (the native loop's thread) is told by its ``webperf_stop_sending``. Synchronous:
    nothing new is sent after."""
    from locust.user.task import LOCUST_STATE_RUNNING, LOCUST_STATE_STOPPING

    if not quick_stop(runner):
        return
    for user_greenlet in list(runner.user_greenlets):
        user = user_greenlet.args[0] if user_greenlet.args else None
        if user is not None and user._state == LOCUST_STATE_RUNNING:
            user._state = LOCUST_STATE_STOPPING
    for cls in runner.environment.user_classes:
        hook = getattr(cls, "webperf_stop_sending", None)
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
        from pytest_webperf.swarm import fast

        return fast.make_user(spec)
    if spec.user_class == "mqtt":
        from pytest_webperf.swarm import mqtt

        return mqtt.make_user(spec, index)
    if spec.user_class == "lean":
        from pytest_webperf.swarm import lean

        return lean.make_user(spec, index)
    if spec.user_class == "native":
        from pytest_webperf.swarm import native

        return native.make_user(spec, index)
    return load_user_classes(spec, index)[0]


def load_user_classes(spec: SwarmSpec, index: int = 0) -> list[type[Any]]:
    """The spec's user classes: the built-in one, or the user's own (``module:Class``,
    ``file:/path.py[:A,B]``: ``swarm/locustfile.py``)."""
    if not is_custom(spec.user_class):
        return [load_user_class(spec, index)]
    from pytest_webperf.swarm import locustfile

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
    from pytest_webperf.swarm import locust_stats

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
        from pytest_webperf.swarm import locustfile

        note = emit or (lambda *a, **k: None)
        locustfile.equip_users(classes, recorder, spec.host, lambda m: note("note", message=m))
        environment.events.user_error.add_listener(recorder.on_user_error)
    return recorder


class LocalSwarm:
    """All users in this process (``spec.workers <= 1``)."""

    def __init__(self, spec: SwarmSpec, emit: Emit) -> None:
        self.spec = spec
        self.cpus = place(spec.cpus)
        raise_open_files(spec.users, emit)
        self.environment, self.recorder = environment_for(spec, emit=emit)
        self.runner = self.environment.create_local_runner()

    def start(self) -> list[Process]:
        runner = self.runner
        runner.start(self.spec.users, spawn_rate=self.spec.effective_spawn_rate)
        spawning = runner.spawning_greenlet
        if spawning is not None:
            spawning.join(timeout=self.spec.deadline_s)
            if spawning.ready() and spawning.exception is not None:  # a user did not start
                what = f"starting a user of {self.spec.user_class!r}"
                raise RuntimeError(user_failure(what, spawning.exception))
        return [{"pid": os.getpid(), "role": "local", "cpus": self.cpus}]

    @property
    def user_count(self) -> int:
        return int(self.runner.user_count)

    def roll(self, final: bool = False) -> Roll:
        """This interval; ``final``: the last one, users stop sending first."""
        if final:
            stop_sending(self.runner)
        at = time.monotonic()
        interval = self.recorder.roll()
        processes = [{"pid": os.getpid(), "role": "local", "cpu_s": cpu_seconds()}]
        return Roll(interval, processes, at, final)

    def rolled_requests(self) -> int:
        return self.recorder.rolled_requests

    def quit(self) -> None:
        halt(self.runner)
        self.runner.quit()


def run(spec: SwarmSpec, emit: Emit) -> None:
    import gevent

    from pytest_webperf.swarm.master import MasterSwarm

    swarm: LocalSwarm | MasterSwarm = (
        MasterSwarm(spec, emit) if spec.distributed else LocalSwarm(spec, emit)
    )
    started = time.monotonic()
    try:
        processes = swarm.start()
        emit(
            "spawned",
            users=swarm.user_count,
            seconds=time.monotonic() - started,
            processes=processes,
        )

        def tick_for(
            seconds: float, phase: str, last: Roll, done: Callable[[], bool] | None = None
        ) -> Roll:
            """Emit an interval per tick; the last roll. An interval's ``elapsed`` is the
            time between the hand-overs that bound it, so rates are exact. ``done``: the
            phase ends early once it says so (a fixed request count completed)."""
            tick_start = time.monotonic()
            end = tick_start + seconds
            while True:
                now = time.monotonic()
                if now >= end and (last.final or phase != "measure"):
                    return last  # the measure ends with a final roll, even after a slow one
                step = max(min(spec.interval_s - (now - tick_start), end - now), 0.0)
                gevent.sleep(step if done is None else min(step, COUNT_POLL_S))
                now = time.monotonic()
                if done is not None and done():
                    end = now  # this is the last interval
                if now - tick_start >= spec.interval_s - 1e-3 or now >= end:
                    roll = swarm.roll(final=phase == "measure" and now >= end)
                    emit(
                        "interval",
                        phase=phase,
                        elapsed=roll.at - last.at,
                        users=swarm.user_count,
                        processes=roll.processes,
                        **roll.interval.to_dict(),
                    )
                    last, tick_start = roll, now

        first = swarm.roll()  # whatever completed before now is not counted
        if spec.warmup_s > 0:
            first = tick_for(spec.warmup_s, "warmup", first)  # its last roll starts the measure
        emit("measure-start", processes=first.processes)
        done = None
        tickets = tickets_of(swarm.environment)
        if spec.workload.requests and tickets is not None:
            tickets.open(spec.workload.requests)  # ab's -n: exactly this many, from now
            done = lambda: tickets.finished  # noqa: E731
        last = tick_for(spec.duration_s, "measure", first, done)
        if is_custom(spec.user_class) and isinstance(swarm, LocalSwarm):
            names = ", ".join(sorted(f"{m} {n}".strip() for m, n in swarm.recorder.channels))
            emit("note", message=f"{label(spec.user_class)}: requests named {names or '(none)'}")
        emit(
            "done",
            duration_s=last.at - first.at,
            users=swarm.user_count,
            processes=last.processes,
            rolled_requests=swarm.rolled_requests(),
        )
    finally:
        swarm.quit()
    # Locust's own totals, all phases, once the workers' last reports are in
    locust_total = swarm.environment.stats.total
    emit("locust", requests=locust_total.num_requests, failures=locust_total.num_failures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webperf.swarm")
    parser.add_argument("--events-fd", type=int)
    parser.add_argument("--worker", type=int, metavar="INDEX")
    parser.add_argument("--master-port", type=int)
    parser.add_argument("--master-host", default="127.0.0.1")
    parser.add_argument("--remote", metavar="HOST:PORT", help="join this master (no spec given)")
    parser.add_argument("--farewell", metavar="HOST:PORT", help="tell remote workers it is over")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--wait", type=float, default=10.0)
    parser.add_argument("--inspect", metavar="USER_CLASS", help="check a user's own classes")
    args = parser.parse_args(argv)
    if args.inspect is not None:
        from pytest_webperf.swarm.locustfile import inspect_main

        signal.alarm(300)
        print(json.dumps(inspect_main(args.inspect)), flush=True)
        return 0
    if args.farewell is not None:
        from pytest_webperf.swarm.master import farewell

        signal.alarm(int(args.wait) + 10)
        print(f"{farewell(args.farewell, args.count, args.wait)} remote worker(s) told", flush=True)
        return 0
    if args.remote is not None:
        from pytest_webperf.swarm.master import run_remote
        from pytest_webperf.swarm.spec import split_address

        return run_remote(*split_address(args.remote))
    spec = SwarmSpec.from_dict(json.loads(sys.stdin.read()))
    signal.alarm(int(spec.deadline_s) + 1)  # bounded no matter what happens below
    if args.worker is not None:
        if args.master_port is None:
            parser.error("--worker needs --master-port")
        from pytest_webperf.swarm.master import run_worker

        run_worker(spec, args.worker, args.master_host, args.master_port)
        return 0
    if args.events_fd is None:
        parser.error("--events-fd is required")
    events: IO[str] = os.fdopen(args.events_fd, "w", buffering=1)

    def emit(kind: str, **data: Any) -> None:
        events.write(json.dumps({"type": kind, **data}) + "\n")

    try:
        run(spec, emit)
    except RuntimeError as exc:  # a one-line reason the parent reports as it is
        emit("error", message=str(exc))
        events.close()
        return 1
    except Exception as exc:  # a crash: said once, in one line, as the test's failure
        traceback.print_exc()  # the whole of it stays in the child's log
        emit("error", message=user_failure("the load generator", exc, anywhere=True))
        events.close()
        return 1
    events.close()
    return 0
