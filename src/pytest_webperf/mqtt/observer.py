"""The observer: a subscriber in its own process that notes every message the broker delivers.

``python -m pytest_webperf.mqtt.observer --port P --topic 'telemetry/#' --out F``

It subscribes (QoS 2 by default, clean session), rewrites ``F.status`` about twice a
second (``subscribed``, ``received``, ``last_rx``) so the parent can wait for it and see
delivery drain, and on SIGTERM or SIGINT writes ``F``: per client the sequence numbers
received (repeats kept: they are the duplicates), the end-to-end latency histogram
(receive time minus the message's ``sentAt``), and how many payloads it could not read.
Bounded by ``--max-seconds`` whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import time
from typing import Any

from paho.mqtt.client import Client, MQTTMessage, MQTTv311
from paho.mqtt.enums import CallbackAPIVersion

from pytest_webperf.stats.histogram import Histogram


class Observation:
    """What the observer saw; plain data, written as JSON."""

    def __init__(self) -> None:
        self.seqs: dict[int, list[int]] = {}
        self.latency = Histogram()
        self.received = 0
        self.unreadable = 0
        self.last_rx = 0.0

    def note(self, body: bytes | bytearray, now: float) -> None:
        self.received += 1
        self.last_rx = now
        try:
            message = json.loads(body)
            client, seq = int(message["clientId"]), int(message["seq"])
            sent = float(message["sentAt"])
        except (ValueError, KeyError, TypeError):
            self.unreadable += 1
            return
        self.seqs.setdefault(client, []).append(seq)
        self.latency.record(max(0, int((now - sent) * 1e6)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "unreadable": self.unreadable,
            "last_rx": self.last_rx,
            "seqs": {str(k): v for k, v in self.seqs.items()},
            "latency": self.latency.to_dict(),
        }


def write_json(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as out:
        json.dump(data, out)
    os.replace(tmp, path)


def observe(args: argparse.Namespace) -> Observation:
    seen = Observation()
    subscribed = False
    stop = False

    def on_connect(client: Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if not reason.is_failure:
            client.subscribe(args.topic, qos=args.qos)

    def on_subscribe(*_: Any) -> None:
        nonlocal subscribed
        subscribed = True

    def on_message(_c: Client, _u: Any, message: MQTTMessage) -> None:
        seen.note(message.payload, time.time())

    def on_signal(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    client = Client(
        CallbackAPIVersion.VERSION2,
        client_id=args.client_id,
        clean_session=True,
        protocol=MQTTv311,
        transport="websockets" if args.websocket else "tcp",
    )
    if args.websocket:
        client.ws_set_options(path=args.websocket)
    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    if args.tls:  # mqtts:// (unverified: the catalogue's broker makes its certificate at start)
        client.tls_set(cert_reqs=ssl.CERT_NONE)
        client.tls_insecure_set(True)
    client.connect(args.host, args.port, keepalive=60)
    deadline = time.monotonic() + args.max_seconds
    next_status = 0.0
    while not stop and time.monotonic() < deadline:
        client.loop(timeout=0.1)
        if time.monotonic() >= next_status:
            write_json(
                f"{args.out}.status",
                {"subscribed": subscribed, "received": seen.received, "last_rx": seen.last_rx},
            )
            next_status = time.monotonic() + 0.5
    client.disconnect()
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_webperf.mqtt.observer")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--topic", default="telemetry/#")
    parser.add_argument("--qos", type=int, default=2, choices=(0, 1, 2))
    parser.add_argument("--client-id", default=f"webperf-observer-{os.getpid()}")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--tls", action="store_true", help="mqtts: TLS to the broker")
    parser.add_argument("--websocket", default="", help="ws: the broker's WebSocket path")
    args = parser.parse_args(argv)
    write_json(args.out, observe(args).to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
