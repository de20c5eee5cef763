"""How fast are our load generators? wrk, k6, Locust's FastHttpUser, lean and native, side by side.

    .venv/bin/python benchmarks/generator.py [--duration 8] [--connections 100] [--path /hello]
        [--rounds 3] [--processes 1,2] [--generators wrk,k6,fast,lean,native,native+r]
        [--c10k 10000] [--c10k-user native]
    .venv/bin/python benchmarks/generator.py --generators wrk@https,native@https,lean@https

Starts the catalogue's nginx (host network, 127.0.0.1), then runs the generators
in interleaved rounds (round 1: each generator at each process count, round 2 the
same, ...) with the same connections and duration against the same container, and
prints every run, then per generator the median req/s, the generator's CPU seconds
and requests per generator CPU-second, and ratios to wrk taken round by round (the
machine is shared: a ratio from one round compares runs seconds apart).
``lean+r`` / ``native+r``: 1 local + 1 remote worker (a ``webperf worker`` process
started here, joining the master on loopback as another machine's would), in the
2-process rows. With ``--c10k N``, after the rounds: ``--c10k-user`` at N
connections with 2 local processes and with 1 local + 1 remote.

HTTPS rows: a generator named ``NAME@https`` (``wrk@https``, ``native@https``,
``lean@https``, ``fast@https``) loads the catalogue's nginx-tls instead (started beside
nginx, the same routes over TLS with keep-alive, its certificate not verified), in the
same rounds; its ratio is to ``wrk@https``. ``--close``: every generator sends
``Connection: close`` (wrk with ``-H``, the swarms as ``webperf.http(keepalive=False)``),
a new connection per request; over HTTPS the swarms then resume the last TLS session
(``tls_resume=True``) as wrk does (it keeps the session across reconnects), unless
``--full-handshakes``.

HTTP/2 and gRPC rows: ``h2load@h2`` and ``native@h2`` load the catalogue's nginx-h2 (h2 by
ALPN over TLS; ``@h2c``: nginx-h2c, prior knowledge), ``--connections`` / ``--streams``
connections of ``--streams`` streams each (the same requests in flight as the HTTP/1.1
rows); ``h2load@grpc``, ``ghz@grpc`` and ``native@grpc`` call the catalogue's grpc-go
(``/webperf.Catalogue/Echo`` with a 7-byte message) the same way (h2load's gRPC-shaped
POST counts HTTP 200 as success whatever grpc-status says; ghz with ``--connections``
and as many workers as streams in flight). Ratios are to h2load in the same group, and
native@grpc also to ghz. h2load comes from Debian's ``nghttp2-client`` (apt-get when
missing, as root); ghz is built from Go's module proxy as k6 is. The HTTP/2 table in
docs/explanation/figures.md is
``--generators h2load@h2,native@h2,h2load@grpc,ghz@grpc,native@grpc`` with every other
option at its default.

Generator CPU: for the swarms, each process's own user+system time over the
measured phase (the child reports it per process: master and workers included);
for wrk and k6, the rusage of the finished child. wrk comes from the Debian package
``wrk`` (installed with apt-get when missing and running as root); k6 is built once
from Go's module proxy (``go install go.k6.io/k6``) into ~/.cache/webperf/bin. A
generator that cannot be had here is skipped with a note.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.fixture.grpc import grpc_request
from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.swarm.trust.secret import SECRET_ENV, secret_from
from pytest_webperf.targets import start_target
from pytest_webperf.targets.catalog import Catalog, default_directories

HTTPS = "@https"  # a generator's HTTPS row: the same generator against nginx-tls
# HTTP/2 and gRPC rows: the group's server, and the generator the group is compared with
GROUPS = {"@h2": "nginx-h2", "@h2c": "nginx-h2c", "@grpc": "grpc-go"}
GRPC_METHOD = "/webperf.Catalogue/Echo"
GRPC_MESSAGE = b"\x0a\x05hello"  # google.protobuf.BytesValue{value: "hello"}
PROTO = Path(__file__).resolve().parents[1] / "servers" / "grpc-go" / "catalogue.proto"


def group_of(name: str) -> str:
    """A row's group: "" (HTTP/1.1 against nginx), "@https", "@h2", "@h2c" or "@grpc"."""
    return next((g for g in (HTTPS, *GROUPS) if name.endswith(g)), "")


def reference_of(name: str) -> str:
    """The generator a row is compared with: wrk over HTTP/1.1, h2load over HTTP/2."""
    group = group_of(name)
    return ("h2load" if group in GROUPS else "wrk") + group


