"""One stream measurement (WebSocket, server-sent events): connections opened before the
warm-up, messages timed and accounted, memory per open connection.

    target = webperf.process(["node", "server.js"])
    m = webperf.websocket(target, "/ws", message=b"hi")   # echo: round trips
    run = m.runs[0].stream   # StreamResult: accounting, handshakes, memory per connection

``StreamMessages`` is a ``loop.LoadKind``: its repetitions go through the same loop as
HTTP's and MQTT's (placement, the generator-bound rule, a target that dies). Per
repetition: the server's memory is read before anything connects; the swarm opens every
connection (the warm-up starts once each has tried), sends, and at its end drains what
is owed, closes every connection and writes its ledger; the round then accounts every
message (``longlived/accounting.py``) and divides the memory the open connections took.
Lost messages are failed messages: they are added to the run's requests and errors
(``ws_lost``, ``sse_lost``), so ``errors == 0`` and the error-rate limit keep their
meaning.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_webperf.errors import OptionError, SwarmError
from pytest_webperf.longlived.accounting import (
    Tally,
    per_connection,
    spread,
    tally,
    window_rates,
)
from pytest_webperf.longlived.load import SSE, WEBSOCKET, StreamLoad
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.models.stream import StreamResult
from pytest_webperf.models.workload import Workload
from pytest_webperf.sampling.resources import rss_plateau_mb
from pytest_webperf.sampling.tree import rss_now_mb
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.base import Target

MB = 1024 * 1024
LOST_KIND = {WEBSOCKET: "ws_lost", SSE: "sse_lost"}


@dataclass(frozen=True)
class StreamMessages:
    """Long-lived connections as a ``loop.LoadKind``: every user one connection of the
    native stream loop doing what ``load`` says (its report path set per round)."""

    load: StreamLoad
    fresh = False  # rounds run on the target's instances (restarted as the plan says)

    @property
    def user_class(self) -> str:
        return self.load.kind  # the swarm's user class: websocket or sse

    @property
    def name(self) -> str:
        load = self.load
        if load.mode == "fanout":
            return f"WS fan-out {load.subscribe_path or load.path}"
        if load.mode == "sse":
            return f"SSE {load.path}"
        pace = f" every {load.interval_s * 1000:g}ms" if load.interval_s else ""
        return f"WS {load.mode} {load.path}{pace}"

    @property
    def workload(self) -> Workload:
        method = "SSE" if self.load.kind == SSE else f"WS-{self.load.mode.upper()}"
        return Workload(path=self.load.path, method=method, interval_s=self.load.interval_s)

    def check(self, target: Target) -> None:
        if not target.url.startswith(("http://", "https://")):
            raise OptionError(
                f"webperf.{self.load.kind}(): {target.name} serves {target.url}, not HTTP: "
                "a WebSocket opens with an HTTP upgrade, a stream with an HTTP GET"
            )

    @contextmanager
    def round(self, target: Target, plan: RunPlan, repetition: int) -> Iterator[StreamRound]:
        before = rss_now_mb(dict(target.parts()))  # before anything connects
        with tempfile.TemporaryDirectory(prefix="webperf-stream-") as tmp:
            load = replace(
                self.load,
                report_path=str(Path(tmp) / "ledger.json"),
                tls=target.url.startswith("https://"),
            )
            spec = plan.swarm(target.url, user_class=load.kind, stream=load)
            yield StreamRound(spec, load, before)


@dataclass(frozen=True)
class StreamRound:
    """One stream repetition: after the swarm, account every message and the memory."""

    spec: SwarmSpec
    load: StreamLoad
    server_rss_before_mb: float | None

    def account(self, result: RunResult) -> RunResult:
        try:
            ledger = json.loads(Path(self.load.report_path).read_text())
        except (OSError, ValueError):
            raise SwarmError(
                f"the {self.load.kind} swarm left no ledger: its connections' accounting "
                "is unknown (the generator's log says why)"
            ) from None
        counted = tally(ledger)
        stream = stream_result(self.load, ledger, counted, result, self.server_rss_before_mb)
        return with_losses(replace(result, stream=stream), self.load.kind, counted)


def with_losses(result: RunResult, kind: str, counted: Tally) -> RunResult:
    """Lost messages as failed ones: in the run's requests and errors, their kind named."""
    if not counted.lost:
        return result
    name = LOST_KIND[kind]
    what = "events (by id)" if kind == SSE else "messages"
    example = (
        f"{counted.lost:,} of {counted.expected:,} {what} never arrived (counted over the "
        "whole run, warm-up and drain included)"
    )
    return replace(
        result,
        requests=result.requests + counted.lost,
        errors=result.errors + counted.lost,
        error_kinds={**result.error_kinds, name: counted.lost},
        error_examples={**result.error_examples, name: example},
    )


