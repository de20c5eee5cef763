"""Remote workers only a run's secret lets in, taking orders from a master that proves
it holds it, loading only what they may: on loopback, ``webperf worker`` processes
with the right secret, a wrong one or none, against a real swarm's master; a fake
master (a socket of this test speaking the protocol without the secret); a master
sent malformed and oversized messages. What a stranger sends never counts, never
crashes anything, and no request leaves a worker that refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from local_http import LocalServer
from tests.e2e.remote import free_port, start_worker, stop
from zmq.utils import z85

from pytest_webperf.errors import SwarmError
from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.runner import SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.swarm.trust.gate import spec_payload
from pytest_webperf.swarm.trust.messages import HELLO, SPEC
from pytest_webperf.swarm.trust.secret import (
    MASTER_KEY,
    prove,
    secret_from,
    worker_key,
)

pytestmark = pytest.mark.e2e

SECRET = "0123456789abcdef" * 4
WRONG = "fedcba9876543210" * 4
HOST = os.uname().nodename
BODY = b"<p>trusted</p>"


@pytest.fixture
def secret_file(tmp_path: Path) -> str:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return str(path)


def spec(url: str, address: str, *, workers: int = 1, users: int = 6) -> SwarmSpec:
    remote = Remote(1, address, wait_s=40, secret=secret_from(SECRET, "test"))
    return SwarmSpec(
        host=url,
        users=users,
        duration_s=1.5,
        warmup_s=0.5,
        user_class="lean",
        workers=workers,
        workload=Workload(path="/page"),
        remote=remote,
    )


class Swarm(threading.Thread):
    """``run_swarm`` in the background: its outcome, or the error it raised."""

    def __init__(self, swarm_spec: SwarmSpec) -> None:
        super().__init__(daemon=True)
        self.spec = swarm_spec
        self.outcome: SwarmOutcome | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.outcome = run_swarm(self.spec)
        except Exception as exc:  # handed to the test
            self.error = exc

    def result(self) -> SwarmOutcome:
        self.join(timeout=120)
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome


def listening(address: str, seconds: float = 30) -> None:
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((host, int(port))) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened at {address}")


def ended(worker: subprocess.Popen[str], seconds: float = 60) -> tuple[int, list[str], str]:
    """(status, stderr lines, stdout) of a worker that ends by itself."""
    out, err = worker.communicate(timeout=seconds)
    return worker.returncode, err.strip().splitlines(), out


def test_the_secret_s_worker_joins_and_the_others_are_refused(secret_file: str) -> None:
    """A wrong secret and none are refused (the master names their address, each
    worker ends in one line), the run goes on with the right worker, and only its
    requests and the local worker's count."""
    address = f"127.0.0.1:{free_port()}"
    with LocalServer("length", body=BODY) as server:
        swarm = Swarm(spec(server.url, address))
        swarm.start()
        listening(address)
        strangers = [
            start_worker(address, secret=WRONG, apart=True),
            start_worker(address, apart=True),  # no secret: on loopback it may try
        ]
        for stranger, says in zip(strangers, ("its secret is not", "it has none"), strict=True):
            code, err, _ = ended(stranger)
            assert code == 2 and len(err) == 1, err
            assert err[0].startswith(f"webperf worker: error: the master at {address} refused")
            assert says in err[0]
        worker = start_worker(address, "--secret-file", secret_file)
        try:
            outcome = swarm.result()
            responses = server.counts.responses
        finally:
            stop(worker)
    refused = [n for n in outcome.notes if n.startswith("refused a generator worker at ")]
    assert (
        refused
        == [
            "refused a generator worker at 127.0.0.1: it does not hold this run's secret "
            "(WEBPERF_SECRET, or webperf worker --secret-file)"
        ]
        * 2
    )  # one line each: two keys, one address
    assert sorted(g.role for g in outcome.generators) == ["master", f"remote1@{HOST}", "worker0"]
    total = outcome.total
    assert total.requests > 0 and total.errors == 0
    assert total.bytes == total.requests * len(BODY)
    assert outcome.rolled_requests is not None
    assert outcome.rolled_requests <= responses <= outcome.rolled_requests + 6
    assert not [n for n in outcome.notes if n.startswith("dropped")]


