"""What an HTTP/2 run's connections did (``Http2Figures``), as saved: streams asked and
allowed, connections opened and retired, HPACK's savings both ways, reads and writes,
the server's SETTINGS, and the flow-control windows (request bodies that waited for
the server's window, and how close the server came to waiting for ours).

Merged by sum (counts), minimum (the window's low-water mark) and maximum (the server's
limits), so an interval, a repetition and several generator processes add up alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

NO_WINDOW = -1  # min_window when no DATA frame was received


@dataclass(frozen=True)
class Http2Figures:
    """The connections' figures of an HTTP/2 run (the native loop's; the lean user's
    are those it can see through the ``h2`` package)."""

    streams: int  # asked per connection (``streams=``)
    opened: int = 0  # connections opened (TCP, then TLS, then the session)
    rotations: int = 0  # GOAWAY NO_ERROR: the server retired a connection (not a failure)
    retried: int = 0  # streams a GOAWAY refused unprocessed, re-sent on a new connection
    hd_sent_wire: int = 0  # request header blocks on the wire (HPACK), bytes
    hd_sent_decoded: int = 0  # their decoded name + value bytes
    hd_recv_wire: int = 0  # response header blocks (trailers included) on the wire
    hd_recv_decoded: int = 0
    reads: int = 0  # recv() calls that returned bytes
    writes: int = 0  # send() calls
    bytes_in: int = 0
    bytes_out: int = 0
    stalled: int = 0  # request bodies that waited for the server's flow-control window
    stall_us: int = 0  # their waits, in all
    near_closed: int = 0  # DATA frames that left the server's window below a frame
    min_window: int = NO_WINDOW  # the server's lowest send window, as we model it (bytes)
    capped: int = 0  # connections whose server allowed fewer streams than asked
    server_streams: int = 0  # the server's SETTINGS_MAX_CONCURRENT_STREAMS (the largest seen)
    server_window: int = 0  # its SETTINGS_INITIAL_WINDOW_SIZE
    server_frame: int = 0  # its SETTINGS_MAX_FRAME_SIZE

    @property
    def request_savings(self) -> float | None:
        """HPACK's saving on request headers: 1 - wire / decoded."""
        return _savings(self.hd_sent_wire, self.hd_sent_decoded)

    @property
    def response_savings(self) -> float | None:
        """HPACK's saving on response headers (nginx 1.22 never indexes them: its
        saving is the static table and Huffman only, a server property, not ours)."""
        return _savings(self.hd_recv_wire, self.hd_recv_decoded)

    @property
    def streams_allowed(self) -> int:
        """Streams each connection could carry: the asked number, or fewer where the
        server's SETTINGS said so."""
        if self.server_streams and self.server_streams < self.streams:
            return self.server_streams
        return self.streams

    def merge(self, other: Http2Figures) -> Http2Figures:
        summed = {
            f.name: getattr(self, f.name) + getattr(other, f.name)
            for f in fields(self)
            if f.name not in ("streams", "min_window", "server_streams", "server_window")
            and f.name != "server_frame"
        }
        windows = [w for w in (self.min_window, other.min_window) if w != NO_WINDOW]
        return Http2Figures(
            streams=max(self.streams, other.streams),
            min_window=min(windows) if windows else NO_WINDOW,
            server_streams=max(self.server_streams, other.server_streams),
            server_window=max(self.server_window, other.server_window),
            server_frame=max(self.server_frame, other.server_frame),
            **summed,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "request_savings": self.request_savings,
            "response_savings": self.response_savings,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Http2Figures:
        return cls(**{f.name: int(data[f.name]) for f in fields(cls) if f.name in data})


def _savings(wire: int, decoded: int) -> float | None:
    return None if decoded <= 0 else 1.0 - wire / decoded
