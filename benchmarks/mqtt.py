"""How fast and how cheaply do the MQTT clients publish? Our native user, our paho user
and libmosquitto's ``mosquitto_pub`` against the same broker (the catalogue's
Mosquitto), in one run, rounds interleaved.

    .venv/bin/python benchmarks/mqtt.py [--qos 0,1,2] [--clients 10] [--duration 5]
                                        [--rounds 2] [--window 1] [--out mqtt-bench.json]

Every client publishes flat out at each QoS: ``--clients`` connections (our users: one
generator process with that many users; ``mosquitto_pub``: that many processes, each
``--repeat`` messages, sized from its first round so that it runs about as long), the
next message of a connection when its last was acknowledged (``--window`` in flight
per connection: mosquitto_pub's ``-M``). Per client and QoS: messages per second
(acknowledged, over the measured phase: our users' warm-up and start-up are not in
it; mosquitto_pub's whole life is) and per generator CPU-second (user + system of the
generating processes over the same span: for our users the measured phase of the
Locust process, for mosquitto_pub each process's whole life from ``wait4``). The
broker is shared and the machine too: the load average is printed at the start and
the end. emqtt-bench is not run (it needs an Erlang/OTP build: not attempted here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_webperf.mqtt.publish import MqttLoad
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories

PAYLOAD = (
    '{"clientId":1,"seq":123456,"sentAt":1764084000.123456,'
    '"temp":31.4,"humidity":55.0,"light":12.5}'
)
CLIENTS = {"native": "mqtt-native", "paho": "mqtt"}


def ours(user: str, port: int, qos: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        spec = SwarmSpec(
            host=f"mqtt://127.0.0.1:{port}",
            users=args.clients,
            duration_s=args.duration,
            warmup_s=1.0,
            user_class=user,
            mqtt=MqttLoad(
                port=port,
                qos=qos,
                interval_s=0,
                window=args.window,
                grace_s=5,
                client_prefix=f"bench-{user}-{time.monotonic_ns()}",
                report_path=str(Path(tmp) / "report.json"),
            ),
        )
        outcome = run_swarm(spec)
        report = json.loads((Path(tmp) / "report.json").read_text())
    unacked = sum(len(u) for _, _, u in report["clients"])
    done = outcome.total.requests - outcome.total.errors
    return {
        "messages": done,
        "seconds": outcome.duration_s,
        "cpu_s": outcome.generator_cpu_s,
        "errors": outcome.total.errors + unacked,
    }


def mosquitto_pub(port: int, qos: int, n: int, args: argparse.Namespace) -> dict[str, float]:
    """``n`` messages from each of ``--clients`` processes: ``-l`` (one message per line of
    stdin, sent by libmosquitto's own thread with ``-M`` in flight), not ``--repeat``:
    without a delay that polls the socket with a zero timeout, spinning a CPU."""
    argv = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", str(qos)]
    argv += ["-M", str(args.window), "-l"]
    with tempfile.NamedTemporaryFile(suffix=".lines") as lines:
        lines.write((PAYLOAD + "\n").encode() * n)
        lines.flush()
        start = time.monotonic()
        children = []
        for i in range(args.clients):
            topic = ["-t", f"telemetry/{i + 1}", "-i", f"bench-pub-{i}-{start}"]
            with open(lines.name, "rb") as stdin:  # each its own offset
                children.append(subprocess.Popen([*argv, *topic], stdin=stdin))
        cpu, failed = 0.0, 0
        for child in children:
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            cpu += usage.ru_utime + usage.ru_stime
            failed += child.returncode != 0
    wall = time.monotonic() - start
    return {"messages": n * args.clients, "seconds": wall, "cpu_s": cpu, "errors": failed * n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qos", default="0,1,2")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    qoses = [int(q) for q in args.qos.split(",")]
    have_pub = shutil.which("mosquitto_pub") is not None
    if not have_pub:
        print("mosquitto_pub not found (Debian: mosquitto-clients): left out", file=sys.stderr)
    print(f"load average at start: {Path('/proc/loadavg').read_text().strip()}")
    results: dict[str, list[dict[str, float]]] = {}
    repeat: dict[int, int] = {}
    with start_target(Catalog(default_directories()), "mosquitto") as target:
        port = target.port
        for round_ in range(args.rounds):
            for qos in qoses:
                order = [*CLIENTS] + (["mosquitto_pub"] if have_pub else [])
                order = order[round_ % len(order) :] + order[: round_ % len(order)]
                for name in order:
                    if name == "mosquitto_pub":
                        n = repeat.get(qos, 2000)
                        got = mosquitto_pub(port, qos, n, args)
                        rate = got["messages"] / max(got["seconds"], 1e-9) / args.clients
                        repeat[qos] = max(100, int(rate * args.duration))
                    else:
                        got = ours(CLIENTS[name], port, qos, args)
                    results.setdefault(f"{name} qos{qos}", []).append(got)
                    print(f"round {round_ + 1} qos {qos} {name}: {line(got)}", flush=True)
    print(f"load average at end: {Path('/proc/loadavg').read_text().strip()}")
    print()
    print(table(results, qoses))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


def line(got: dict[str, float]) -> str:
    return (
        f"{got['messages']:.0f} messages in {got['seconds']:.1f} s, "
        f"{got['cpu_s']:.2f} CPU-s, {got['errors']:.0f} errors"
    )


def table(results: dict[str, list[dict[str, float]]], qoses: list[int]) -> str:
    rows = ["| client | QoS | messages/s | messages per generator CPU-s | vs best C client |"]
    rows.append("|---|---|---|---|---|")
    for qos in qoses:
        per_cpu: dict[str, float] = {}
        rate: dict[str, float] = {}
        for name in [*CLIENTS, "mosquitto_pub"]:
            runs = results.get(f"{name} qos{qos}")
            if not runs:
                continue
            rate[name] = statistics.median(r["messages"] / r["seconds"] for r in runs)
            per_cpu[name] = statistics.median(r["messages"] / max(r["cpu_s"], 1e-9) for r in runs)
        best_c = per_cpu.get("mosquitto_pub")
        for name, per_s in rate.items():
            ratio = f"{per_cpu[name] / best_c:.2f}x" if best_c else "-"
            rows.append(f"| {name} | {qos} | {per_s:,.0f} | {per_cpu[name]:,.0f} | {ratio} |")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