def _fake_master(address: str, url: str, curve: bool, done: threading.Event) -> None:
    """A master without the secret: it answers Locust's join, then sends Locust's own
    order to spawn and a spec whose proof is made with another secret."""
    context = zmq.Context()
    master = context.socket(zmq.ROUTER)
    if curve:  # the master's key is public: completing the handshake needs no secret
        master.curve_server = True
        master.curve_secretkey = z85.encode(MASTER_KEY)
    master.bind(f"tcp://{address}")
    text = json.dumps(SwarmSpec(host=url, users=4, duration_s=5).to_dict())
    try:
        while not done.is_set():
            if not master.poll(100):
                continue
            node, raw = master.recv_multipart()
            kind, data, node_id = msgpack.loads(raw)

            def send(what: str, payload: Any, to: bytes = node, name: str = node_id) -> None:
                master.send_multipart([to, msgpack.dumps((what, payload, name))])

            if kind == "client_ready":
                send("ack", {"index": 0})
            elif kind == HELLO:
                spawn = {"timestamp": time.time(), "user_classes_count": {"X": 4}, "host": url}
                send("spawn", {**spawn, "stop_timeout": None, "parsed_options": {}})
                proof = prove(
                    secret_from(WRONG, "fake"),
                    "spec",
                    node_id,
                    data["nonce"],
                    payload=spec_payload(0, text),
                )
                send(SPEC, {"spec": text, "index": 0, "proof": proof})
    finally:
        master.close(linger=0)
        context.term()


@pytest.mark.parametrize(
    ("curve", "says"),
    [
        (True, "could not prove it holds this worker's secret"),
        (False, "does not complete webperf's secured handshake"),
    ],
)
def test_a_fake_master_gets_no_load(secret_file: str, curve: bool, says: str) -> None:
    address = f"127.0.0.1:{free_port()}"
    done = threading.Event()
    with LocalServer("length", body=BODY) as server:
        fake = threading.Thread(
            target=_fake_master, args=(address, server.url, curve, done), daemon=True
        )
        fake.start()
        listening(address)
        worker = start_worker(address, "--secret-file", secret_file, apart=True)
        try:
            code, err, _ = ended(worker, 30)
        except subprocess.TimeoutExpired:
            code, err = None, ["it did not end"]
        finally:
            done.set()
            stop(worker)
            fake.join(timeout=10)
        assert server.counts.connections == 0  # not one connection, let alone a request
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"webperf worker: error: the master at {address} {says}")


def test_a_target_outside_the_worker_s_allowance_is_refused_and_nothing_sent(
    secret_file: str,
) -> None:
    """The master at 127.0.0.2, the target at 127.0.0.1: the worker refuses in one line,
    the run fails saying so, and the server sees nothing."""
    address = f"127.0.0.2:{free_port()}"
    worker = start_worker(address, "--secret-file", secret_file)
    try:
        with LocalServer("length", body=BODY) as server:
            with pytest.raises(SwarmError) as failed:
                run_swarm(spec(server.url, address, workers=0))
            assert server.counts.connections == 0
        assert worker.poll() is None  # it waits for the next run, as for any run
    finally:
        out = stop(worker)
    refusal = (
        f"the run's target 127.0.0.1:{server.port} is refused: it is not the master's "
        f"address (127.0.0.2) nor a target this worker allows (webperf worker "
        f"--allow-target URL); nothing was sent"
    )
    assert str(failed.value) == f"the remote worker at {HOST}: {refusal} (in remote1@{HOST})"
    assert [line for line in out.splitlines() if "refused" in line] == [
        f"webperf worker: {refusal}"
    ]