@dataclass(frozen=True)
class Row:
    generator: str
    processes: int
    requests: int
    errors: int
    seconds: float
    cpu_s: float
    p99_ms: float | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def per_cpu(self) -> float:
        return self.requests / self.cpu_s if self.cpu_s else 0.0


def quietly(*command: str) -> int:
    return subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False
    ).returncode


def ensure_wrk() -> str | None:
    found = shutil.which("wrk")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    print("installing wrk (apt-get install -y wrk) ...", flush=True)
    if quietly("apt-get", "install", "-y", "wrk"):
        quietly("apt-get", "update")
        quietly("apt-get", "install", "-y", "wrk")
    return shutil.which("wrk")


def run_child(command: list[str], timeout_s: float) -> tuple[str, float]:
    """A generator run as a child process: its output and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=timeout_s)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout + done.stderr, cpu


def run_wrk(
    wrk: str, url: str, threads: int, connections: int, seconds: float, *, close: bool = False
) -> Row:
    command = [wrk, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s", url]
    if close:  # wrk's only way to a new connection per request
        command[1:1] = ["-H", "Connection: close"]
    out, cpu = run_child(command, seconds + 60)
    match = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    if match is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    requests = int(match.group(1))
    took = float(match.group(2)) / (1000 if match.group(3) == "ms" else 1)
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), "
        r"timeout (\d+)",
        out,
    )
    if socket_errors:
        errors += sum(int(n) for n in socket_errors.groups())
    return Row("wrk", threads, requests, errors, took, cpu)


K6_DIR = Path.home() / ".cache" / "webperf" / "bin"
K6_SCRIPT = """
import http from 'k6/http';
export const options = {discardResponseBodies: true};
export default function () { http.get(__ENV.URL); }
"""


def ensure_k6() -> str | None:
    found = shutil.which("k6") or (str(K6_DIR / "k6") if (K6_DIR / "k6").exists() else None)
    if found or not shutil.which("go"):
        return found
    print("building k6 (go install go.k6.io/k6@latest, a few minutes) ...", flush=True)
    env = {**os.environ, "GOBIN": str(K6_DIR)}
    K6_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "install", "go.k6.io/k6@latest"],
        env=env,
        timeout=1800,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    return str(K6_DIR / "k6") if (K6_DIR / "k6").exists() else None


def run_k6(k6: str, url: str, connections: int, seconds: float) -> Row:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "get.js")
        script.write_text(K6_SCRIPT)
        vus, duration = f"--vus={connections}", f"--duration={int(seconds)}s"
        command = [k6, "run", "--quiet", "--no-color", vus, duration, "-e", f"URL={url}"]
        out, cpu = run_child([*command, str(script)], seconds + 120)
    match = re.search(r"http_reqs\.*:\s*(\d+)", out)
    if match is None:
        raise RuntimeError(f"unexpected k6 output:\n{out}")
    failed = re.search(r"http_req_failed\.*:\s*[\d.]+%\s+(\d+) out of", out)
    # k6 reports its whole run (about `seconds`); its CPU includes start-up (~0.1 s)
    return Row("k6", 1, int(match.group(1)), int(failed.group(1)) if failed else 0, seconds, cpu)


def ensure_h2load() -> str | None:
    found = shutil.which("h2load")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    print("installing h2load (apt-get install -y nghttp2-client) ...", flush=True)
    if quietly("apt-get", "install", "-y", "nghttp2-client"):
        quietly("apt-get", "update")
        quietly("apt-get", "install", "-y", "nghttp2-client")
    return shutil.which("h2load")


def run_h2load(
    h2load: str, url: str, threads: int, *, connections: int, streams: int, seconds: float
) -> Row:
    """h2load for ``seconds`` (no warm-up: its CPU, the rusage of the whole child, then
    covers the requests it counts); a ``/pkg.Svc/M`` URL gets gRPC's shape: the framed
    message as the body, its content type, te."""
    command = [h2load, f"-t{threads}", f"-c{connections}", f"-m{streams}", f"-D{int(seconds)}"]
    with tempfile.TemporaryDirectory() as tmp:
        if "/webperf.Catalogue/" in url:
            body = Path(tmp, "message.framed")
            body.write_bytes(b"\x00" + len(GRPC_MESSAGE).to_bytes(4, "big") + GRPC_MESSAGE)
            command += ["-d", str(body), "-H", "content-type: application/grpc"]
            command += ["-H", "te: trailers"]
        out, cpu = run_child([*command, url], seconds + 60)
    took = re.search(r"finished in ([\d.]+)(m?s)", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if took is None or done is None:
        raise RuntimeError(f"unexpected h2load output:\n{out}")
    seconds_taken = float(took.group(1)) / (1000 if took.group(2) == "ms" else 1)
    requests, succeeded = int(done.group(1)), int(done.group(2))
    return Row("h2load", threads, requests, requests - succeeded, seconds_taken, cpu)


def ensure_ghz() -> str | None:
    found = shutil.which("ghz") or (str(K6_DIR / "ghz") if (K6_DIR / "ghz").exists() else None)
    if found or not shutil.which("go"):
        return found
    print("building ghz (go install github.com/bojand/ghz/cmd/ghz@latest) ...", flush=True)
    K6_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "install", "github.com/bojand/ghz/cmd/ghz@latest"],
        env={**os.environ, "GOBIN": str(K6_DIR)},
        timeout=1800,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    return str(K6_DIR / "ghz") if (K6_DIR / "ghz").exists() else None


def run_ghz(ghz: str, address: str, connections: int, streams: int, seconds: float) -> Row:
    """ghz on the Echo method, ``connections`` x ``streams`` workers in flight, JSON out.
    It cancels what is in flight at the end of -z: those count as errors (up to -c)."""
    with tempfile.TemporaryDirectory() as tmp:
        message = Path(tmp, "message.bin")
        message.write_bytes(GRPC_MESSAGE)
        command = [ghz, "--insecure", "--proto", str(PROTO), "--import-paths", str(PROTO.parent)]
        command += ["--call", GRPC_METHOD.strip("/"), "--binary", "--binary-file", str(message)]
        command += [f"-c{connections * streams}", f"--connections={connections}"]
        command += [f"-z{int(seconds)}s", "-O", "json", address]
        out, cpu = run_child(command, seconds + 120)
    report = json.loads(out[out.index("{") :])
    codes = report.get("statusCodeDistribution") or {}
    errors = sum(int(n) for code, n in codes.items() if code != "OK")
    return Row("ghz", 1, int(report["count"]), errors, report["total"] / 1e9, cpu)


def run_generator(
    user: str,
    url: str,
    workers: int,
    *,
    connections: int,
    seconds: float,
    path: str,
    remote: Remote | None = None,
    close: bool = False,
    resume: bool = False,
    workload: Workload | None = None,
) -> Row:
    headers = (("Connection", "close"),) if close else ()
    outcome = run_swarm(
        SwarmSpec(
            host=url,
            users=connections,
            duration_s=seconds,
            warmup_s=1.0,
            user_class=user,
            workers=workers,
            workload=workload or Workload(path=path, headers=headers),
            remote=remote,
            tls_resume=resume and url.startswith("https://"),
        )
    )
    h = outcome.histogram
    return Row(
        user if remote is None else f"{user}+r",
        workers + (remote.workers if remote is not None else 0),
        outcome.total.requests,
        outcome.total.errors,
        outcome.duration_s,
        outcome.generator_cpu_s,
        h.percentile(99) / 1000 if h.count else None,
    )


@contextlib.contextmanager
def remote_worker() -> Iterator[Remote]:
    """A ``webperf worker`` process (not a child of any swarm) on a free loopback port.

    In a session of its own, as on another machine it would be: with Linux's autogroups
    that makes it a scheduling group of its own, which takes a larger share of the
    cores from the server than a second local worker does (docs/explanation/figures.md)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    command = [sys.executable, "-m", "pytest_webperf.cli", "worker", "--master", address]
    secret = secrets.token_hex(32)  # the channel as it runs between machines: secured
    worker = subprocess.Popen(
        [*command, "--idle-exit", "60s"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, SECRET_ENV: secret},
    )
    try:
        yield Remote(1, address, 60.0, secret=secret_from(secret, "the benchmark"))
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def remote_row(
    user: str, url: str, remote: bool, connections: int, args: argparse.Namespace
) -> Row:
    """``user`` on 2 generator processes: 1 local + a remote worker (``user+r``), or
    without ``remote`` 2 local ones. The worker starts with its row and ends with it
    (one started with the benchmark would give up, idle, while other rows run)."""
    if not remote:
        return run_generator(
            user, url, 2, connections=connections, seconds=args.duration, path=args.path
        )
    with remote_worker() as worker:
        return run_generator(
            user,
            url,
            1,
            connections=connections,
            seconds=args.duration,
            path=args.path,
            remote=worker,
        )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def table(rows: list[Row]) -> str:
    lines = [
        f"{'generator':<12} {'procs':>5} {'req/s':>9} {'errors':>7} {'p99 ms':>7} "
        f"{'gen CPU s':>9} {'req/CPU-s':>10}"
    ]
    for r in rows:
        p99 = f"{r.p99_ms:7.2f}" if r.p99_ms is not None else f"{'-':>7}"
        lines.append(
            f"{r.generator:<12} {r.processes:>5} {r.rps:>9,.0f} {r.errors:>7} {p99} "
            f"{r.cpu_s:>9.2f} {r.per_cpu:>10,.0f}"
        )
    return "\n".join(lines)