def _latency(data: Mapping[str, Any]) -> Latency | None:
    histogram = Histogram.from_dict(data)
    return Latency.of(histogram) if histogram.count else None


def stream_result(
    load: StreamLoad,
    ledger: Mapping[str, Any],
    counted: Tally,
    result: RunResult,
    server_before_mb: float | None,
) -> StreamResult:
    """The run's ``StreamResult`` from the merged ledger, the accounting and the
    server's samples (memory per connection: before, and the measured phase's median)."""
    open_at_end = int(ledger.get("open_at_end", 0))
    server_open = rss_plateau_mb(result.resources)
    mem = None
    if server_before_mb is not None and server_open is not None:
        mem = per_connection(server_before_mb * 1024, server_open * 1024, open_at_end)
    gen_before, gen_open = int(ledger.get("rss_before_kib", 0)), int(ledger.get("rss_open_kib", 0))
    sent_per_s, received_per_s = window_rates(ledger.get("rolls", ()), result.duration_s)
    rates = spread([float(r) for r in ledger.get("rates", ())])
    return StreamResult(
        kind=load.kind,
        mode=load.mode,
        connections=int(ledger.get("connections", 0)) or result.concurrency,
        open_peak=int(ledger.get("open_peak", 0)),
        open_at_end=open_at_end,
        opens=int(ledger.get("opens", 0)),
        open_failures=int(ledger.get("open_failures", 0)),
        reconnects=int(ledger.get("reconnects", 0)),
        abnormal=int(ledger.get("abnormal", 0)),
        server_closes=int(ledger.get("server_closes", 0)),
        failures={str(k): int(v) for k, v in ledger.get("failures", {}).items()},
        sent=int(ledger.get("sent", 0)),
        received=int(ledger.get("received", 0)),
        sent_per_s=sent_per_s if load.mode in ("echo", "fanout") else None,
        received_per_s=received_per_s,
        published=sum(int(n) for _, n in ledger.get("published", ())),
        subscribers=len(ledger.get("subscribers", ())),
        expected=counted.expected,
        delivered=counted.delivered,
        lost=counted.lost,
        duplicates=counted.duplicates,
        out_of_order=counted.out_of_order,
        beyond_window=counted.beyond_window,
        upgrade=_latency(ledger.get("upgrade", {})),
        ttfe=_latency(ledger.get("ttfe", {})),
        events_per_s_min=rates[0] if rates else None,
        events_per_s_median=rates[1] if rates else None,
        events_per_s_max=rates[2] if rates else None,
        streams_ended=int(ledger.get("streams_ended", 0)),
        pings=int(ledger.get("pings", 0)),
        server_rss_before_mb=server_before_mb,
        server_rss_open_mb=server_open,
        mem_per_conn=mem,
        generator_rss_before_mb=gen_before / 1024 if gen_before else None,
        generator_rss_open_mb=gen_open / 1024 if gen_open else None,
        gen_mem_per_conn=per_connection(gen_before, gen_open, open_at_end),
        drain_s=float(ledger.get("drain_s", 0.0)),
        tls=load.tls,
    )
