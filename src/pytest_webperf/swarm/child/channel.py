"""The channel between a swarm's master and its workers: Locust's ZeroMQ sockets with
CurveZMQ (encrypted and authenticated: ``swarm/trust/secret.py`` says who proves what,
and why the master's key is public) and every message checked before a handler hears
it (``swarm/trust/messages.py``).

Locust makes its sockets itself, as ``locust.rpc.zmqrpc.Server`` and ``.Client`` looked
up at every connection: ``install`` puts ours in their place in this process. Ours set
CURVE before they bind or connect, and:

- the master's answers ZeroMQ's ZAP requests in a greenlet of its own
  (``swarm/trust/zap.py``; pyzmq's ThreadAuthenticator needs a thread, and gevent
  patches threads here): with a secret it admits the derived worker key only and names
  each refused address once; the domain is enforced, so without the handler no one joins;
- the master's drops what a worker says unless it is MessagePack, well formed and in
  that worker's own name (once per address and reason, it says so); ZeroMQ closes a
  connection that sends more than ``MAX_MESSAGE`` bytes at once;
- a remote worker's hears what its gate lets through (``swarm/trust/gate.py``: nothing
  that directs load before the master proved it holds the secret). It never reconnects
  (whoever listens after a break is not the master it proved), and it ends (a status of
  ``swarm/trust/messages.py``) when the master refuses its key or cannot complete the
  handshake, or when Locust makes a second connection.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import gevent
import gevent.event
import msgpack
import zmq.green as zmq
from locust.exception import RPCError
from locust.rpc import Message, protocol, zmqrpc
from zmq.utils import z85
from zmq.utils.monitor import recv_monitor_message

from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.trust import zap
from pytest_webperf.swarm.trust.gate import Gate
from pytest_webperf.swarm.trust.messages import (
    FROM_MASTER,
    FROM_WORKER,
    LOST,
    NO_HANDSHAKE,
    REFUSED,
    refusal,
)
from pytest_webperf.swarm.trust.secret import (
    MASTER_KEY,
    Secret,
    secret_from,
    secret_of,
    worker_key,
)

# bytes: a worker's largest message, its ledger at the end, holds a few tens of bytes per
# connection or MQTT client (its intervals are kilobytes): 100,000 of them is some MB
MAX_MESSAGE = 64 << 20
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
DOMAIN = b"webperf"
SAID_AT_MOST = 100  # distinct refusals and drops said per master, then silence
HANDSHAKE_WAIT_S = 10.0  # how long a remote worker's first message waits for the handshake
Say = Callable[[str], None]


def master_secret(spec: SwarmSpec) -> Secret | None:
    """The secret the workers must hold: the run's (``WEBPERF_SECRET``, from the parent),
    a random one when all workers are started here, none for remote workers on
    loopback or a trusted network; RuntimeError where the master may not listen."""
    secret = secret_of(None, os.environ)
    if spec.remote is None:
        return secret or secret_from(os.urandom(32).hex(), "this run")
    unguarded = spec.remote.unguarded(secret)
    if unguarded is not None:
        raise RuntimeError(unguarded)
    return secret


def master_public() -> bytes:
    """The master's CURVE public key (Z85), from its public secret key."""
    return bytes(zmq.curve_public(z85.encode(MASTER_KEY)))


def worker_keys(secret: Secret | None) -> tuple[bytes, bytes]:
    """A worker's CURVE key pair (Z85): derived from the secret, or random without one."""
    if secret is None:
        public, private = zmq.curve_keypair()
        return bytes(public), bytes(private)
    private = z85.encode(worker_key(secret))
    return bytes(zmq.curve_public(private)), private


def leave(code: int) -> NoReturn:
    """End this worker process now, with a status of ``trust.messages``."""
    sys.stdout.flush()
    os._exit(code)  # nothing of this process is worth a clean stop


@dataclass
class _State:
    secret: Secret | None = None
    gate: Gate | None = None
    say: Say = print


