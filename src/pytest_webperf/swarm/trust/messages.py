"""What the master and its workers say to each other, and the shape each message must
have to be heard (``swarm/child/channel.py`` checks every message before a handler
sees it: Locust's own handlers index into what they get, and one bad message would
end the master's listener). Also how a remote worker process's run ended (its exit
status, read by ``webperf worker``).

Beside Locust's own messages (``client_ready``, ``heartbeat``, ``stats``, ``spawn`` ...),
ours (``swarm/child/master.py`` says what each does): a remote worker's ``HELLO``
carries its challenge; the master's ``SPEC`` and ``BYE`` carry their proofs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.trust.secret import NONCE

ROLL = "webperf_roll"
INTERVAL = "webperf_interval"
HALT = "webperf_halt"
HALTED = "webperf_halted"
READY = "webperf_ready"
HELLO = "webperf_hello"
SPEC = "webperf_spec"
BYE = "webperf_bye"  # the session is over: a remote worker's supervisor exits
FAILED = "webperf_failed"  # a worker's users could not start, or it refused the spec
OPEN = "webperf_open"  # a worker's connections have all tried to open (stream users)
GO = "webperf_go"  # every worker's have: the publishers start

# how a remote worker process ended (``webperf worker`` reads it)
RUN_DONE = 0  # the master said quit
NO_SPEC = 3  # no spec came in time
SESSION_OVER = 10  # the master said the session is over
REFUSED = 11  # the master refused this worker (another secret, or none)
UNPROVEN = 12  # the master could not prove it holds the secret
NO_HANDSHAKE = 13  # the master does not complete the secured handshake
TARGET_REFUSED = 14  # this worker refused the spec's target
LOST = 15  # the connection to the proven master was lost

Check = Callable[[Any], bool]


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _str(value: Any) -> bool:
    return isinstance(value, str)


def _none(value: Any) -> bool:
    return value is None


def _anything(value: Any) -> bool:
    return True


def _nonce(value: Any) -> bool:
    return isinstance(value, str) and NONCE.fullmatch(value) is not None


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


def _counts(value: Any) -> bool:
    return isinstance(value, dict) and all(_str(k) and _int(v) for k, v in value.items())


def _either(*checks: Check) -> Check:
    return lambda value: any(check(value) for check in checks)


def _dict(optional: Mapping[str, Check] | None = None, **required: Check) -> Check:
    """A dict with every ``required`` key, and each key of ``optional`` it has, as said."""

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        if any(key not in value or not ok(value[key]) for key, ok in required.items()):
            return False
        return all(ok(value[key]) for key, ok in (optional or {}).items() if key in value)

    return check


def _interval(value: Any) -> bool:
    shape = _dict(
        seq=_int, index=_int, pid=_int, host=_str, cpus=_list_of(_int), cpu_s=_number, users=_int
    )
    if not shape(value):
        return False
    try:
        interval = Interval.from_dict(value)
    except Exception:  # any way a dict can fail to be an interval
        return False
    return interval.requests >= 0 and interval.errors >= 0


FROM_WORKER: dict[str, Check] = {
    "client_ready": _either(_str, lambda v: v == -1),  # Locust's version
    "heartbeat": _dict({"current_memory_usage": _number}, state=_str, current_cpu_usage=_number),
    "stats": _dict(
        stats=_list_of(lambda v: isinstance(v, dict)),
        stats_total=lambda v: isinstance(v, dict),
        errors=lambda v: isinstance(v, dict),
        user_classes_count=_counts,
    ),
    "spawning": _none,
    "spawning_complete": _dict(user_classes_count=_counts, user_count=_int),
    "client_stopped": _none,
    "quit": _none,
    "exception": _dict(msg=_str, traceback=_str),
    "logs": _dict(worker_id=_str, logs=_list_of(_str)),
    HELLO: _dict(host=_str, pid=_int, nonce=_nonce),
    READY: _dict(index=_int, pid=_int),
    INTERVAL: _interval,
    HALTED: _either(_none, _dict(ledger=_either(_none, lambda v: isinstance(v, dict)))),
    FAILED: _dict(message=_str),
    OPEN: _none,
}

FROM_MASTER: dict[str, Check] = {
    "ack": _either(_none, _dict(index=_int)),
    "heartbeat": _none,
    "spawn": _dict(
        timestamp=_number,
        user_classes_count=_counts,
        host=_str,
        stop_timeout=_either(_none, _number),
        parsed_options=lambda v: isinstance(v, dict),
    ),
    "spawning_complete": _dict(user_count=_int),
    "stop": _none,
    "quit": _none,
    "reconnect": _none,
    SPEC: _dict(spec=_str, index=_int, proof=_either(_none, _str)),
    BYE: _either(_none, _dict(proof=_either(_none, _str))),
    ROLL: _dict(seq=_int, final=lambda v: isinstance(v, bool)),
    HALT: _none,
    GO: _none,
}


def refusal(checks: Mapping[str, Check], message: Any, sender: str | None = None) -> str | None:
    """Why a decoded message (``(type, data, node_id)``) is not heard, or None if it is.
    ``sender``: the id the connection it came on is known by (the master's side: a
    worker may speak for itself only)."""
    if not isinstance(message, list | tuple) or len(message) != 3:
        return "not a (type, data, node) message"
    kind, data, node = message
    if not isinstance(kind, str) or not isinstance(node, str | None):
        return "not a (type, data, node) message"
    named = repr(kind[:40])  # a stranger's text: quoted, and short
    if sender is not None and node != sender:
        return f"{named} in another worker's name"
    check = checks.get(kind)
    if check is None:
        return f"unknown message {named}"
    if not check(data):
        return f"{named} with data of the wrong shape"
    return None
