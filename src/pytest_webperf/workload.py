"""What an HTTP swarm sends: one request shape, closed loop, paced, arriving or counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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

    def __post_init__(self) -> None:
        if self.interval_s < 0:
            raise ValueError(f"a pacing interval is >= 0 s, not {self.interval_s}")
        if self.arrival_rate < 0:
            raise ValueError(f"an arrival rate is >= 0 per second, not {self.arrival_rate}")
        if self.requests < 0:
            raise ValueError(f"a request count is >= 0, not {self.requests}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "method": self.method,
            "body": self.body.decode("latin-1"),
            "headers": [list(h) for h in self.headers],
            **({"interval_s": self.interval_s} if self.interval_s else {}),
            **({"requests": self.requests} if self.requests else {}),
            **({"arrival_rate": self.arrival_rate} if self.arrival_rate else {}),
            **({"users": self.users} if self.users else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Workload:
        return cls(
            path=str(data.get("path", "/hello")),
            method=str(data.get("method", "GET")),
            body=str(data.get("body", "")).encode("latin-1"),
            headers=tuple((str(k), str(v)) for k, v in data.get("headers", ())),
            interval_s=float(data.get("interval_s", 0.0)),
            requests=int(data.get("requests", 0)),
            arrival_rate=float(data.get("arrival_rate", 0.0)),
            users=str(data.get("users", "")),
        )


SCHEDULED = ("native", "lean")  # the users that pace and count requests


def http_workload(
    path: str,
    *,
    method: str,
    body: bytes | str,
    headers: Mapping[str, str] | None,
    user_class: str,
    workers: int,
    users: int,
    interval: str | float | None = None,
    rate: float | None = None,
    requests: int = 0,
    arrival_rate: float | None = None,
) -> Workload:
    """``webperf.http``'s arguments as a workload, or an ``OptionError`` saying why not.

    ``interval`` paces each user; ``rate`` is a total rate over the users (wrk2's
    constant throughput: each user paced at users / rate, the users a cap on the
    requests in flight); ``requests`` is ab's fixed count; ``arrival_rate`` a total rate
    of requests due whatever the responses do, each sent by whichever user is idle (k6's
    constant arrival rate: the users are the cap, their connections opened as needed).
    Pacing, arrivals and counts are the native and lean users' (``user_class`` is
    resolved: not ``auto``); a count runs in one process."""
    from pytest_webperf.config import parse_duration
    from pytest_webperf.errors import OptionError

    if arrival_rate is not None:
        given = [f"{k}=" for k, v in (("interval", interval), ("rate", rate)) if v is not None]
        if given or requests:
            raise OptionError(
                f"arrival_rate= sets when requests are due, {(given or ['requests='])[0]} too: "
                "give one of interval=, rate=, arrival_rate= and requests="
            )
        number = isinstance(arrival_rate, int | float) and not isinstance(arrival_rate, bool)
        if not number or not arrival_rate > 0:
            raise OptionError(f"arrival_rate={arrival_rate!r}: a rate is > 0 requests per second")
        if user_class not in SCHEDULED:
            raise OptionError(
                f"arrival_rate= is the native and lean users', not {user_class!r}: drop "
                "user= / --webperf-user (or give 'lean'), or drop the arrival rate"
            )

    if interval is not None and rate is not None:
        raise OptionError("interval= paces each user, rate= all of them: give one")
    interval_s = 0.0 if interval is None else parse_duration(interval)
    if interval is not None and interval_s <= 0:
        raise OptionError(f"interval={interval!r}: a pacing interval is > 0 (e.g. '500ms')")
    if rate is not None:
        if rate <= 0:
            raise OptionError(f"rate={rate!r}: a rate is > 0 requests per second")
        interval_s = users / rate
    paced = "interval=" if interval is not None else "rate="
    if interval_s and user_class not in SCHEDULED:
        raise OptionError(
            f"{paced} paces the native and lean users, not {user_class!r}: drop user= / "
            "--webperf-user, or the pacing"
        )
    if requests < 0:
        raise OptionError(f"requests={requests}: a request count is >= 0")
    if requests and (interval_s or user_class not in SCHEDULED or workers > 1):
        raise OptionError(
            f"requests={requests} (a fixed count) runs one native or lean generator process "
            "in a closed loop: not with interval= or rate=, another user or "
            "--webperf-workers > 1"
        )
    return Workload(
        path=path,
        method=method.upper(),
        body=body.encode() if isinstance(body, str) else body,
        headers=tuple((headers or {}).items()),
        interval_s=interval_s,
        requests=requests,
        arrival_rate=float(arrival_rate or 0.0),
    )


def http_name(workload: Workload, rate: float | None = None) -> str:
    """A measurement's default name: ``GET /path``, with its pacing or count; a user's
    own Locust users are named by what ran (``locustfile.py: A, B``, ``module:Class``)."""
    if workload.users:
        return workload.users
    name = f"{workload.method} {workload.path}"
    if rate is not None:
        return f"{name} at {rate:,g}/s"
    if workload.arrival_rate:
        return f"{name} arriving {workload.arrival_rate:,g}/s"
    if workload.interval_s:
        return f"{name} every {workload.interval_s * 1000:g}ms"
    return f"{name} x{workload.requests:,}" if workload.requests else name
