"""The distributed swarm: a Locust master, its local workers and remote ones.

Messages beside Locust's own (``environment.runner.register_message``):

- a local worker (started here with the spec on its stdin) says ``webperf_ready``
  once its handlers are in place;
- a remote worker (``webperf worker --master HOST:PORT`` on another machine), once
  the channel admitted it (``swarm/child/channel.py``: with a secret, only workers
  holding it), says ``webperf_hello`` with its challenge; the master answers
  ``webperf_spec`` (the spec, its worker index, 0-based over all workers, and the
  proof that the master holds the secret) to the first ``remote.workers`` of them and
  tells any other to quit; the worker checks the proof and that it may load the
  spec's target, builds its user class from the spec and says ``webperf_ready`` (or
  ``webperf_failed``, saying why it will not);
- at every tick ``webperf_roll`` to all, ``webperf_interval`` back (the
  interval's exact histograms and the process's CPU seconds); ``webperf_halt``
  / ``webperf_halted`` at the end;
- a worker whose users raise when they start says ``webperf_failed`` (one line:
  the exception and where), and the run fails with it;
- stream users (long-lived connections): each worker says ``webperf_open`` once
  every connection of its users has tried to open; when all have, the master says
  ``webperf_go`` (a fan-out's publishers start: every subscriber listens), then the
  warm-up begins.

The measured window is the master's clock (the instants it sends each roll):
the workers' clocks may be other machines'. A worker that stops answering (its
process died, it disconnected, Locust's heartbeats say it is missing), or does
not answer the last roll, fails the run naming it: its requests cannot be
counted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

from pytest_webperf.swarm.child import channel
from pytest_webperf.swarm.child.generator import (
    Emit,
    Process,
    Roll,
    cpu_seconds,
    environment_for,
    place,
)
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.spec import SwarmSpec, split_address
from pytest_webperf.swarm.trust.gate import spec_payload
from pytest_webperf.swarm.trust.messages import (
    BYE,
    FAILED,
    GO,
    HALT,
    HALTED,
    HELLO,
    INTERVAL,
    OPEN,
    READY,
    ROLL,
    SPEC,
)
from pytest_webperf.swarm.trust.secret import environment_with, prove, secret_of

WORKER_READY_S = 60.0  # starting a worker (python + locust import) takes ~1-2 s, more under load
ROLL_REPLY_S = 5.0  # how long the master waits for the workers' intervals at each tick
FINAL_REPLY_S = 15.0  # ... and for the last one, which nothing later can make up for


class WorkerLost(RuntimeError):
    """A generator worker stopped answering during a run."""


class MasterSwarm:
    """A Locust master here, ``spec.local_workers`` worker processes below it and
    ``spec.remote_workers`` joining from elsewhere."""

    def __init__(self, spec: SwarmSpec, emit: Emit) -> None:
        from gevent.event import Event

        self.spec = spec
        self.emit = emit
        self.cpus = place(spec.cpus)
        self.environment, _ = environment_for(spec)
        host, port = split_address(spec.remote.bind) if spec.remote else ("127.0.0.1", 0)
        self.secret = channel.master_secret(spec)
        channel.install(self.secret, say=self._say)
        try:
            self.runner = self.environment.create_master_runner(host, port)
        except Exception as exc:  # locust.rpc RPCError: the address is taken or not ours
            raise RuntimeError(
                f"the swarm's master cannot listen on {host}:{port}: {exc} "
                "(another run there? choose another --webperf-master-bind)"
            ) from None
        for kind, listener in (
            (INTERVAL, self._on_interval),
            (HALTED, self._on_halted),
            (READY, self._on_ready),
            (HELLO, self._on_hello),
            (FAILED, self._on_failed),
            (OPEN, self._on_open),
        ):
            self.runner.register_message(kind, listener)
        self.roles: dict[str, str] = {}  # Locust client id -> "workerN" / "remoteN@host"
        self.pids: dict[str, int] = {}
        self.invited: dict[str, str] = {}  # remote workers sent the spec, not yet ready
        self.halted: set[str] = set()
        self.ledgers: dict[str, dict[str, Any]] = {}  # MQTT: each worker's accounting
        self.all_halted = Event()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.seq = 0
        self.inbox: dict[str, list[dict[str, Any]]] = {}  # intervals not yet summed, by worker
        self.node_users: dict[str, int] = {}  # each worker's users at its latest answer
        self.replies: dict[str, dict[str, Any]] = {}  # answers to this roll
        self.arrived = Event()
        self.users = 0
        self.rolled = 0
        self.failure: str | None = None  # a worker's users could not start
        self.opened: set[str] = set()  # workers whose connections have all tried to open
        self.full = False  # the run has its workers: a later one gets no users
        heard = self.runner.handle_message

        def handle_message(node: str, msg: Any) -> None:
            if msg.type == "client_ready" and self.full and node not in self.roles:
                self._dismiss(node)  # else Locust would move users to it mid-run
                return
            heard(node, msg)

        self.runner.handle_message = handle_message

    @property
    def expected(self) -> int:
        return self.spec.local_workers + self.spec.remote_workers

    def start(self) -> list[Process]:
        port = self.runner.server.port
        host = split_address(self.spec.remote.bind)[0] if self.spec.remote else "127.0.0.1"
        if host in ("0.0.0.0", "*", "::"):
            host = "127.0.0.1"
        spec_json = json.dumps(self.spec.to_dict()).encode()
        env = environment_with(self.secret)
        for index in range(self.spec.local_workers):
            command = [sys.executable, "-m", "pytest_webperf.swarm", "--worker", str(index)]
            command += ["--master-port", str(port), "--master-host", host]
            worker = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
            assert worker.stdin is not None
            worker.stdin.write(spec_json)
            worker.stdin.close()
            self.workers.append(worker)
        self._await_workers()
        self.full = True
        for node in [n for n in self.runner.clients if n not in self.roles]:
            self._dismiss(node)  # joined Locust but never became one of ours: no users
        self.runner.start(self.spec.users, spawn_rate=self.spec.effective_spawn_rate)
        self._await_spawned()
        if self.spec.stream is not None:
            self._await_open()
        processes = self.roll().processes  # also learns the workers' pids and placement
        keys = ("pid", "role", "cpus", "host")
        return [{k: p[k] for k in keys if k in p} for p in processes]

    def _joined(self, remote: bool) -> int:
        return sum(role.startswith("remote") == remote for role in self.roles.values())

    def _await_workers(self) -> None:
        import gevent

        started = time.monotonic()
        spec = self.spec
        while True:
            local, remote = self._joined(False), self._joined(True)
            if local >= spec.local_workers and remote >= spec.remote_workers:
                return
            if self.failure is not None:
                raise RuntimeError(self.failure)
            dead = [w.args for w in self.workers if w.poll() is not None]
            if dead:
                raise RuntimeError(f"a generator worker exited before it was ready: {dead[0]!r}")
            waited = time.monotonic() - started
            if local < spec.local_workers and waited > WORKER_READY_S:
                raise RuntimeError(
                    f"only {local} of {spec.local_workers} generator workers connected in "
                    f"{WORKER_READY_S:.0f}s"
                )
            if spec.remote and remote < spec.remote_workers and waited > spec.remote.wait_s:
                raise RuntimeError(
                    f"only {remote} of {spec.remote_workers} remote generator workers joined "
                    f"the master at {spec.remote.bind} within {spec.remote.wait_s:g}s: start "
                    f"them with `webperf worker --master {spec.remote.bind}` (reachable there, "
                    "port open)"
                )
            gevent.sleep(0.05)

    def _await_spawned(self) -> None:
        """Until every worker says its users are spawned (Locust's spawning_complete),
        bounded as the local swarm's spawn is; the warm-up then starts from full load."""
        import gevent

        spec = self.spec
        deadline = time.monotonic() + spec.users / spec.effective_spawn_rate * 3 + 30
        while len(self.runner.clients.running) < len(self.roles):
            if self.failure is not None:
                raise RuntimeError(self.failure)
            if time.monotonic() > deadline:
                return  # the rolls say who is missing
            gevent.sleep(0.05)

    def _await_open(self) -> None:
        """Stream users: until every worker's connections have tried to open (bounded by
        the spec's opening time), then the publishers go, everywhere at once."""
        import gevent

        deadline = time.monotonic() + self.spec.opening_s
        while len(self.opened) < len(self.roles) and time.monotonic() < deadline:
            if self.failure is not None:
                raise RuntimeError(self.failure)
            gevent.sleep(0.02)
        if len(self.opened) < len(self.roles):
            self.emit(
                "note",
                message=(
                    f"only {len(self.opened)} of {len(self.roles)} generator workers had "
                    f"opened their connections after {self.spec.opening_s:.0f} s: the warm-up "
                    "starts anyway"
                ),
            )
        self.runner.send_message(GO)

    def _on_open(self, environment: Any, msg: Any) -> None:
        self.opened.add(msg.node_id)

    def _on_hello(self, environment: Any, msg: Any) -> None:
        """A remote worker: the spec and its index if the run still needs it, else quit."""
        node = msg.node_id
        joined = len(self.invited) + self._joined(True)
        if node in self.invited or node in self.roles:
            return
        if joined >= self.spec.remote_workers or self.seq > 0:
            self._dismiss(node)
            return
        number = joined + 1
        self.invited[node] = f"remote{number}@{msg.data['host']}"
        index = self.spec.local_workers + number - 1
        spec = json.dumps(self.spec.to_dict())
        proof = None
        if self.secret is not None:
            payload = spec_payload(index, spec)
            proof = prove(self.secret, "spec", node, msg.data["nonce"], payload=payload)
        self.runner.send_message(SPEC, {"spec": spec, "index": index, "proof": proof}, node)

    def _say(self, line: str) -> None:
        """A line from the channel (a worker refused, a message dropped): a note."""
        print(f"webperf master: {line}", flush=True)
        self.emit("note", message=line)

    def _dismiss(self, node: str) -> None:
        """A worker this run has no place for: out of Locust's clients before it gets users."""
        clients = self.runner.clients
        client = clients.get(node)
        if client is not None:
            del clients[node]
            if self.runner._users_dispatcher is not None:
                self.runner._users_dispatcher.remove_worker(client)
        self.runner.send_message("quit", None, node)

    def _on_ready(self, environment: Any, msg: Any) -> None:
        data = msg.data
        role = self.invited.pop(msg.node_id, None) or f"worker{data['index']}"
        self.roles[msg.node_id] = role
        self.pids[msg.node_id] = int(data["pid"])

    @property
    def user_count(self) -> int:
        return self.users

    def _gone(self, node: str) -> bool:
        """Whether a worker is no longer there: its process ended (a local one), it quit
        or Locust's heartbeats say it is missing."""
        from locust.runners import STATE_MISSING

        local = [w for w in self.workers if w.pid == self.pids.get(node)]
        if local and local[0].poll() is not None:
            return True
        client = self.runner.clients.get(node)
        return client is None or client.state == STATE_MISSING

    def roll(self, final: bool = False) -> Roll:
        """Every worker's interval, summed; waits (bounded) for all of them.

        ``final``: the last one, the workers' users stop sending before they roll."""
        if self.failure is not None:
            raise RuntimeError(self.failure)
        self.seq += 1
        self.replies = {}
        self.arrived.clear()
        at = time.monotonic()  # the master's clock: each worker rolls as this reaches it
        self.runner.send_message(ROLL, {"seq": self.seq, "final": final})
        self.arrived.wait(timeout=FINAL_REPLY_S if final else ROLL_REPLY_S)
        missing = [node for node in self.roles if node not in self.replies]
        inbox, self.inbox = self.inbox, {}  # late answers to earlier rolls count here
        lost = [node for node in missing if final or self._gone(node)]
        if lost:
            names = ", ".join(self.roles[node] for node in lost)
            raise WorkerLost(
                f"generator worker {names} stopped answering the master during the run "
                "(died or disconnected): its requests cannot be counted, this repetition fails"
            )
        total = Interval()
        processes: list[Process] = [
            {"pid": os.getpid(), "role": "master", "cpu_s": cpu_seconds(), "cpus": self.cpus}
        ]
        processes[0]["host"] = socket.gethostname()
        for node, replies in sorted(inbox.items(), key=lambda r: self._order(r[0])):
            for reply in replies:
                total.merge(Interval.from_dict(reply))
            reply = max(replies, key=lambda r: int(r["seq"]))  # the latest: CPU, users
            self.node_users[node] = int(reply["users"])
            processes.append(
                {
                    "pid": reply["pid"],
                    "role": self.roles[node],
                    "cpu_s": reply["cpu_s"],
                    "cpus": reply["cpus"],
                    "host": reply.get("host", ""),
                }
            )
        if missing:
            self.emit(
                "note",
                message=(
                    f"only {len(self.replies)} of {self.expected} generator workers reported "
                    f"interval {self.seq} within {ROLL_REPLY_S:.0f}s (overloaded?); the "
                    "others' requests are counted in a later interval"
                ),
            )
        self.users = sum(self.node_users.values())
        self.rolled += total.requests
        return Roll(total, processes, at, final)

    def _order(self, node: str) -> tuple[bool, int, str]:
        """Local workers first, then remote ones, each by number."""
        role = self.roles[node]
        number = role.removeprefix("remote").removeprefix("worker").split("@")[0]
        return role.startswith("remote"), int(number) if number.isdigit() else 0, role

    def _on_interval(self, environment: Any, msg: Any) -> None:
        data = msg.data
        if msg.node_id not in self.roles:
            return
        self.inbox.setdefault(msg.node_id, []).append(data)  # a late one: the next roll's
        if int(data["seq"]) == self.seq:
            self.replies[msg.node_id] = data
            if len(self.replies) >= len(self.roles):
                self.arrived.set()

    def _on_failed(self, environment: Any, msg: Any) -> None:
        if self.failure is None:
            role = self.roles.get(msg.node_id) or self.invited.get(msg.node_id, "a worker")
            self.failure = f"{msg.data['message']} (in {role})"

    def _on_halted(self, environment: Any, msg: Any) -> None:
        self.halted.add(msg.node_id)
        if msg.data and msg.data.get("ledger"):
            self.ledgers[msg.node_id] = msg.data["ledger"]
        if len(self.halted) >= len([n for n in self.roles if not self._gone(n)]):
            self.all_halted.set()

    def rolled_requests(self) -> int:
        return self.rolled

    def _write_ledger(self) -> None:
        """MQTT, streams: the workers' accounting merged where the parent reads it."""
        if not self.ledgers:
            return
        from pytest_webperf.swarm.child import paho

        if self.spec.mqtt is not None and self.spec.mqtt.report_path:
            from pytest_webperf.mqtt.accounting import merge_reports

            paho.write_report(self.spec.mqtt.report_path, merge_reports(self.ledgers.values()))
        if self.spec.stream is not None and self.spec.stream.report_path:
            from pytest_webperf.longlived.accounting import merge_ledgers

            paho.write_report(self.spec.stream.report_path, merge_ledgers(self.ledgers.values()))

    def quit(self) -> None:
        if any(not self._gone(node) for node in self.roles):
            self.runner.send_message(HALT)  # answered after the workers' last Locust stats
            self.all_halted.wait(timeout=15 + self.spec.timeout_s)
        self._write_ledger()
        self.runner.quit()  # tells the workers to quit
        deadline = time.monotonic() + 10
        for worker in self.workers:
            try:
                worker.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def farewell(bind: str, count: int, wait_s: float) -> int:
    """End of a session: listen at ``bind`` up to ``wait_s`` and tell remote workers
    (up to ``count``) that it is over, so their ``webperf worker`` exits; how many heard."""
    import gevent
    from locust.env import Environment

    secret = secret_of(None, os.environ)
    channel.install(secret)
    runner = Environment(user_classes=[]).create_master_runner(*split_address(bind))
    told: set[str] = set()

    def on_hello(environment: Any, msg: Any) -> None:
        node = msg.node_id
        proof = prove(secret, "bye", node, msg.data["nonce"]) if secret is not None else None
        runner.send_message(BYE, {"proof": proof}, node)
        told.add(node)

    runner.register_message(HELLO, on_hello)
    deadline = time.monotonic() + wait_s
    while len(told) < count and time.monotonic() < deadline:
        gevent.sleep(0.05)
    gevent.sleep(0.5)  # the last BYE on its way
    runner.quit()
    return len(told)
