"""The swarm child: ``python -m pytest_webperf.swarm --events-fd N < spec.json``.

Runs Locust in this process only (``import locust`` monkey-patches it with
gevent), spawns the users, lets them warm up, then writes one JSON line per
interval to the events pipe: ``spawned``, ``note``, ``measure-start``,
``interval`` (phase warmup|measure), ``done`` and, once Locust has stopped,
``locust`` (its own request totals, all phases). Every run stops by itself:
the child also arms an alarm past which it exits.

With ``spec.workers > 1`` or remote workers the child is a Locust master
(``swarm/child/master.py``) and starts the local workers itself (``--worker INDEX
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
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from pytest_webperf.swarm.child.generator import (
    Emit,
    Process,
    Roll,
    await_ready,
    cpu_seconds,
    environment_for,
    go,
    halt,
    place,
    raise_open_files,
    stop_sending,
    tickets_of,
    waits_for_open,
)
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.stamp import stamp
from pytest_webperf.swarm.userspec import is_custom, label, user_failure

COUNT_POLL_S = 0.005  # how often a fixed-count phase checks whether its requests are done


class LocalSwarm:
    """All users in this process (``spec.workers <= 1``)."""

    def __init__(self, spec: SwarmSpec, emit: Emit) -> None:
        self.spec = spec
        self.emit = emit
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
        if waits_for_open(runner):  # long-lived connections: all open before the warm-up
            if not await_ready(runner, self.spec.opening_s):
                self.emit(
                    "note",
                    message=(
                        f"not every connection had tried to open after {self.spec.opening_s:.0f}"
                        " s: the warm-up starts anyway"
                    ),
                )
            go(runner)
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

    from pytest_webperf.swarm.child.master import MasterSwarm

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
        emit("measure-start", processes=first.processes, **stamped(spec))
        done = None
        tickets = tickets_of(swarm.environment)
        if spec.workload.requests and tickets is not None:
            tickets.open(spec.workload.requests)  # ab's -n: exactly this many, from now
            done = lambda: tickets.finished  # noqa: E731
        last = tick_for(spec.duration_s, "measure", first, done)
        bound = stamped(spec)  # the server's CPU at the final roll, before anything else
        if is_custom(spec.user_class) and isinstance(swarm, LocalSwarm):
            names = ", ".join(sorted(f"{m} {n}".strip() for m, n in swarm.recorder.channels))
            emit("note", message=f"{label(spec.user_class)}: requests named {names or '(none)'}")
        emit(
            "done",
            duration_s=last.at - first.at,
            users=swarm.user_count,
            processes=last.processes,
            rolled_requests=swarm.rolled_requests(),
            **bound,
        )
    finally:
        swarm.quit()
    # Locust's own totals, all phases, once the workers' last reports are in
    locust_total = swarm.environment.stats.total
    emit("locust", requests=locust_total.num_requests, failures=locust_total.num_failures)


def stamped(spec: SwarmSpec) -> dict[str, Any]:
    """The target's CPU counters now (``cpustamp``), for the bound of the measured phase
    the caller just rolled; nothing when the spec names no part."""
    return {"cpu": stamp(spec.cpu_probes)} if spec.cpu_probes else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webperf.swarm")
    parser.add_argument("--events-fd", type=int)
    parser.add_argument("--worker", type=int, metavar="INDEX")
    parser.add_argument("--master-port", type=int)
    parser.add_argument("--master-host", default="127.0.0.1")
    parser.add_argument("--remote", metavar="HOST:PORT", help="join this master (no spec given)")
    parser.add_argument("--allow-target", action="append", default=[], metavar="URL")
    parser.add_argument("--farewell", metavar="HOST:PORT", help="tell remote workers it is over")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--wait", type=float, default=10.0)
    parser.add_argument("--inspect", metavar="USER_CLASS", help="check a user's own classes")
    args = parser.parse_args(argv)
    if args.inspect is not None:
        from pytest_webperf.swarm.child.locustfile import inspect_main

        signal.alarm(300)
        print(json.dumps(inspect_main(args.inspect)), flush=True)
        return 0
    if args.farewell is not None:
        from pytest_webperf.swarm.child.master import farewell

        signal.alarm(int(args.wait) + 10)
        print(f"{farewell(args.farewell, args.count, args.wait)} remote worker(s) told", flush=True)
        return 0
    if args.remote is not None:
        from pytest_webperf.swarm.child.worker import run_remote
        from pytest_webperf.swarm.spec import split_address
        from pytest_webperf.swarm.trust.allowance import Allowance
        from pytest_webperf.swarm.trust.secret import secret_of

        host, port = split_address(args.remote)
        allowance = Allowance.of(host, args.allow_target)
        return run_remote(host, port, allowance, secret_of(None, os.environ))
    spec = SwarmSpec.from_dict(json.loads(sys.stdin.read()))
    signal.alarm(int(spec.deadline_s) + 1)  # bounded no matter what happens below
    if args.worker is not None:
        if args.master_port is None:
            parser.error("--worker needs --master-port")
        from pytest_webperf.swarm.child.worker import run_worker

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
