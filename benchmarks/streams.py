"""How cheap is the native stream loop? WebSocket messages per generator CPU-second, ours
against k6's two WebSocket clients, on the same server in the same run; and the memory
an idle connection costs the generator.

    .venv/bin/python benchmarks/streams.py [--server go-streams] [--rounds 3]
        [--connections 50] [--duration 8] [--size 64] [--clients native,k6/websockets,k6/ws]
        [--idle 10000]

Starts the catalogue's ``--server`` (host network, 127.0.0.1), then runs the clients in
interleaved rounds (native, k6/websockets, k6/ws, then again), each a closed echo loop of
``--connections`` connections sending ``--size``-byte text messages to ``/ws`` for
``--duration`` seconds. Per run: messages answered, the generator's CPU seconds, the
server's CPU per message (its process tree over the client's whole run, psutil: about
the same for every client means each offered it the same work). The figure compared is
messages per generator CPU-second, and its ratio to k6's round by round (the machine is
shared).

- native: ``webperf.websocket``'s swarm (a Locust process, its native stream loop), no
  warm-up: messages and CPU over the measured phase, as ``benchmarks/generator.py``
  counts the HTTP users (the connections open before it);
- k6: built once from Go's module proxy (``benchmarks/generator.py``'s ``ensure_k6``),
  ``k6 run`` of a script with one VU per connection in the same closed loop (the next
  message when the echo arrives); messages ``ws_msgs_received``, CPU the child's
  rusage (its start-up, about 0.15 s, included: its whole run is ``--duration``).

``--idle N``: afterwards, N idle WebSocket connections held by the bare loop (a process
of its own, no Locust) and by the swarm (a Locust user each): the generator's resident
memory per connection, each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
from generator import ensure_k6, load, run_child

from pytest_webperf.longlived.load import StreamLoad
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.streamloop import message_template
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories

K6_SCRIPTS = {
    # the event API: each VU one connection, the next message when the echo arrives
    "k6/websockets": """
        import { WebSocket } from 'k6/websockets';
        import { setTimeout } from 'k6/timers';
        const payload = 'x'.repeat(Number(__ENV.SIZE));
        export const options = {
          scenarios: { echo: { executor: 'per-vu-iterations', vus: Number(__ENV.CONNS),
                               iterations: 1, maxDuration: '5m' } },
        };
        export default function () {
          const ws = new WebSocket(__ENV.URL);
          ws.onopen = () => { ws.send(payload); setTimeout(() => ws.close(), __ENV.MS); };
          ws.onmessage = () => ws.send(payload);
        }
        export function handleSummary(data) { return { [__ENV.OUT]: JSON.stringify(data) }; }
    """,
    # the older blocking API: one connect per VU
    "k6/ws": """
        import ws from 'k6/ws';
        const payload = 'x'.repeat(Number(__ENV.SIZE));
        export const options = {
          scenarios: { echo: { executor: 'per-vu-iterations', vus: Number(__ENV.CONNS),
                               iterations: 1, maxDuration: '5m' } },
        };
        export default function () {
          ws.connect(__ENV.URL, null, (socket) => {
            socket.on('open', () => socket.send(payload));
            socket.on('message', () => socket.send(payload));
            socket.setTimeout(() => socket.close(), Number(__ENV.MS));
          });
        }
        export function handleSummary(data) { return { [__ENV.OUT]: JSON.stringify(data) }; }
    """,
}


@dataclass(frozen=True)
class Row:
    client: str
    messages: int
    errors: int
    seconds: float
    cpu_s: float
    server_us_per_message: float | None = None

    @property
    def per_cpu(self) -> float:
        return self.messages / self.cpu_s if self.cpu_s > 0 else 0.0


def run_native(url: str, args: argparse.Namespace) -> Row:
    load_ = StreamLoad(path="/ws", message=message_template(args.size, False))
    outcome = run_swarm(
        SwarmSpec(
            host=url,
            users=args.connections,
            duration_s=args.duration,
            user_class="websocket",
            stream=load_,
        )
    )
    total = outcome.total
    return Row(
        "native",
        total.requests - total.errors,
        total.errors,
        outcome.duration_s,
        outcome.generator_cpu_s,
    )


def run_k6(k6: str, client: str, url: str, args: argparse.Namespace) -> Row:
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp, "echo.js"), Path(tmp, "summary.json")
        script.write_text(textwrap.dedent(K6_SCRIPTS[client]))
        env = {
            "URL": url.replace("http://", "ws://") + "/ws",
            "CONNS": str(args.connections),
            "SIZE": str(args.size),
            "MS": str(int(args.duration * 1000)),
            "OUT": str(out),
        }
        command = [k6, "run", "--quiet", "--no-color", "--no-usage-report"]
        for name, value in env.items():
            command += ["-e", f"{name}={value}"]
        _, cpu = run_child([*command, str(script)], args.duration + 120)
        metrics = json.loads(out.read_text())["metrics"]
    received = int(metrics["ws_msgs_received"]["values"]["count"])
    errors = int(metrics.get("ws_errors", {}).get("values", {}).get("count", 0))
    return Row(client, received, errors, args.duration, cpu)


def tree_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            pass
    return total


BARE = """
import sys, time
from pytest_webperf.swarm.child.stream import resident_kib
from pytest_webperf.swarm.engine import NativeEngine
from pytest_webperf.swarm.streamloop import IDLE, WebSocket, request_tail

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
session = WebSocket(paths={IDLE: "/ws"}, tail=request_tail(f"{host}:{port}"))
loop = NativeEngine(host, port, session)
before = resident_kib()
for i in range(n):
    loop.add(ident=i, role=IDLE)
