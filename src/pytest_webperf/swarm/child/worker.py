"""A worker of the distributed swarm: a local one (the spec on its stdin) or a remote one
(the spec from the master), answering the master's rolls with exact intervals and its
halt with the ledger (swarm processes only)."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from pytest_webperf.swarm.child import channel
from pytest_webperf.swarm.child.generator import (
    cpu_seconds,
    environment_for,
    equip,
    go,
    halt,
    place,
    quick_stop,
    raise_open_files,
    stop_sending,
    users_of,
    users_ready,
    waits_for_open,
    worker_cpus,
)
from pytest_webperf.swarm.child.master import WORKER_READY_S
from pytest_webperf.swarm.recorder import Recorder
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.trust import messages
from pytest_webperf.swarm.trust.allowance import Allowance
from pytest_webperf.swarm.trust.gate import Gate
from pytest_webperf.swarm.trust.secret import Secret, secret_of
from pytest_webperf.swarm.userspec import user_failure


def serve(
    runner: Any, index: int, cpus: list[int], recorder: Recorder, user_class: str = ""
) -> None:
    """Answer the master's rolls and halt with this process's recorder; tell it when
    the users of ``user_class`` could not start."""
    import gevent

    def watch_spawning() -> None:
        told = None
        while True:
            gevent.sleep(0.1)
            spawning = runner.spawning_greenlet
            if spawning is None or spawning is told or not spawning.ready():
                continue
            if spawning.exception is not None:
                what = f"starting a user of {user_class!r}"
                runner.send_message(
                    messages.FAILED, {"message": user_failure(what, spawning.exception)}
                )
            elif waits_for_open(runner):
                while not users_ready(runner):  # the master bounds the wait
                    gevent.sleep(0.02)
                runner.send_message(messages.OPEN)
            told = spawning

    runner.greenlet.spawn(watch_spawning)

    def on_roll(environment: Any, msg: Any) -> None:
        if msg.data.get("final"):
            stop_sending(runner)
        interval = recorder.roll()
        runner.send_message(
            messages.INTERVAL,
            {
                "at": time.monotonic(),
                "seq": msg.data["seq"],
                "index": index,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "cpus": cpus,
                "cpu_s": cpu_seconds(),
                "users": runner.user_count,
                **interval.to_dict(),
            },
        )

    def on_halt(environment: Any, msg: Any) -> None:
        halt(runner)
        if not quick_stop(runner):
            runner.stop()  # the MQTT user: waits for its acknowledgements, writes its ledger
        runner._send_stats()  # Locust's stats now, not at its next 3 s report: before HALTED
        ledger = getattr(environment, "webperf_ledger", None)
        runner.send_message(
            messages.HALTED, {"ledger": ledger.report if ledger is not None else None}
        )

    runner.register_message(messages.ROLL, on_roll)
    runner.register_message(messages.HALT, on_halt)
    runner.register_message(messages.GO, lambda environment, msg: go(runner))


def run_worker(spec: SwarmSpec, index: int, master_host: str, master_port: int) -> None:
    """One local worker process: Locust's WorkerRunner plus our per-tick interval reply."""
    cpus = place(worker_cpus(spec, index))
    raise_open_files(users_of(spec, index), lambda kind, message: print(message, flush=True))
    environment, recorder = environment_for(spec, index)
    channel.install(secret_of(None, os.environ))  # the master's, in this environment
    runner = environment.create_worker_runner(master_host, master_port)
    serve(runner, index, cpus, recorder, spec.user_class)
    runner.send_message(messages.READY, {"index": index, "pid": os.getpid()})
    runner.greenlet.join()  # until the master says quit


def run_remote(
    master_host: str, master_port: int, allowance: Allowance, secret: Secret | None
) -> int:
    """One remote worker process, for one run: join the master through the channel
    (``secret``: the one the master must prove), build the user class from the spec it
    sends if ``allowance`` lets this worker load its target, serve until it says quit.
    A status of ``trust.messages``: RUN_DONE, SESSION_OVER, NO_SPEC, TARGET_REFUSED (the
    channel ends the process itself when the master cannot be trusted)."""
    import signal

    import gevent
    from gevent.event import Event
    from locust.env import Environment

    signal.alarm(int(WORKER_READY_S) + 30)  # until the spec comes (its deadline then)
    gate = Gate(secret, channel.leave)
    channel.install(secret, gate=gate)
    environment = Environment(user_classes=[])
    runner = environment.create_worker_runner(master_host, master_port)
    got_spec = Event()
    refused: list[str] = []

    def on_spec(environment: Any, msg: Any) -> None:
        spec = SwarmSpec.from_dict(json.loads(msg.data["spec"]))
        index = int(msg.data["index"])
        signal.alarm(int(spec.deadline_s) + 1)
        try:
            refusal = allowance.refusal(spec.endpoints)
        except ValueError as exc:
            refusal = f"the run's target is refused: {exc}; nothing was sent"
        if refusal is not None:
            print(f"webperf worker: {refusal}", flush=True)
            where = f"the remote worker at {socket.gethostname()}"
            runner.send_message(messages.FAILED, {"message": f"{where}: {refusal}"})
            refused.append(refusal)
            got_spec.set()
            return
        raise_open_files(users_of(spec, index), lambda kind, message: print(message, flush=True))
        recorder = equip(environment, spec, index)
        serve(runner, index, sorted(os.sched_getaffinity(0)), recorder, spec.user_class)
        runner.send_message(messages.READY, {"index": index, "pid": os.getpid()})
        got_spec.set()

    def on_bye(environment: Any, msg: Any) -> None:
        gate.leave(messages.SESSION_OVER)

    runner.register_message(messages.SPEC, on_spec)
    runner.register_message(messages.BYE, on_bye)
    hello = {"host": socket.gethostname(), "pid": os.getpid(), "nonce": gate.nonce}
    runner.send_message(messages.HELLO, hello)
    if not got_spec.wait(timeout=WORKER_READY_S):
        return messages.NO_SPEC
    if refused:
        gevent.sleep(1.0)  # the master hears why before this process goes
        return messages.TARGET_REFUSED
    runner.greenlet.join()  # until the master says quit
    return messages.RUN_DONE
