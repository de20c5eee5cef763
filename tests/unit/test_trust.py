"""Who may join a run and what a worker may load, without running a swarm: the secret
and what is derived from it, the master's proofs and a worker's gate (the handshake),
the ZAP answers, the messages' checks, a worker's allowance, and the refusals to
listen or join beyond loopback without a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st
from zmq.utils import z85

from pytest_webperf import cli
from pytest_webperf.errors import OptionError
from pytest_webperf.settings.config import resolve
from pytest_webperf.settings.scaleout import remote_of
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.runner import child_environment
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.swarm.supervisor import distrust
from pytest_webperf.swarm.trust import zap
from pytest_webperf.swarm.trust.allowance import Allowance, endpoint_of
from pytest_webperf.swarm.trust.gate import Gate, spec_payload
from pytest_webperf.swarm.trust.messages import (
    BYE,
    FROM_MASTER,
    FROM_WORKER,
    HELLO,
    INTERVAL,
    LOST,
    REFUSED,
    ROLL,
    SPEC,
    UNPROVEN,
    refusal,
)
from pytest_webperf.swarm.trust.secret import (
    MIN_LENGTH,
    SECRET_ENV,
    Secret,
    new_nonce,
    prove,
    proven,
    read_secret_file,
    secret_from,
    secret_of,
    worker_key,
)

SECRET = secret_from("s" * 40, "test")
OTHER = secret_from("t" * 40, "test")
texts = st.text(min_size=MIN_LENGTH, max_size=80).filter(lambda t: len(t.strip()) >= MIN_LENGTH)


# --- the secret ---------------------------------------------------------------------------


@given(text=texts)
def test_a_secret_never_shows_its_value(text: str) -> None:
    secret = secret_from(text, "WEBPERF_SECRET")
    assert secret.value == text.strip().encode()
    for shown in (repr(secret), str(secret), repr(Remote(1, secret=secret))):
        assert text.strip() not in shown


def test_a_short_secret_is_refused_saying_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^the secret from here has 5 characters, fewer than 32"):
        secret_from(" short \n", "here")
    path = tmp_path / "secret"
    path.write_text("x" * 31 + "\n")
    with pytest.raises(ValueError, match=r"make one with python3 -c 'import secrets"):
        read_secret_file(path)
    with pytest.raises(ValueError, match=r"^cannot read the secret file '.*/absent': No such"):
        read_secret_file(tmp_path / "absent")


def test_the_file_comes_before_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("f" * 40 + "\n")  # the trailing newline of `echo` is not the secret's
    env = {SECRET_ENV: "e" * 40}
    assert secret_of(path, env) == Secret(b"f" * 40, str(path))
    assert secret_of(None, env) == Secret(b"e" * 40, SECRET_ENV)
    assert secret_of(None, {}) is None


def test_every_worker_holding_the_secret_derives_the_same_key() -> None:
    public = zmq.curve_public(z85.encode(worker_key(SECRET)))
    assert zmq.curve_public(z85.encode(worker_key(secret_from("s" * 40, "elsewhere")))) == public
    assert zmq.curve_public(z85.encode(worker_key(OTHER))) != public
    assert SECRET.value not in worker_key(SECRET)


# --- the master's proofs ------------------------------------------------------------------


words = st.text(max_size=30)
nonces = st.builds(new_nonce)


@given(node=words, nonce=nonces, payload=st.binary(max_size=200))
def test_a_proof_answers_its_challenge_only(node: str, nonce: str, payload: bytes) -> None:
    proof = prove(SECRET, "spec", node, nonce, payload=payload)
    assert proven(SECRET, "spec", node, nonce, proof, payload=payload)
    assert not proven(OTHER, "spec", node, nonce, proof, payload=payload)  # another secret
    assert not proven(SECRET, "bye", node, nonce, proof, payload=payload)  # another purpose
    assert not proven(SECRET, "spec", node + "x", nonce, proof, payload=payload)
    assert not proven(SECRET, "spec", node, new_nonce(), proof, payload=payload)
    assert not proven(SECRET, "spec", node, nonce, proof, payload=payload + b"x")
    assert SECRET.value.decode() not in proof


@given(proof=st.one_of(st.none(), st.integers(), st.text(), st.binary()))
def test_anything_but_a_proof_proves_nothing(proof: object) -> None:
    assert not proven(SECRET, "spec", "node", new_nonce(), proof)


# --- a remote worker's gate ---------------------------------------------------------------


class Left(Exception):
    """The gate ended the worker (``leave``) with this status."""


def _leave(code: int) -> NoReturn:
    raise Left(code)


def _gate(secret: Secret | None = SECRET) -> Gate:
    return Gate(secret, _leave, node="vm_1234")


SPEC_TEXT = json.dumps(SwarmSpec(host="http://10.0.0.5:8080", users=2, duration_s=1).to_dict())


def _spec_from(secret: Secret | None, gate: Gate, index: int = 1, text: str = SPEC_TEXT) -> Any:
    proof = None
    if secret is not None:
        proof = prove(secret, "spec", gate.node, gate.nonce, payload=spec_payload(index, text))
    return {"spec": text, "index": index, "proof": proof}


@given(kind=st.sampled_from(sorted(FROM_MASTER)))
def test_before_its_proof_a_master_directs_nothing(kind: str) -> None:
    gate = _gate()
    if kind in (SPEC, BYE):
        return
    assert gate.hears(kind, None) == (kind in ("ack", "heartbeat", "quit"))
    assert not gate.proven


def test_a_proven_spec_opens_the_gate_for_its_target_only() -> None:
    gate = _gate()
    assert gate.hears(SPEC, _spec_from(SECRET, gate))
    assert gate.proven and gate.target == "http://10.0.0.5:8080"
    assert gate.hears(ROLL, {"seq": 1, "final": False})
    assert gate.hears("spawn", {"host": "http://10.0.0.5:8080"})
    assert not gate.hears("spawn", {"host": "http://203.0.113.9:80"})  # not the proven one
    assert not gate.hears(SPEC, _spec_from(SECRET, gate))  # one spec per run
    with pytest.raises(Left, match=str(LOST)):
        gate.hears("reconnect", None)


@pytest.mark.parametrize(
    "forged",
    [
        lambda gate: _spec_from(OTHER, gate),  # a master with another secret
        lambda gate: _spec_from(None, gate),  # one without any
        lambda gate: {**_spec_from(SECRET, gate), "spec": SPEC_TEXT.replace("10.0.0.5", "1.2.3.4")},
        lambda gate: {**_spec_from(SECRET, gate), "index": 2},
        lambda gate: _spec_from(SECRET, Gate(SECRET, _leave, node=gate.node)),  # another nonce
        lambda gate: _spec_from(SECRET, Gate(SECRET, _leave, nonce=gate.nonce)),  # another node
    ],
)
def test_a_spec_without_the_proof_of_this_challenge_ends_the_worker(forged: Any) -> None:
    gate = _gate()
    with pytest.raises(Left, match=str(UNPROVEN)):
        gate.hears(SPEC, forged(gate))
    assert not gate.proven


def test_without_a_secret_the_first_spec_is_taken_and_a_bye_needs_no_proof() -> None:
    gate = _gate(None)
    assert gate.hears(SPEC, _spec_from(None, gate))
    assert gate.hears(BYE, None)


def test_the_end_of_the_session_is_proven_too() -> None:
    gate = _gate()
    assert gate.hears(BYE, {"proof": prove(SECRET, "bye", gate.node, gate.nonce)})
    for forged in (None, {"proof": None}, {"proof": prove(OTHER, "bye", gate.node, gate.nonce)}):
        with pytest.raises(Left, match=str(UNPROVEN)):
            _gate().hears(BYE, forged)


# --- the master's ZAP answers -------------------------------------------------------------


ADMITTED = b"k" * 32


def _request(address: bytes, mechanism: bytes, key: bytes) -> list[bytes]:
    return [b"1.0", b"7", b"webperf", address, b"", mechanism, key]


@given(frames=st.lists(st.binary(max_size=40), max_size=9))
def test_any_zap_request_is_answered(frames: list[bytes]) -> None:
    for admitted in (ADMITTED, None):
        got = zap.answer(frames, admitted)
        assert got.reply[0] == b"1.0" and len(got.reply) == 6
        assert (got.reply[2] == b"200") == (got.refused is None)


@given(key=st.binary(min_size=32, max_size=32), address=st.sampled_from([b"10.0.0.7", b""]))
def test_only_the_secret_s_key_joins(key: bytes, address: bytes) -> None:
    got = zap.answer(_request(address, b"CURVE", key), ADMITTED)
    assert (got.reply[2] == b"200") == (key == ADMITTED)
    assert got.refused in (None, address.decode() or "?")
    assert zap.answer(_request(address, b"CURVE", key), None).refused is None  # no secret
    assert zap.answer(_request(address, b"PLAIN", key), None).refused is not None
    assert zap.answer(_request(address, b"CURVE", ADMITTED), ADMITTED).reply[1] == b"7"


# --- the messages' checks -----------------------------------------------------------------


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(message=values, sender=st.one_of(st.none(), st.text(max_size=8)))
def test_no_message_makes_a_check_raise(message: Any, sender: str | None) -> None:
    for checks in (FROM_WORKER, FROM_MASTER):
        why = refusal(checks, message, sender)
        assert why is None or isinstance(why, str)


@given(kind=st.sampled_from(sorted(FROM_WORKER)), data=values)
def test_a_worker_s_message_of_any_shape_is_checked(kind: str, data: Any) -> None:
    why = refusal(FROM_WORKER, [kind, data, "w1"], "w1")
    assert why is None or "wrong shape" in why
    assert refusal(FROM_WORKER, [kind, data, "w2"], "w1") == f"{kind!r} in another worker's name"


@given(kind=st.text(min_size=41))
def test_a_stranger_s_words_are_quoted_short(kind: str) -> None:
    for sender in ("w1", "w2"):
        why = refusal(FROM_WORKER, [kind, None, "w1"], sender) or ""
        assert repr(kind[:40]) in why and kind not in why


def _interval() -> dict[str, Any]:
    """What a worker adds to its interval (``swarm/child/worker.py``)."""
    return {"seq": 3, "index": 0, "pid": 9, "host": "h", "cpus": [0], "cpu_s": 1.5, "users": 4}


WELL_FORMED = [
    ("client_ready", "2.47.0"),
    ("heartbeat", {"state": "running", "current_cpu_usage": 3.0, "current_memory_usage": 9}),
    ("stats", {"stats": [], "stats_total": {}, "errors": {}, "user_classes_count": {"U": 2}}),
    ("spawning_complete", {"user_classes_count": {"U": 2}, "user_count": 2}),
    ("exception", {"msg": "boom", "traceback": "tb"}),
    (HELLO, {"host": "vm", "pid": 12, "nonce": new_nonce()}),
    (INTERVAL, {**_interval(), **Interval().to_dict()}),
    ("quit", None),
]


@pytest.mark.parametrize(("kind", "data"), WELL_FORMED)
def test_well_formed_messages_are_heard(kind: str, data: Any) -> None:
    assert refusal(FROM_WORKER, (kind, data, "w1"), "w1") is None


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ("ready", "not a (type, data, node) message"),
        (["heartbeat", None], "not a (type, data, node) message"),
        ([b"heartbeat", None, "w1"], "not a (type, data, node) message"),
        (["heartbeat", {"state": "running"}, "w1"], "'heartbeat' with data of the wrong shape"),
        ([HELLO, {"host": "vm", "pid": 1, "nonce": "short"}, "w1"], "wrong shape"),
        ([INTERVAL, {**_interval(), "requests": "many"}, "w1"], "wrong shape"),
        ([INTERVAL, {**_interval(), **Interval().to_dict(), "requests": -1}, "w1"], "wrong shape"),
        (["update_user_class", {}, "w1"], "unknown message 'update_user_class'"),
    ],
)
def test_malformed_messages_are_dropped_saying_why(message: Any, says: str) -> None:
    assert says in (refusal(FROM_WORKER, message, "w1") or "")


# --- a worker's allowance -----------------------------------------------------------------


def _resolve(host: str) -> frozenset[str]:
    return {
        "master.example": frozenset({"10.0.0.5"}),
        "10.0.0.5": frozenset({"10.0.0.5"}),
        "10.0.0.9": frozenset({"10.0.0.9"}),
        "shop.example": frozenset({"10.0.0.9"}),
    }.get(host, frozenset())


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://10.0.0.5:41234", True),  # the master's address, any port
        ("https://master.example:443", True),  # by its name
        ("mqtt://10.0.0.5", True),
        ("http://10.0.0.9:8080", True),  # --allow-target http://10.0.0.9:8080
        ("http://10.0.0.9:8081", False),  # not that port
        ("http://shop.example:8080", False),  # the name was not allowed, its address was
        ("http://203.0.113.7:80", False),
        ("http://unresolvable.invalid:80", False),
    ],
)
def test_a_worker_loads_its_master_s_address_and_its_own_allowance(url: str, allowed: bool) -> None:
    allowance = Allowance.of("master.example", ["http://10.0.0.9:8080"])
    spec = SwarmSpec(host=url, users=1, duration_s=1)
    why = allowance.refusal(spec.endpoints, _resolve)
    assert (why is None) == allowed
    if why is not None:
        assert why.startswith(f"the run's target {endpoint_of(url)[0]}:")
        assert why.endswith("nothing was sent") and "--allow-target URL" in why


def test_an_mqtt_broker_elsewhere_is_refused() -> None:
    from pytest_webperf.mqtt.publish import MqttLoad

    spec = SwarmSpec(
        host="mqtt://10.0.0.5:1883", users=1, duration_s=1, mqtt=MqttLoad(1883, "10.0.0.66")
    )
    assert "10.0.0.66:1883" in (Allowance("10.0.0.5").refusal(spec.endpoints, _resolve) or "")


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://A.example", ("a.example", 80)),
        ("https://a.example", ("a.example", 443)),
        ("mqtts://10.0.0.9", ("10.0.0.9", 8883)),
        ("ws://[::1]:81/x", ("::1", 81)),
    ],
)
def test_an_allowed_target_is_a_host_and_port(url: str, endpoint: tuple[str, int]) -> None:
    assert endpoint_of(url) == endpoint


@given(text=st.text(max_size=40))
def test_anything_else_is_not_a_target_url(text: str) -> None:
    try:
        host, port = endpoint_of(text)
    except ValueError as exc:
        assert "is not a target URL (example: http://10.0.0.9:8080" in str(exc)
    else:
        assert host and 0 <= port < 65536


# --- beyond loopback, a secret or an explicit trust ---------------------------------------


def test_a_master_beyond_loopback_needs_a_secret(tmp_path: Path) -> None:
    bind = {"remote_workers": 2, "master_bind": "0.0.0.0:5557"}
    with pytest.raises(OptionError) as refused:
        resolve(bind, {}, {})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("the swarm's master would listen at 0.0.0.0:5557, beyond loopback")
    assert "set WEBPERF_SECRET or --webperf-secret-file=PATH" in message
    assert "--webperf-trusted-network" in message
    assert remote_of(resolve(bind, {SECRET_ENV: "e" * 40}, {}), {SECRET_ENV: "e" * 40})
    trusted = resolve({**bind, "trusted_network": True}, {}, {})
    assert remote_of(trusted, {}) == Remote(2, "0.0.0.0:5557", 60.0, trusted_network=True)
    assert remote_of(resolve({"remote_workers": 1}, {}, {}), {}) is not None  # loopback
    path = tmp_path / "secret"
    path.write_text("f" * 40)
    remote = remote_of(resolve({**bind, "secret_file": path}, {}, {}), {})
    assert remote is not None and remote.secret == Secret(b"f" * 40, str(path))


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"WEBPERF_SECRET": "short"}, "^the secret from WEBPERF_SECRET has 5 characters"),
        (
            {"WEBPERF_SECRET_FILE": "/nonexistent"},
            "^WEBPERF_SECRET_FILE: cannot read the secret file '/nonexistent'",
        ),
    ],
)
def test_a_secret_that_cannot_be_used_is_a_usage_error(env: dict[str, str], says: str) -> None:
    with pytest.raises(OptionError, match=says):
        resolve({"remote_workers": 1}, env, {})


def test_the_secret_goes_to_the_swarm_in_its_environment_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, "inherited" * 5)
    remote = Remote(1, "127.0.0.1:5557", secret=SECRET)
    assert child_environment(remote)[SECRET_ENV] == SECRET.value.decode()
    assert SECRET_ENV not in child_environment(Remote(1))  # the run has none: none inherited
    assert SECRET_ENV not in child_environment(None)
    spec = SwarmSpec(host="http://127.0.0.1:1", users=2, duration_s=1, remote=remote)
    sent = json.dumps(spec.to_dict())  # to the child's stdin, and to every remote worker
    assert SECRET.value.decode() not in sent
    assert SwarmSpec.from_dict(json.loads(sent)).remote == remote  # the rest goes over
    trusted = Remote(1, "10.0.0.5:1", trusted_network=True)
    assert Remote.from_dict(trusted.to_dict()) == trusted


# --- webperf worker -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (
            ["--master", "10.0.0.5:5557"],
            {},
            "no secret to join the master at 10.0.0.5:5557, beyond loopback: give the run's "
            "secret in WEBPERF_SECRET or --secret-file PATH, or --trusted-network",
        ),
        (["--master", "10.0.0.5:5557"], {SECRET_ENV: "short"}, "has 5 characters, fewer"),
        (
            ["--master", "127.0.0.1:5557", "--allow-target", "10.0.0.9"],
            {},
            "--allow-target '10.0.0.9' is not a target URL (example: http://10.0.0.9:8080",
        ),
        (["--master", "1.2.3.4:1", "--secret-file", "/nonexistent"], {}, "cannot read"),
    ],
)
def test_webperf_worker_refuses_to_join_unguarded_in_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    says: str,
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["worker", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("webperf worker: error: ")
    assert says in err[0]


def test_a_worker_says_why_it_will_not_serve_a_master_in_one_line() -> None:
    assert "refused this worker: its secret is not the run's" in (
        distrust("m:1", REFUSED, SECRET) or ""
    )
    assert "the run has a secret, it has none" in (distrust("m:1", REFUSED, None) or "")
    for code in (0, 3, 14, 15, LOST):
        assert distrust("m:1", code, SECRET) is None  # a run that ended, or the next one
    assert all("\n" not in (distrust("m:1", c, None) or "") for c in range(20))
