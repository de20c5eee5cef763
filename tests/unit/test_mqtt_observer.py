"""The observer's bookkeeping: every copy noted, unreadable payloads counted, not fatal."""

from __future__ import annotations

import json

from pytest_webperf.mqtt.observer import Observation


def _message(client: int, seq: int, sent: float) -> bytes:
    return json.dumps(
        {"clientId": client, "seq": seq, "sentAt": sent, "temp": 1, "humidity": 2, "light": 3}
    ).encode()


def test_copies_are_kept_per_client_with_repeats() -> None:
    seen = Observation()
    for body in (_message(1, 0, 10.0), _message(1, 0, 10.0), _message(2, 5, 10.0)):
        seen.note(body, 10.5)
    data = seen.to_dict()
    assert data["seqs"] == {"1": [0, 0], "2": [5]}
    assert data["received"] == 3 and data["unreadable"] == 0
    assert seen.latency.count == 3 and 490_000 < seen.latency.percentile(50) < 510_000


def test_unreadable_payloads_are_counted_not_raised() -> None:
    seen = Observation()
    for body in (
        b"{oops",
        b"",
        b"[]",
        b'{"clientId": 1}',
        b'{"clientId": "x", "seq": 1}',
        b"\xff\xfe",
    ):
        seen.note(body, 1.0)
    assert seen.received == 6 and seen.unreadable == 6 and not seen.seqs
