"""The Locust internals the swarm relies on, each checked against the installed Locust.

The swarm (``swarm/child/main.py``, ``swarm/child/generator.py``, ``swarm/child/locust_stats.py``,
``swarm/lean.py``) touches parts of Locust that are not its documented API: a
user's ``_state``, the runner's user greenlets and their ``args``,
``WorkerRunner._send_stats()``, the fields of ``StatsEntry`` that ``log``/``log_error``
update. A Locust release that renames or reshapes one of them fails here, by name,
instead of in a swarm. pyproject.toml bounds
locust to the releases these pass against: raise the bound once they pass on the next.

``import locust`` monkey-patches the whole process with gevent, so it never happens in
the pytest process: this file runs itself in a child Python, after ``import locust``,
with ``__name__ == "__probe__"``; the child prints one verdict per check as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

# name -> (what we rely on, where)
CONTRACT: dict[str, tuple[str, str]] = {
    "user_state": (
        "User._state is LOCUST_STATE_RUNNING ('running') while a task runs; setting "
        "LOCUST_STATE_STOPPING ('stopping') ends the user after its task returns",
        "generator.stop_sending, lean.LeanHttpUser.closed_loop and arrival_loop",
    ),
    "user_greenlets": (
        "runner.user_greenlets is a gevent Group of one greenlet per user, args[0] the "
        "User; join(timeout=) and kill(block=, timeout=)",
        "generator.stop_sending, generator.halt",
    ),
    "local_runner": (
        "Environment(user_classes=, host=).create_local_runner(); runner.start(n, "
        "spawn_rate=), runner.spawning_greenlet.join(timeout=), runner.user_count, "
        "runner.environment.user_classes, runner.quit()",
        "child.LocalSwarm, generator.quick_stop",
    ),
    "distributed": (
        "create_master_runner(host, 0) and master.server.port; create_worker_runner(host, "
        "port); master.clients.ready / .all; register_message(type, listener) calls "
        "listener(environment=, msg=) with msg.data, both ways; worker.greenlet; "
        "worker._send_stats() reports to the master now; master.quit() ends the worker",
        "master.MasterSwarm, worker.run_worker",
    ),
    "remote_join": (
        "a worker made with Environment(user_classes=[]) gets its user class later "
        "(environment.user_classes = [cls]; user_classes_by_name follows) and spawns it; "
        "master.send_message(type, data, client_id) reaches that worker only; msg.node_id "
        "is its client id; master.clients.get(id), del master.clients[id], "
        "master._users_dispatcher (None before start), locust.runners.STATE_MISSING; a "
        "'quit' message sent to one worker ends it; master.clients.running lists the "
        "workers whose users are spawned",
        "master.MasterSwarm, worker.run_remote",
    ),
    "rpc_sockets": (
        "runners make their sockets as locust.rpc.zmqrpc.Server(host, port) and "
        ".Client(host, port, identity), looked up on that module at each connection; "
        "BaseSocket.__init__(self, sock_type, ipv4_only) makes .socket (zmq.green) in a "
        "context of its own, ipv4_only(host, port); the master reads recv_from_client() -> "
        "(client id, Message), the worker recv() -> Message, both close(linger=); "
        "Message(type, data, node_id); locust.rpc.protocol.decode; locust.exception.RPCError; "
        "the master's listener calls self.handle_message(client_id, msg), so an instance's "
        "own wins; runner.client / runner.server are the sockets",
        "channel.install, channel.MasterSocket, channel.WorkerSocket, master.MasterSwarm",
    ),
    "stats_entry_fields": (
        "locust_stats.log_interval leaves a StatsEntry as StatsEntry.log and log_error "
        "would, request by request (every field they update, with the same values)",
        "locust_stats.log_interval",
    ),
    "request_stats": (
        "RequestStats().entries[(name, method)] creates a StatsEntry on first use; "
        ".total; .errors a dict; StatsError(method, name, error, first_seen=), "
        "StatsError.create_key(method, name, error), .occurrences, .last_seen",
        "locust_stats.LocustStatsFeed",
    ),
    "bucket_response_time": (
        "locust.stats.bucket_response_time(ms) rounds as Locust's stats keys need",
        "locust_stats.log_interval",
    ),
    "events": (
        "environment.events.request, test_stop and test_stopping have add_listener; "
        "environment.stats.total.num_requests / num_failures",
        "generator.environment_for, child.run_swarm, locust_stats.recorder_for, mqtt",
    ),
    "user_classes": (
        "locust.User (abstract, wait_time, host, __init__(environment)), FastHttpUser "
        "with network_timeout and connection_timeout, constant, task, "
        "locust.exception.StopUser",
        "lean, fast, mqtt",
    ),
    "user_files": (
        "constant_pacing(p) and constant_throughput(r) are closures named "
        "'constant_pacing.<locals>.wait_time_func' holding the period in cell 'wait_time'; "
        "a task's wait calls the User's wait_time() after every task, on_start() first, "
        "all in the user's own greenlet, as the request event fires; a task's exception "
        "fires events.user_error(user_instance=, exception=, tb=) and the user goes on; "
        "the request event carries request_type=, name=, response_time= (ms); "
        "LoadTestShape subclasses are not abstract",
        "locustfile.pacing_period, locustfile.Pacer, locustfile.shape_classes, "
        "recorder.on_request, recorder.on_user_error",
    ),
    "gevent_loop": (
        "gevent.get_hub().loop.io(fd, events) and loop.timer(after, repeat).again(callback)",
        "leanconn.Connection",
    ),
}


# --- the checks, run in the child after ``import locust`` ---------------------------------


def _wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    import gevent

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {seconds} s")
        gevent.sleep(0.01)


def _stoppable_user() -> type[Any]:
    import gevent
    from locust import User, constant, task
    from locust.user.task import LOCUST_STATE_STOPPING

    class Looping(User):
        wait_time = constant(0)
        host = "http://127.0.0.1:9"
        loops = 0

        @task
        def loop(self) -> None:  # like lean's closed loop: one task call until stopped
            while self._state != LOCUST_STATE_STOPPING:
                type(self).loops += 1
                gevent.sleep(0.001)

    return Looping


def check_user_state() -> None:
    from locust.env import Environment
    from locust.user.task import LOCUST_STATE_RUNNING, LOCUST_STATE_STOPPING

    assert (LOCUST_STATE_RUNNING, LOCUST_STATE_STOPPING) == ("running", "stopping")
    user_class = _stoppable_user()
    runner = Environment(user_classes=[user_class]).create_local_runner()
    user = user_class(runner.environment)
    greenlet = user.start(runner.user_greenlets)
    _wait_until(lambda: user_class.loops > 0)
    assert user._state == LOCUST_STATE_RUNNING, user._state
    user._state = LOCUST_STATE_STOPPING
    greenlet.join(timeout=5)
    assert greenlet.dead, "a user marked stopping did not end"
    runner.quit()


def check_user_greenlets() -> None:
    from gevent.pool import Group
    from locust.env import Environment

    user_class = _stoppable_user()
    runner = Environment(user_classes=[user_class]).create_local_runner()
    assert isinstance(runner.user_greenlets, Group)
    users = [user_class(runner.environment) for _ in range(3)]
    for user in users:
        user.start(runner.user_greenlets)
    assert {id(g.args[0]) for g in runner.user_greenlets} == {id(u) for u in users}
    runner.user_greenlets.join(timeout=0.05)
    runner.user_greenlets.kill(block=True, timeout=5)
    assert len(runner.user_greenlets) == 0
    runner.quit()


def check_local_runner() -> None:
    from locust.env import Environment

    user_class = _stoppable_user()
    environment = Environment(user_classes=[user_class], host="http://127.0.0.1:9")
    runner = environment.create_local_runner()
    assert runner.environment.user_classes == [user_class]
    runner.start(4, spawn_rate=100)
    assert runner.spawning_greenlet is not None
    runner.spawning_greenlet.join(timeout=10)
    assert int(runner.user_count) == 4, runner.user_count
    runner.quit()
    assert int(runner.user_count) == 0


def check_distributed() -> None:
    import gevent
    from locust.env import Environment

    user_class = _stoppable_user()
    master = Environment(user_classes=[user_class]).create_master_runner("127.0.0.1", 0)
    heard: dict[str, Any] = {}

    def up(environment: Any, msg: Any) -> None:
        heard["up"] = (environment, msg.data)

    def down(environment: Any, msg: Any) -> None:
        heard["down"] = msg.data

    reports: list[Any] = []
    master.environment.events.worker_report.add_listener(lambda **kw: reports.append(kw))
    master.register_message("probe_up", up)
    port = master.server.port
    assert isinstance(port, int) and port > 0, port
    worker = Environment(user_classes=[user_class]).create_worker_runner("127.0.0.1", port)
    worker.register_message("probe_down", down)
    _wait_until(lambda: len(master.clients.ready) == 1)
    assert len(list(master.clients.all)) == 1
    worker.send_message("probe_up", {"x": 1})
    _wait_until(lambda: "up" in heard)
    assert heard["up"] == (master.environment, {"x": 1})
    master.send_message("probe_down", {"y": 2})
    _wait_until(lambda: "down" in heard)
    assert heard["down"] == {"y": 2}
    assert worker.user_count == 0
    before = len(reports)
    worker._send_stats()
    _wait_until(lambda: len(reports) > before)
    master.quit()
    with gevent.Timeout(10, AssertionError("the worker did not end on the master's quit")):
        worker.greenlet.join()


def check_remote_join() -> None:
    import gevent
    from locust.env import Environment
    from locust.runners import STATE_MISSING

    user_class = _stoppable_user()
    master = Environment(user_classes=[user_class]).create_master_runner("127.0.0.1", 0)
    assert master._users_dispatcher is None
    assert isinstance(STATE_MISSING, str)
    hellos: list[str] = []
    master.register_message("probe_hello", lambda environment, msg: hellos.append(msg.node_id))
    port = master.server.port
    late = Environment(user_classes=[])
    remote = late.create_worker_runner("127.0.0.1", port)
    other = Environment(user_classes=[user_class]).create_worker_runner("127.0.0.1", port)
    got: list[Any] = []
    remote.register_message("probe_spec", lambda environment, msg: got.append(msg.data))
    other.register_message("probe_spec", lambda environment, msg: got.append(("other", msg.data)))
    remote.send_message("probe_hello", None)
    _wait_until(lambda: len(hellos) == 1 and len(master.clients.ready) == 2)
    assert hellos == [remote.client_id]
    master.send_message("probe_spec", {"n": 1}, hellos[0])
    _wait_until(lambda: bool(got))
    gevent.sleep(0.2)
    assert got == [{"n": 1}]  # that worker only
    late.user_classes = [user_class]
    assert late.user_classes_by_name == {user_class.__name__: user_class}
    node = master.clients.get(other.client_id)
    assert node is not None and node.state != STATE_MISSING
    del master.clients[other.client_id]
    assert master.clients.get(other.client_id) is None
    master.send_message("quit", None, other.client_id)
    with gevent.Timeout(10, AssertionError("a worker sent quit did not end")):
        other.greenlet.join()
    master.start(2, spawn_rate=100)
    _wait_until(lambda: remote.user_count == 2)  # the class given late spawns
    _wait_until(lambda: len(master.clients.running) == 1)  # its spawning_complete
    master.quit()
    with gevent.Timeout(10, AssertionError("the worker did not end on the master's quit")):
        remote.greenlet.join()


def check_rpc_sockets() -> None:
    import gevent
    from locust.env import Environment
    from locust.rpc import zmqrpc

    from pytest_webperf.swarm.child import channel
    from pytest_webperf.swarm.trust.secret import secret_from

    server, client = zmqrpc.Server, zmqrpc.Client
    channel.install(secret_from("c" * 40, "probe"))
    try:
        master = Environment(user_classes=[]).create_master_runner("127.0.0.1", 0)
        assert isinstance(master.server, channel.MasterSocket), type(master.server)
        heard: list[str] = []
        handle = master.handle_message
        master.handle_message = lambda node, msg: (heard.append(msg.type), handle(node, msg))
        worker = Environment(user_classes=[]).create_worker_runner("127.0.0.1", master.server.port)
        assert isinstance(worker.client, channel.WorkerSocket), type(worker.client)
        _wait_until(lambda: len(master.clients.ready) == 1)
        assert heard[:1] == ["client_ready"], heard
        master.quit()
        with gevent.Timeout(10, AssertionError("the worker did not end on the master's quit")):
            worker.greenlet.join()
    finally:
        zmqrpc.Server, zmqrpc.Client = server, client


def check_stats_entry_fields() -> None:
    from locust.stats import RequestStats, StatsEntry

    from pytest_webperf.swarm.child.locust_stats import log_interval
    from pytest_webperf.swarm.recorder import Interval

    latencies_ms = [5, 12, 30]  # exact in our histogram, away from Locust's rounding steps
    stats = RequestStats(use_response_times_cache=True)
    theirs = StatsEntry(stats, "/x", "GET", use_response_times_cache=True)
    ours = StatsEntry(stats, "/x", "GET", use_response_times_cache=True)
    fresh = dict(vars(theirs))
    for ms in latencies_ms:
        theirs.log(ms, 10)
    theirs.log(None, 0)  # type: ignore[arg-type]  # a failure without a response
    theirs.log_error("boom")
    part = Interval()
    for ms in latencies_ms:
        part.record(ms * 1000, 10)
    part.record_error("boom")
    log_interval(ours, part, time.time())
    changed = {k for k, v in vars(theirs).items() if fresh.get(k, object()) != v}
    per_second = {"num_reqs_per_sec", "num_fail_per_sec"}
    assert "last_request_timestamp" in changed and ours.last_request_timestamp
    for name in sorted(changed - per_second - {"last_request_timestamp"}):
        assert getattr(ours, name) == getattr(theirs, name), (
            f"StatsEntry.{name}: log/log_error give {getattr(theirs, name)!r}, "
            f"log_interval gives {getattr(ours, name)!r}"
        )
    for name in sorted(per_second & changed):
        assert sum(getattr(ours, name).values()) == sum(getattr(theirs, name).values()), name
    assert callable(ours._cache_response_times)
    assert ours.use_response_times_cache is True


def check_request_stats() -> None:
    from locust.stats import RequestStats, StatsEntry, StatsError

    stats = RequestStats()
    entry = stats.entries[("/x", "GET")]
    assert isinstance(entry, StatsEntry) and stats.entries[("/x", "GET")] is entry
    assert isinstance(stats.total, StatsEntry)
    assert stats.errors == {}
    key = StatsError.create_key("GET", "/x", "timeout")
    error = stats.errors[key] = StatsError("GET", "/x", "timeout", first_seen=1.0)
    error.occurrences += 2
    error.last_seen = 2.0
    assert (error.occurrences, error.first_seen, error.last_seen) == (2, 1.0, 2.0)


def check_bucket_response_time() -> None:
    from locust.stats import bucket_response_time

    assert [bucket_response_time(v) for v in (5, 147, 3432, 58760)] == [5, 150, 3400, 59000]
    assert bucket_response_time(12.4) == 12


def check_events() -> None:
    from locust.env import Environment

    environment = Environment(user_classes=[_stoppable_user()])
    for name in ("request", "test_stop", "test_stopping"):
        assert callable(getattr(environment.events, name).add_listener), name
    assert (environment.stats.total.num_requests, environment.stats.total.num_failures) == (0, 0)


def check_user_classes() -> None:
    import inspect

    from locust import FastHttpUser, User, constant, task
    from locust.exception import StopUser

    assert User.abstract and FastHttpUser.abstract
    assert list(inspect.signature(User.__init__).parameters)[:2] == ["self", "environment"]
    assert hasattr(User, "wait_time") and hasattr(User, "host")
    assert isinstance(FastHttpUser.network_timeout, float)
    assert isinstance(FastHttpUser.connection_timeout, float)
    assert constant(0)(None) == 0
    assert callable(task) and issubclass(StopUser, Exception)


def check_user_files() -> None:
    import gevent
    from locust import LoadTestShape, User, constant_pacing, constant_throughput, task
    from locust.env import Environment

    from pytest_webperf.swarm.child.locustfile import pacing_period

    class Ramp(LoadTestShape):
        def tick(self) -> None:
            return None

    assert not getattr(Ramp, "abstract", True)
    seen: list[tuple[str, Any]] = []
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []

    class Paced(User):
        host = "http://127.0.0.1:9"
        wait_time = constant_pacing(0.01)

        def on_start(self) -> None:
            seen.append(("start", gevent.getcurrent()))

        @task
        def work(self) -> None:
            seen.append(("task", gevent.getcurrent()))
            self.environment.events.request.fire(
                request_type="GET",
                name="/x",
                response_time=1.5,
                response_length=0,
                exception=None,
                context={},
            )
            raise AttributeError("boom")

    assert pacing_period(Paced) == 0.01
    assert pacing_period(type("T", (User,), {"wait_time": constant_throughput(4)})) == 0.25
    original = Paced.wait_time

    def wait_time(user: Any) -> float:
        seen.append(("wait", gevent.getcurrent()))
        return float(original(user))

    Paced.wait_time = wait_time  # type: ignore[method-assign,assignment]
    environment = Environment(user_classes=[Paced])
    environment.events.request.add_listener(lambda **kw: requests.append(kw))
    environment.events.user_error.add_listener(lambda **kw: errors.append(kw))
    runner = environment.create_local_runner()
    runner.start(1, spawn_rate=100)
    _wait_until(lambda: len(errors) >= 3)
    runner.quit()
    assert seen[0][0] == "start" and [k for k, _ in seen[1:4]] == ["task", "wait", "task"]
    assert len({id(g) for _, g in seen}) == 1  # one greenlet: the user's
    assert {"request_type", "name", "response_time"} <= set(requests[0])
    assert isinstance(errors[0]["exception"], AttributeError) and "tb" in errors[0]


def check_gevent_loop() -> None:
    import os

    import gevent

    loop = gevent.get_hub().loop
    fired: list[int] = []
    timer = loop.timer(0.01, 0.01)
    timer.again(lambda: fired.append(1))
    gevent.sleep(0.05)
    timer.stop()
    assert fired, "loop.timer().again(callback) never fired"
    read_fd, write_fd = os.pipe()
    try:
        reader = loop.io(read_fd, 1)
        writer = loop.io(write_fd, 2)
        assert hasattr(reader, "start") and hasattr(writer, "stop")
    finally:
        os.close(read_fd)
        os.close(write_fd)


def probe() -> dict[str, str | None]:
    """Every check's verdict: None when it holds, else what failed."""
    verdicts: dict[str, str | None] = {}
    for name in CONTRACT:
        try:
            globals()[f"check_{name}"]()
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            verdicts[name] = f"{type(exc).__name__}: {exc} (line {where.lineno}: {where.line})"
        else:
            verdicts[name] = None
    return verdicts


if __name__ == "__probe__":
    print(json.dumps(probe()), flush=True)


# --- the tests, in the pytest process (which never imports locust) ------------------------

PROBE = f"import locust, runpy; runpy.run_path({__file__!r}, run_name='__probe__')"


@pytest.fixture(scope="module")
def verdicts() -> dict[str, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    result: dict[str, str | None] = json.loads(last)
    return result


def test_every_check_is_written() -> None:
    assert all(callable(globals().get(f"check_{name}")) for name in CONTRACT)


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_locust_keeps_what_the_swarm_relies_on(name: str, verdicts: dict[str, str | None]) -> None:
    relied_on, where = CONTRACT[name]
    assert verdicts[name] is None, f"{relied_on} (used in {where}): {verdicts[name]}"


def test_pytest_never_imports_locust() -> None:
    assert "locust" not in sys.modules