_state = _State()


def install(secret: Secret | None, *, gate: Gate | None = None, say: Say = print) -> None:
    """Our sockets for Locust's, in this process. ``gate``: a remote worker's;
    ``say``: where the master says whom it refused and what it dropped."""
    _state.secret, _state.gate, _state.say = secret, gate, say
    zmqrpc.Server = MasterSocket  # type: ignore[misc]
    zmqrpc.Client = WorkerSocket  # type: ignore[misc]


class _Sayer:
    """Says each distinct line once (at most ``SAID_AT_MOST`` of them, then that it stops)."""

    def __init__(self, say: Say) -> None:
        self.say = say
        self.said: set[Any] = set()

    def once(self, key: Any, line: str) -> None:
        if key in self.said or len(self.said) > SAID_AT_MOST:
            return
        self.said.add(key)
        if len(self.said) > SAID_AT_MOST:
            line = f"{SAID_AT_MOST} refusals and drops said: any more are not"
        self.say(line)


class Gatekeeper:
    """The master's ZAP handler, a greenlet answering libzmq in the socket's context."""

    def __init__(self, context: Any, secret: Secret | None, sayer: _Sayer) -> None:
        self.admitted = None if secret is None else z85.decode(worker_keys(secret)[0])
        self.sayer = sayer
        self.socket = context.socket(zmq.REP)
        self.socket.linger = 0
        self.socket.bind(ZAP_ENDPOINT)
        self.greenlet = gevent.spawn(self._serve)

    def _serve(self) -> None:
        while True:
            got = zap.answer(self.socket.recv_multipart(), self.admitted)
            self.socket.send_multipart(got.reply)
            if got.refused is not None:
                self.sayer.once(
                    (got.refused, got.key),
                    f"refused a generator worker at {got.refused}: it does not hold this "
                    "run's secret (WEBPERF_SECRET, or webperf worker --secret-file)",
                )

    def close(self) -> None:
        self.greenlet.kill(block=False)
        self.socket.close(linger=0)


class MasterSocket(zmqrpc.Server):
    """Locust's master socket, with CURVE, the gatekeeper and the message checks."""

    def __init__(self, host: str, port: int) -> None:
        zmqrpc.BaseSocket.__init__(self, zmq.ROUTER, self.ipv4_only(host, port))  # type: ignore[no-untyped-call]
        socket = self.socket
        socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        socket.setsockopt(zmq.CURVE_SERVER, 1)
        socket.setsockopt(zmq.CURVE_SECRETKEY, z85.encode(MASTER_KEY))
        socket.setsockopt(zmq.ZAP_DOMAIN, DOMAIN)
        socket.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        self.sayer = _Sayer(_state.say)
        self.gatekeeper = Gatekeeper(socket.context, _state.secret, self.sayer)
        try:
            if port == 0:
                self.port = socket.bind_to_random_port(f"tcp://{host}")
            else:
                socket.bind(f"tcp://{host}:{port}")
                self.port = port
        except zmq.ZMQError as exc:
            self.close(linger=0)
            raise RPCError(f"Socket bind failure: {exc}") from None

    def recv_from_client(self) -> tuple[str, Message]:
        while True:
            try:
                frames = self.socket.recv_multipart(copy=False)
            except zmq.ZMQError as exc:
                raise RPCError("ZMQ network broken") from exc
            sender, why, message = _read(frames)
            if message is not None:
                return sender, message
            address = _peer(frames[-1])
            self.sayer.once((address, why), f"dropped a message from {address}: {why}")

    def close(self, linger: int | None = None) -> None:
        self.gatekeeper.close()
        super().close(linger=linger)  # type: ignore[no-untyped-call]


