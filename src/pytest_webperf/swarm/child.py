"""The swarm child: ``python -m pytest_webperf.swarm --events-fd N < spec.json``.

Runs Locust in this process only (``import locust`` monkey-patches it with
gevent), spawns the users, lets them warm up, then writes one JSON line per
interval to the events pipe: ``spawned``, ``note``, ``measure-start``,
``interval`` (phase warmup|measure) and ``done``. Every run stops by itself:
the child also arms an alarm past which it exits.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from pytest_webperf.swarm.spec import SwarmSpec

Emit = Callable[..., None]


def raise_open_files(users: int, emit: Emit) -> None:
    """Open-files soft limit up to the hard limit; say when it caps the concurrency."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = users + 100  # one socket per user, plus the interpreter's own
    if hard != resource.RLIM_INFINITY and needed > hard:
        emit("note", message=(
            f"open-files limit {hard} caps this generator process below {users} users "
            f"(needs ~{needed}); raise the hard limit (ulimit -Hn) or use more --webperf-workers"
        ))


def load_user_class(spec: SwarmSpec) -> type[Any]:
    if spec.user_class == "fast":
        from pytest_webperf.swarm import fast

        return fast.make_user(spec)
    if spec.user_class == "mqtt":
        from pytest_webperf.swarm import mqtt

        return mqtt.make_user(spec)
    if spec.user_class == "lean":
        from pytest_webperf.swarm import http

        return http.make_user(spec)
    module_name, _, class_name = spec.user_class.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not getattr(cls, "host", None):
        cls.host = spec.host
    return cls  # type: ignore[no-any-return]


def run(spec: SwarmSpec, emit: Emit) -> None:
    import gevent
    from locust.env import Environment

    from pytest_webperf.swarm.recorder import Recorder

    user_class = load_user_class(spec)
    recorder = Recorder()
    environment = Environment(user_classes=[user_class], host=spec.host)
    environment.webperf_recorder = recorder  # type: ignore[attr-defined]  # lean users record here
    if not getattr(user_class, "webperf_records_itself", False):
        environment.events.request.add_listener(recorder.on_request)  # type: ignore[no-untyped-call]
    runner = environment.create_local_runner()

    started = time.monotonic()
    runner.start(spec.users, spawn_rate=spec.effective_spawn_rate)
    if runner.spawning_greenlet is not None:
        runner.spawning_greenlet.join(timeout=spec.deadline_s)
    emit("spawned", users=runner.user_count, seconds=time.monotonic() - started)

    def tick_for(seconds: float, phase: str) -> None:
        interval_start = time.monotonic()
        end = interval_start + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            gevent.sleep(min(spec.interval_s - (now - interval_start), end - now))
            now = time.monotonic()
            if now - interval_start >= spec.interval_s - 1e-3 or now >= end:
                emit("interval", phase=phase, elapsed=now - interval_start,
                     users=runner.user_count, **recorder.roll().to_dict())
                interval_start = now

    if spec.warmup_s > 0:
        tick_for(spec.warmup_s, "warmup")
    recorder.roll()  # whatever completed between the last tick and now is not counted
    measure_start = time.monotonic()
    emit("measure-start")
    tick_for(spec.duration_s, "measure")
    emit("done", duration_s=time.monotonic() - measure_start, users=runner.user_count)
    runner.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webperf.swarm")
    parser.add_argument("--events-fd", type=int, required=True)
    args = parser.parse_args(argv)
    spec = SwarmSpec.from_dict(json.loads(sys.stdin.read()))
    events: IO[str] = os.fdopen(args.events_fd, "w", buffering=1)

    def emit(kind: str, **data: Any) -> None:
        events.write(json.dumps({"type": kind, **data}) + "\n")

    signal.alarm(int(spec.deadline_s) + 1)  # bounded no matter what happens below
    raise_open_files(spec.users * 1 if spec.workers <= 1 else spec.users // spec.workers, emit)
    run(spec, emit)
    events.close()
    return 0
