"""What an HTTP swarm sends: one request shape or a weighted mix of them (``Request``),
each with what its response must be to count (``expect_status``, ``expect_body``: its
expectations); closed loop, paced, arriving or counted; over HTTP/1.1 or HTTP/2
(streams per connection), a unary gRPC call being an HTTP/2 request."""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

BodyExpectation = bytes | re.Pattern[str] | re.Pattern[bytes]  # a substring, or a regex searched


@dataclass(frozen=True)
class Request:
    """One entry of a request mix (``webperf.request``): a request shape, its share of
    the mix (``weight``), the name its figures are kept under, and what a response must
    be to count as a success (else ``unexpected_status``/``unexpected_body``)."""

    path: str
    method: str = "GET"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    weight: float = 1.0
    name: str = ""  # "": the path
    expect_status: frozenset[int] | None = None  # None: any status below 400
    expect_body: BodyExpectation | None = None
    # a unary gRPC call (``webperf.grpc``): ``path`` is its method, ``body`` the framed
    # message; a success is HTTP 200, grpc-status 0 and one response message
    grpc: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.path)

    def accepts(self, status: int) -> bool:
        """Whether ``status`` counts as a success (before the body check)."""
        return status < 400 if self.expect_status is None else status in self.expect_status

    def body_matches(self, body: bytes) -> bool:
        check = self.expect_body
        if check is None:
            return True
        if isinstance(check, bytes):
            return check in body
        if isinstance(check.pattern, bytes):
            return check.search(body) is not None
        return check.search(body.decode("utf-8", "replace")) is not None

    @property
    def regex(self) -> bool:
        """Whether the body check is a regular expression (the lean user checks it)."""
        return self.expect_body is not None and not isinstance(self.expect_body, bytes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "method": self.method,
            "body": self.body.decode("latin-1"),
            "headers": [list(h) for h in self.headers],
            "weight": self.weight,
            "name": self.name,
            **_expect_to_dict(self.expect_status, self.expect_body),
            **({"grpc": True} if self.grpc else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Request:
        status, body = _expect_from_dict(data)
        return cls(
            path=str(data["path"]),
            method=str(data.get("method", "GET")),
            body=str(data.get("body", "")).encode("latin-1"),
            headers=tuple((str(k), str(v)) for k, v in data.get("headers", ())),
            weight=float(data.get("weight", 1.0)),
            name=str(data.get("name") or data["path"]),
            expect_status=status,
            expect_body=body,
            grpc=bool(data.get("grpc", False)),
        )


def _expect_to_dict(status: frozenset[int] | None, body: BodyExpectation | None) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if status is not None:
        data["expect_status"] = sorted(status)
    if isinstance(body, bytes):
        data["expect_body"] = body.decode("latin-1")
    elif body is not None:
        raw = body.pattern
        binary = isinstance(raw, bytes)
        pattern = raw.decode("latin-1") if isinstance(raw, bytes) else raw
        data["expect_body_regex"] = {"pattern": pattern, "flags": body.flags, "bytes": binary}
    return data


def _expect_from_dict(
    data: Mapping[str, Any],
) -> tuple[frozenset[int] | None, BodyExpectation | None]:
    status = data.get("expect_status")
    body: BodyExpectation | None = None
    if data.get("expect_body") is not None:
        body = str(data["expect_body"]).encode("latin-1")
    elif data.get("expect_body_regex"):
        regex = data["expect_body_regex"]
        pattern, flags = str(regex["pattern"]), int(regex.get("flags", 0))
        if regex.get("bytes"):
            body = re.compile(pattern.encode("latin-1"), flags)
        else:
            body = re.compile(pattern, flags)
    return (None if status is None else frozenset(int(s) for s in status)), body


class WeightedChoice:
    """Picks items by weight: cumulative weights, one ``random()`` and a bisection."""

    __slots__ = ("cumulative", "items", "total")

    def __init__(self, items: Sequence[Any], weights: Sequence[float]) -> None:
        if not items or len(items) != len(weights) or not all(w > 0 for w in weights):
            raise ValueError("a weighted choice needs items with weights > 0")
        self.items = list(items)
        self.cumulative: list[float] = []
        running = 0.0
        for weight in weights:
            running += weight
            self.cumulative.append(running)
        self.total = running

    def pick(self, uniform: Callable[[], float] = random.random) -> Any:
        index = bisect.bisect_right(self.cumulative, uniform() * self.total)
        return self.items[min(index, len(self.items) - 1)]


def interleaved(weights: Sequence[float], count: int) -> tuple[int, ...]:
    """``count`` indices of ``weights``' entries in a fixed order by weight (Balinski and
    Young's quota method, exact in fractions): after any first k, entry i has been taken
    within one of its share, k * w_i / sum(w), so a counted mix sends every endpoint its
    share in every stretch of its window, and the same weights give the same order on
    both sides of a comparison. Among the entries still under their upper quota, the one
    whose next request is least ahead of its weight (lowest index on a tie)."""
    exact = [Fraction(w) for w in weights]
    if not exact or any(w <= 0 for w in exact):
        raise ValueError("a sequence by weight needs entries with weights > 0")
    total = sum(exact)
    taken = [0] * len(exact)
    order = []
    for k in range(1, count + 1):
        # the upper quota after this request: ceil(k * w / total)
        open_ = [i for i, w in enumerate(exact) if taken[i] < -(-k * w // total)]
        pick = min(open_, key=lambda i: ((taken[i] + 1) / exact[i], i))
        taken[pick] += 1
        order.append(pick)
    return tuple(order)


class InOrder(WeightedChoice):
    """Picks items in a fixed order (``interleaved``'s), cycled: an ordered mix's pick,
    where a ``WeightedChoice`` would pick at random."""

    __slots__ = ("at", "order")

    def __init__(self, items: Sequence[Any], order: Sequence[int]) -> None:
        if not order:
            raise ValueError("an order needs one index at least")
        super().__init__(items, [1.0] * len(items))
        self.order, self.at = list(order), 0

    def pick(self, uniform: Callable[[], float] = random.random) -> Any:
        item = self.items[self.order[self.at]]
        self.at = (self.at + 1) % len(self.order)
        return item


@dataclass(frozen=True)
class Workload:
    """What the swarm does: one HTTP request shape, in a closed loop or, with
    ``interval_s``, paced (each user sends one request every ``interval_s``)."""

    path: str = "/hello"
    method: str = "GET"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    interval_s: float = 0.0  # 0: closed loop (the next request when the last is answered)
    requests: int = 0  # > 0: exactly this many requests, then stop (ab's -n); 0: for a time
    # > 0: this many requests per second in total, due whatever the responses do, each
    # taken by an idle user (k6's constant arrival rate; the users are the cap)
    arrival_rate: float = 0.0
    # a user's own Locust users ran instead of the request shape above (what ran: the
    # locustfile and its classes, or module:Class); "" for webperf's own users
    users: str = ""
    # a request mix: each request picks one of these by weight (path, method, body and
    # headers above are then unused); empty: the one request shape above
    mix: tuple[Request, ...] = ()
    expect_status: frozenset[int] | None = None  # the one shape's checks (a mix: each entry's)
    expect_body: BodyExpectation | None = field(default=None)
    # HTTP/2 (h2 over TLS, h2c otherwise): each user one connection with ``streams``
    # requests in flight (``concurrency`` x ``streams`` in all); False: HTTP/1.1
    http2: bool = False
    streams: int = 1
    grpc: bool = False  # the one shape is a unary gRPC call (a mix: each entry says)
    # a mix sent as its fixed sequence by weight (``interleaved``), not picked at random:
    # a counted measurement's, the same requests in the same order on both sides
    ordered: bool = False

    def entries(self) -> tuple[Request, ...]:
        """What the users send: the mix, or the one request shape as a mix of one."""
        if self.mix:
            return self.mix
        return (
            Request(
                self.path,
                self.method,
                self.body,
                self.headers,
                expect_status=self.expect_status,
                expect_body=self.expect_body,
                grpc=self.grpc,
            ),
        )

    def weights(self) -> dict[tuple[str, str], float]:
        """A mix's entries, (method, name) -> share of the requests asked (empty: no mix)."""
        total = sum(r.weight for r in self.mix)
        return {(r.method, r.name): r.weight / total for r in self.mix}

    def sequence(self, count: int) -> tuple[int, ...]:
        """The entries of the first ``count`` requests of an ordered mix, by index."""
        return interleaved([e.weight for e in self.entries()], count)

    def sent(self, count: int) -> dict[tuple[str, str], int]:
        """How many of the first ``count`` requests of an ordered mix each entry (method,
        name) gets."""
        entries = self.entries()
        found = dict.fromkeys(((e.method, e.name) for e in entries), 0)
        for index in self.sequence(count):
            found[(entries[index].method, entries[index].name)] += 1
        return found

    @property
    def regex(self) -> bool:
        """Whether a body check is a regular expression (checked by the lean user only)."""
        return any(r.regex for r in self.entries())

    @property
    def in_flight(self) -> int:
        """Requests in flight per user: its streams over HTTP/2, else one."""
        return self.streams if self.http2 else 1

    def __post_init__(self) -> None:
        if self.interval_s < 0:
            raise ValueError(f"a pacing interval is >= 0 s, not {self.interval_s}")
        if self.arrival_rate < 0:
            raise ValueError(f"an arrival rate is >= 0 per second, not {self.arrival_rate}")
        if self.requests < 0:
            raise ValueError(f"a request count is >= 0, not {self.requests}")
        if self.streams < 1 or (self.streams > 1 and not self.http2):
            raise ValueError(f"streams per connection: 1, or more over HTTP/2, not {self.streams}")

    def to_dict(self) -> dict[str, Any]:
        shape: dict[str, Any] = (
            {"mix": [r.to_dict() for r in self.mix]}
            if self.mix
            else {
                "path": self.path,
                "method": self.method,
                "body": self.body.decode("latin-1"),
                "headers": [list(h) for h in self.headers],
                **_expect_to_dict(self.expect_status, self.expect_body),
                **({"grpc": True} if self.grpc else {}),
            }
        )
        return {
            **shape,
            **({"interval_s": self.interval_s} if self.interval_s else {}),
            **({"requests": self.requests} if self.requests else {}),
            **({"arrival_rate": self.arrival_rate} if self.arrival_rate else {}),
            **({"users": self.users} if self.users else {}),
            **({"http2": True, "streams": self.streams} if self.http2 else {}),
            **({"ordered": True} if self.ordered else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Workload:
        status, body = _expect_from_dict(data)
        return cls(
            path=str(data.get("path", "/hello")),
            method=str(data.get("method", "GET")),
            body=str(data.get("body", "")).encode("latin-1"),
            headers=tuple((str(k), str(v)) for k, v in data.get("headers", ())),
            interval_s=float(data.get("interval_s", 0.0)),
            requests=int(data.get("requests", 0)),
            arrival_rate=float(data.get("arrival_rate", 0.0)),
            users=str(data.get("users", "")),
            mix=tuple(Request.from_dict(r) for r in data.get("mix") or ()),
            expect_status=status,
            expect_body=body,
            http2=bool(data.get("http2", False)),
            streams=int(data.get("streams", 1)),
            grpc=bool(data.get("grpc", False)),
            ordered=bool(data.get("ordered", False)),
        )


# A counted repetition (requests=N) that finished sooner than this measured connection
# set-up and warm-up more than the server: it gets a note, and a study line says so.
MIN_COUNTED_S = 5.0
SCHEDULED = ("native", "lean")  # the users that pace and count requests