def _read(frames: list[Any]) -> tuple[str, str, Message | None]:
    """(sender, why it is dropped, the message if it is heard) of a worker's frames."""
    if len(frames) != 2:
        return "", f"{len(frames)} frames, not 2", None
    try:
        sender = frames[0].bytes.decode()
    except UnicodeDecodeError:
        return "", "a connection id that is not text", None
    try:
        decoded = msgpack.loads(
            frames[1].bytes, raw=False, strict_map_key=False, object_hook=protocol.decode
        )
    except Exception:  # whatever bytes do to a decoder
        return sender, "not a MessagePack message", None
    why = refusal(FROM_WORKER, decoded, sender)
    return sender, why or "", None if why else _message(decoded)


def _message(decoded: Any) -> Message:
    """Locust's message from a decoded one that passed its checks."""
    return Message(*decoded)  # type: ignore[no-untyped-call]


def _peer(frame: Any) -> str:
    try:
        return str(frame.get("Peer-Address"))
    except zmq.ZMQError:
        return "an unknown address"


class WorkerSocket(zmqrpc.Client):
    """Locust's worker socket, with CURVE; a remote worker's never reconnects, hears
    through its gate and watches its handshake."""

    def __init__(self, host: str, port: int, identity: str) -> None:
        zmqrpc.BaseSocket.__init__(self, zmq.DEALER, self.ipv4_only(host, port))  # type: ignore[no-untyped-call]
        socket = self.socket
        public, private = worker_keys(_state.secret)
        socket.setsockopt(zmq.CURVE_SERVERKEY, master_public())
        socket.setsockopt(zmq.CURVE_PUBLICKEY, public)
        socket.setsockopt(zmq.CURVE_SECRETKEY, private)
        socket.setsockopt(zmq.IDENTITY, identity.encode())
        self.gate = gate = _state.gate
        self.shaken: gevent.event.Event | None = None
        if gate is not None:
            if gate.connected:  # Locust makes a new socket after a break: not with us
                gate.leave(LOST)
            gate.connected, gate.node = True, identity
            socket.setsockopt(zmq.RECONNECT_IVL, -1)
            self.shaken = gevent.event.Event()
            _watch(socket, gate, self.shaken)
        socket.connect(f"tcp://{host}:{port}")

    def send(self, msg: Message) -> None:
        """A remote worker's messages wait for the handshake's outcome (at most
        ``HANDSHAKE_WAIT_S``): when it fails the watch ends this process, in one line,
        before a send to a connection ZeroMQ already dropped fails in Locust's retries
        (a traceback on stderr, seen on a loaded machine)."""
        if self.shaken is not None:
            self.shaken.wait(HANDSHAKE_WAIT_S)
        super().send(msg)

    def recv(self) -> Message:
        while True:
            try:
                data = self.socket.recv()
            except zmq.ZMQError as exc:
                raise RPCError("ZMQ network broken") from exc
            try:
                decoded = msgpack.loads(
                    data, raw=False, strict_map_key=False, object_hook=protocol.decode
                )
            except Exception:  # whatever bytes do to a decoder
                continue
            if refusal(FROM_MASTER, decoded) is not None:
                continue
            if self.gate is None or self.gate.hears(decoded[0], decoded[1]):
                return _message(decoded)


FAILED_HANDSHAKE = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL


def _watch(socket: Any, gate: Gate, shaken: gevent.event.Event) -> None:
    """End this worker when the master refuses its key, or the handshake fails; set
    ``shaken`` when it succeeds."""
    events = zmq.EVENT_HANDSHAKE_FAILED_AUTH | FAILED_HANDSHAKE | zmq.EVENT_HANDSHAKE_SUCCEEDED
    events |= zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED
    monitor = socket.get_monitor_socket(events)

    def watch() -> None:
        while True:
            event = recv_monitor_message(monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                gate.leave(REFUSED)
            elif event & FAILED_HANDSHAKE or (
                event == zmq.EVENT_DISCONNECTED and not shaken.is_set()
            ):
                gate.leave(NO_HANDSHAKE)
            elif event == zmq.EVENT_CLOSED and not shaken.is_set():  # no master there any more
                gate.leave(LOST)
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                shaken.set()

    gevent.spawn(watch)
