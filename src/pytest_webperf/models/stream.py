"""A stream repetition's result as saved (WebSocket, server-sent events): the connections,
where every message went, the handshakes, time to first event, memory per connection
(``StreamResult``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_webperf.models.samples import Latency, _known

LATENCIES = ("upgrade", "ttfe")


@dataclass(frozen=True)
class StreamResult:
    """One stream repetition beyond what every run has: its requests are the messages
    answered (echo, an idle connection's pongs), delivered (fan-out, one per subscriber)
    or the events received (SSE), in the measured phase; its latency their round trip,
    publish-to-receipt delay or the gaps between events.

    The accounting (``expected`` to ``beyond_window``) and the connections' figures cover
    the whole run, warm-up and drain included: a message lost in warm-up is still lost.
    Memory per connection: what the server (its process trees' RSS, all parts) and the
    generator held with every connection open, less what they held before, per open
    connection; the kernel's socket buffers are in neither.
    """

    kind: str  # "websocket" or "sse"
    mode: str  # "echo", "fanout", "idle" (WebSocket) or "sse"
    connections: int  # asked for (users; subscribers and publishers in a fan-out)
    open_peak: int  # the most open at once
    open_at_end: int  # open when the measured phase ended
    opens: int  # opening handshakes (upgrades, stream heads) completed
    open_failures: int  # attempts that never opened (refused, timed out, a bad answer)
    reconnects: int
    abnormal: int  # closed with a code other than 1000 (or none), without a close frame,
    # or our close unanswered in time
    server_closes: int = 0  # closed cleanly by the server during the run (not an error)
    # every failure of the whole run by kind (the opening's, before the warm-up, only here)
    failures: Mapping[str, int] = field(default_factory=dict)
    sent: int = 0  # messages sent, the whole run
    received: int = 0  # messages (events) received, the whole run
    sent_per_s: float | None = None  # the measured phase's
    received_per_s: float | None = None
    published: int = 0  # fan-out: messages the publishers sent
    subscribers: int = 0
    expected: int = 0
    delivered: int = 0
    lost: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    beyond_window: int = 0
    upgrade: Latency | None = None  # connect start -> 101 (or the stream's head)
    ttfe: Latency | None = None  # SSE: connect start -> the stream's first event
    events_per_s_min: float | None = None  # SSE: the slowest stream's rate
    events_per_s_median: float | None = None
    events_per_s_max: float | None = None
    streams_ended: int = 0  # SSE: streams the server ended (each came back after its retry)
    pings: int = 0  # the server's pings answered
    server_rss_before_mb: float | None = None
    server_rss_open_mb: float | None = None  # the measured phase's median, every part summed
    mem_per_conn: float | None = None  # server bytes per open connection
    generator_rss_before_mb: float | None = None
    generator_rss_open_mb: float | None = None
    gen_mem_per_conn: float | None = None  # generator bytes per open connection
    drain_s: float = 0.0  # waited at the end for what was still owed
    tls: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failures"] = dict(self.failures)
        for name in LATENCIES:
            value = getattr(self, name)
            data[name] = None if value is None else value.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamResult:
        known = _known(cls, data)
        for name in LATENCIES:
            if known.get(name) is not None:
                known[name] = Latency.from_dict(known[name])
        return cls(**known)