def _raw(address: str, data: bytes) -> None:
    """Bytes to the master's port, as a stranger's program would send them."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        try:
            s.sendall(data)
            s.settimeout(1)
            s.recv(64)
        except OSError:
            pass  # the master closed it: as it should


def _client(address: str, key: bytes | None, name: bytes, curve: bool = True) -> zmq.Socket[bytes]:
    """A client of the master: CURVE with ``key`` (random if None), or plain ZeroMQ."""
    context = zmq.Context.instance()
    client = context.socket(zmq.DEALER)
    public, private = zmq.curve_keypair()
    if key is not None:
        private = z85.encode(key)
        public = zmq.curve_public(private)
    if curve:
        client.curve_serverkey = zmq.curve_public(z85.encode(MASTER_KEY))
        client.curve_publickey, client.curve_secretkey = public, private
    client.identity = name
    client.linger = 0
    client.connect(f"tcp://{address}")
    return client


# a ZeroMQ greeting offering CURVE (ZMTP 3.0), then a command frame 2^62 bytes long
GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"CURVE".ljust(20, b"\0") + b"\0" * 32
HUGE_FRAME = b"\x06" + (1 << 62).to_bytes(8, "big") + b"\x05HELLO" + b"\0" * 10**6


def test_malformed_and_oversized_messages_do_not_crash_the_master(secret_file: str) -> None:
    """Garbage and a huge frame from a stranger, a stranger's handshake, a plain
    ZeroMQ client (as a stock Locust worker is), then malformed messages, one in
    another's name, one of three frames, one over the size limit and a Locust join never
    followed by ours, all from a client holding the secret, and another such join in
    the middle of the run: the run completes with the real worker alone and all its
    users, and the master says what it dropped."""
    address = f"127.0.0.1:{free_port()}"
    with LocalServer("length", body=BODY) as server:
        swarm = Swarm(spec(server.url, address, workers=0))
        swarm.start()
        listening(address)
        _raw(address, os.urandom(65536))
        _raw(address, GREETING + HUGE_FRAME)
        key = worker_key(secret_from(SECRET, "test"))
        stranger = _client(address, None, b"stranger")
        plain = _client(address, None, b"plain", curve=False)
        for client in (stranger, plain):
            client.send(msgpack.dumps(("client_ready", "2.47.0", client.identity.decode())))
        rogue = _client(address, key, b"rogue")
        for message in (
            b"\xc1 not msgpack",
            msgpack.dumps(("heartbeat", {"state": 1}, "rogue")),
            msgpack.dumps(("client_ready", "2.47.0", "someone-else")),
            msgpack.dumps([1, 2, 3, 4]),
            msgpack.dumps(("client_ready", "2.47.0", "rogue")),
        ):
            rogue.send(message)
        rogue.send_multipart([b"a", b"b"])
        oversized = ("logs", {"worker_id": 1, "logs": "x" * (64 << 20)}, "rogue")
        rogue.send(msgpack.dumps(oversized))  # over the limit: the master drops the link
        time.sleep(1.0)
        worker = start_worker(address, "--secret-file", secret_file)
        late = _client(address, key, b"late")
        try:
            deadline = time.monotonic() + 60
            while server.counts.responses == 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # the run is under way
            late.send(msgpack.dumps(("client_ready", "2.47.0", "late")))
            outcome = swarm.result()
        finally:
            stop(worker)
            for client in (stranger, plain, rogue, late):
                client.close()
    assert sorted(g.role for g in outcome.generators) == ["master", f"remote1@{HOST}"]
    assert outcome.total.requests > 0 and outcome.total.errors == 0
    assert outcome.users == 6  # none went to the clients that never said hello
    dropped = sorted(n for n in outcome.notes if n.startswith("dropped a message from "))
    assert dropped == [
        "dropped a message from 127.0.0.1: 'client_ready' in another worker's name",
        "dropped a message from 127.0.0.1: 'heartbeat' with data of the wrong shape",
        "dropped a message from 127.0.0.1: 3 frames, not 2",
        "dropped a message from 127.0.0.1: not a (type, data, node) message",
        "dropped a message from 127.0.0.1: not a MessagePack message",
    ]
    assert "'logs' with data of the wrong shape" not in str(dropped)  # never got that far
    assert [n for n in outcome.notes if n.startswith("refused")] == [
        "refused a generator worker at 127.0.0.1: it does not hold this run's secret "
        "(WEBPERF_SECRET, or webperf worker --secret-file)"
    ]