def medians(rounds: list[list[Row]]) -> list[Row]:
    """Per generator and process count: the run with the median req per CPU-second."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for round_ in rounds:
        for row in round_:
            groups.setdefault((row.generator, row.processes), []).append(row)
    out = []
    for runs in groups.values():
        runs.sort(key=lambda r: r.per_cpu)
        out.append(runs[(len(runs) - 1) // 2])
    return out


def ratios(rounds: list[list[Row]]) -> list[str]:
    """Each generator against its group's reference (wrk, h2load) at the same process
    count, round by round; native@grpc against ghz too (ghz runs as one process, its
    goroutines on every core: compared with each process count)."""
    pairs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for round_ in rounds:
        by = {(r.generator, r.processes): r for r in round_}
        for (name, procs), row in by.items():
            references = [reference_of(name)]
            if name == "native@grpc":
                references.append("ghz@grpc")
            for reference in references:
                other = by.get((reference, procs)) or by.get((reference, 1))
                if name == reference or other is None or not other.rps or not other.per_cpu:
                    continue
                pairs.setdefault((name, reference, procs), []).append(
                    (row.rps / other.rps, row.per_cpu / other.per_cpu)
                )
    out = []
    for (name, reference, procs), values in pairs.items():
        rps = ", ".join(f"{a:.2f}" for a, _ in values)
        cpu = ", ".join(f"{b:.2f}" for _, b in values)
        median = statistics.median(b for _, b in values)
        out.append(
            f"{name:<7} / {reference}, {procs} process(es): req/s {rps}; "
            f"req per CPU-second {cpu} (median {median:.2f})"
        )
    return out


def run_one(
    name: str,
    procs: int,
    base: str,
    args: argparse.Namespace,
    *,
    wrk: str | None,
    k6: str | None,
    https: str | None = None,
    tools: dict[str, str | None] | None = None,
    servers: dict[str, str] | None = None,
) -> Row | None:
    """One run of generator ``name`` at ``procs`` processes (None: not here, or not at
    that count: k6 and ghz are one process; ``X+r`` is 1 local + 1 remote, the 2-process
    row; ``X@https``: X against nginx-tls at ``https``; ``X@h2``, ``X@h2c``, ``X@grpc``:
    X over HTTP/2 against the group's server in ``servers``)."""
    group = group_of(name)
    if group in GROUPS:
        url = (servers or {}).get(group)
        return None if url is None else run_h2(name, procs, url, args, tools or {})
    if name.endswith(HTTPS):
        if https is None:
            return None
        row = run_one(name.removesuffix(HTTPS), procs, https, args, wrk=wrk, k6=k6)
        return None if row is None else dataclasses.replace(row, generator=name)
    url = base + args.path
    if name == "wrk" and wrk is not None:
        return run_wrk(wrk, url, procs, args.connections, args.duration, close=args.close)
    if name == "k6" and k6 is not None and procs == 1:
        return run_k6(k6, url, args.connections, args.duration)
    if name in ("fast", "lean", "native"):
        return run_generator(
            name,
            base,
            procs,
            connections=args.connections,
            seconds=args.duration,
            path=args.path,
            close=args.close,
            resume=args.close and not args.full_handshakes,
        )
    if name in ("lean+r", "native+r") and procs == 2:
        return remote_row(name.removesuffix("+r"), base, True, args.connections, args)
    return None


def run_h2(
    name: str, procs: int, url: str, args: argparse.Namespace, tools: dict[str, str | None]
) -> Row | None:
    """An HTTP/2 or gRPC row: ``connections / streams`` connections of ``streams``."""
    generator, group = name.split("@")
    streams = args.streams
    connections = max(1, args.connections // streams)
    grpc = group == "grpc"
    path = GRPC_METHOD if grpc else args.path
    h2load, ghz = tools.get("h2load"), tools.get("ghz")
    row: Row | None = None
    if generator == "h2load" and h2load is not None:
        row = run_h2load(
            h2load,
            url + path,
            procs,
            connections=connections,
            streams=streams,
            seconds=args.duration,
        )
    elif generator == "ghz" and ghz is not None and grpc and procs == 1:
        address = url.split("://", 1)[1]
        row = run_ghz(ghz, address, connections, streams, args.duration)
    elif generator in ("native", "lean"):
        entries = (grpc_request(GRPC_METHOD, message=GRPC_MESSAGE),) if grpc else ()
        workload = Workload(path=path, mix=entries, http2=True, streams=streams)
        row = run_generator(
            generator,
            url,
            procs,
            connections=connections,
            seconds=args.duration,
            path=path,
            workload=workload,
        )
    return None if row is None else dataclasses.replace(row, generator=name)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--path", default="/hello")
    parser.add_argument("--processes", default="1,2", help="generator processes to try")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--generators", default="wrk,k6,fast,lean,native,native+r")
    parser.add_argument(
        "--streams",
        type=int,
        default=10,
        help="HTTP/2 and gRPC rows: streams per connection (connections: --connections / this)",
    )
    parser.add_argument("--c10k", type=int, default=0, help="also at this many connections")
    parser.add_argument("--c10k-user", default="native", help="the HTTP user at --c10k")
    parser.add_argument(
        "--close",
        action="store_true",
        help="every request says Connection: close: a new connection (and TLS handshake) each",
    )
    parser.add_argument(
        "--full-handshakes",
        action="store_true",
        help="with --close: the swarms do not resume TLS sessions (wrk always does)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = [int(n) for n in args.processes.split(",")]
    wanted = args.generators.split(",")
    plain = [name.split("@")[0] for name in wanted]
    wrk = ensure_wrk() if "wrk" in plain else None
    k6 = ensure_k6() if "k6" in plain else None
    tools = {
        "h2load": ensure_h2load() if "h2load" in plain else None,
        "ghz": ensure_ghz() if "ghz" in plain else None,
    }
    for name, found in (("wrk", wrk), ("k6", k6), *tools.items()):
        if name in plain and found is None:
            print(
                f"{name} not found and not buildable here: continuing without it", file=sys.stderr
            )
    rounds: list[list[Row]] = []
    print(load(), flush=True)
    started = time.monotonic()
    catalog = Catalog(default_directories())
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(start_target(catalog, "nginx"))
        https = None
        if any(name.endswith(HTTPS) for name in wanted):
            https = stack.enter_context(start_target(catalog, "nginx-tls")).url
        servers = {
            group: stack.enter_context(start_target(catalog, server)).url
            for group, server in GROUPS.items()
            if any(group_of(name) == group for name in wanted)
        }
        for group, url in servers.items():
            print(f"{GROUPS[group]} at {url} for the {group} rows", flush=True)
        print(
            f"nginx at {target.url}{f' and nginx-tls at {https}' if https else ''}, "
            f"{args.connections} connections, {args.duration:.0f} s "
            f"per run, GET {args.path}, {args.rounds} interleaved rounds",
            flush=True,
        )
        for number in range(1, args.rounds + 1):
            round_: list[Row] = []
            for procs in counts:
                for name in wanted:
                    row = run_one(
                        name,
                        procs,
                        target.url,
                        args,
                        wrk=wrk,
                        k6=k6,
                        https=https,
                        tools=tools,
                        servers=servers,
                    )
                    if row is not None:
                        round_.append(row)
                        print(f"round {number}: " + table([row]).splitlines()[1], flush=True)
            rounds.append(round_)
        big: list[Row] = []
        if args.c10k:
            print(f"{args.c10k_user} at {args.c10k:,} connections:", flush=True)
            for spare in (False, True):
                big.append(remote_row(args.c10k_user, target.url, spare, args.c10k, args))
                print(table(big[-1:]).splitlines()[1], flush=True)
    print("\nmedian run per generator (by req per CPU-second):")
    print(table(medians(rounds)))
    if big:
        print(f"\n{args.c10k_user} at {args.c10k:,} connections\n{table(big)}")
    print()
    for line in ratios(rounds):
        print(line)
    print(f"\n{load()}; took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