deadline = time.monotonic() + 120
while loop.state()["open"] < n and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(1)
opened = loop.state()["open"]
print(opened, before, resident_kib())
loop.finish()
"""


def idle_memory(url: str, connections: int) -> list[str]:
    """The generator's bytes per idle connection: the bare loop, then the swarm."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    done = subprocess.run(
        [sys.executable, "-c", BARE, host, port, str(connections)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    opened, before, after = (int(x) for x in done.stdout.split())
    each = (after - before) * 1024 / max(opened, 1)
    lines = [
        f"bare loop: {opened:,} of {connections:,} open, {each:,.0f} bytes per connection "
        f"(RSS {before:,} -> {after:,} KiB)"
    ]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "ledger.json")
        run_swarm(
            SwarmSpec(
                host=url,
                users=connections,
                duration_s=2,
                user_class="websocket",
                stream=StreamLoad(path="/ws", ping_s=5, report_path=str(report)),
            )
        )
        ledger = json.loads(report.read_text())
    open_ = int(ledger["open_at_end"])
    per = (ledger["rss_open_kib"] - ledger["rss_before_kib"]) * 1024 / max(open_, 1)
    lines.append(
        f"swarm (a Locust user each): {open_:,} of {connections:,} open, {per:,.0f} bytes per "
        f"connection (RSS {ledger['rss_before_kib']:,} -> {ledger['rss_open_kib']:,} KiB)"
    )
    return lines


def table(rows: list[Row]) -> str:
    lines = [
        f"{'client':<14} {'msg/s':>9} {'errors':>6} {'gen CPU s':>9} {'msg/CPU-s':>10} "
        f"{'server µs/msg':>13}"
    ]
    for r in rows:
        server = f"{r.server_us_per_message:13.2f}" if r.server_us_per_message else f"{'-':>13}"
        lines.append(
            f"{r.client:<14} {r.messages / r.seconds:>9,.0f} {r.errors:>6} {r.cpu_s:>9.2f} "
            f"{r.per_cpu:>10,.0f} {server}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="go-streams", help="a catalogue stream server")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--size", type=int, default=64, help="bytes per message (>= 40)")
    parser.add_argument("--clients", default="native,k6/websockets,k6/ws")
    parser.add_argument("--idle", type=int, default=0, help="then this many idle connections")
    args = parser.parse_args(argv)
    clients = args.clients.split(",")
    k6 = ensure_k6() if any(c.startswith("k6") for c in clients) else None
    if k6 is None:
        clients = [c for c in clients if not c.startswith("k6")]
        print("k6 not found and not buildable here: continuing without it", file=sys.stderr)
    else:
        version = subprocess.run([k6, "version"], capture_output=True, text=True, check=False)
        print(version.stdout.strip(), flush=True)
    print(time.strftime("started %Y-%m-%dT%H:%M:%SZ", time.gmtime()), load(), flush=True)
    rounds: list[list[Row]] = []
    with start_target(Catalog(default_directories()), args.server) as target:
        pids = list(target.parts().values())
        print(
            f"{args.server} at {target.url}: {args.connections} connections, "
            f"{args.size}-byte messages, {args.duration:g} s per run, {args.rounds} rounds",
            flush=True,
        )
        for number in range(1, args.rounds + 1):
            round_ = []
            for client in clients:
                before = tree_cpu(pids)
                row = (
                    run_native(target.url, args)
                    if client == "native"
                    else run_k6(str(k6), client, target.url, args)
                )
                spent = tree_cpu(pids) - before  # the whole run's, warm-up included
                row = replace(row, server_us_per_message=spent / max(row.messages, 1) * 1e6)
                round_.append(row)
                print(f"round {number}: " + table([row]).splitlines()[1], flush=True)
            rounds.append(round_)
        idle = idle_memory(target.url, args.idle) if args.idle else []
    print(time.strftime("ended %Y-%m-%dT%H:%M:%SZ", time.gmtime()), load())
    medians = []
    for client in clients:
        runs = sorted(
            (r for round_ in rounds for r in round_ if r.client == client), key=lambda r: r.per_cpu
        )
        medians.append(runs[(len(runs) - 1) // 2])
    print("median of each client (by messages per CPU-second):")
    print(table(medians))
    for client in clients:
        if client == "native":
            continue
        ratios = [
            next(r for r in round_ if r.client == "native").per_cpu
            / next(r for r in round_ if r.client == client).per_cpu
            for round_ in rounds
        ]
        text = ", ".join(f"{x:.2f}" for x in ratios)
        median = statistics.median(ratios)
        print(f"native / {client}, messages per CPU-second: {text} (median {median:.2f})")
    for line in idle:
        print(line)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
