"""One endpoint's figures in a repetition (EndpointResult, as saved) and their summary over
the repetitions of a measurement (EndpointSummary)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from pytest_webperf.models.samples import Latency
from pytest_webperf.stats.histogram import Histogram


class Counted:
    """What a repetition (``RunResult``) and each of its endpoints count alike over the
    measured phase: requests, failed ones, bytes, latency (and its histogram), the error
    kinds with one example each; their rates, and their part of the saved dict."""

    requests: int  # completed requests, failed ones included
    errors: int
    bytes: int
    duration_s: float
    latency: Latency
    histogram: Histogram
    error_kinds: Mapping[str, int]
    error_examples: Mapping[str, str]

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def counts_to_dict(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s,
            "rps": self.rps,
            "requests": self.requests,
            "errors": self.errors,
            "error_kinds": dict(self.error_kinds),
            "error_examples": dict(self.error_examples),
            "bytes": self.bytes,
            "latency": self.latency.to_dict(),
            "histogram": self.histogram.to_dict(),
        }

    @staticmethod
    def counts_from_dict(data: Mapping[str, Any]) -> dict[str, Any]:
        """The counted fields of a saved dict, as keyword arguments."""
        return {
            "requests": int(data["requests"]),
            "errors": int(data.get("errors", 0)),
            "bytes": int(data.get("bytes", 0)),
            "duration_s": float(data["duration_s"]),
            "latency": Latency.from_dict(data["latency"]),
            "histogram": Histogram.from_dict(data.get("histogram", {})),
            "error_kinds": {str(k): int(v) for k, v in data.get("error_kinds", {}).items()},
            "error_examples": {str(k): str(v) for k, v in data.get("error_examples", {}).items()},
        }


@dataclass(frozen=True)
class EndpointResult(Counted):
    """One endpoint of a request mix (or one request name of a user's own Locust users)
    in one repetition: what its requests did, over the repetition's measured phase.

    The run's own figures (``RunResult.requests``, ``latency``, ...) are the sum over
    its endpoints; server CPU is the run's alone (it cannot be split by request)."""

    name: str  # the entry's name (default: its path), or the name Locust recorded
    method: str
    requests: int  # completed requests, failed ones included
    errors: int
    bytes: int
    duration_s: float  # the repetition's measured phase (the same for every endpoint)
    latency: Latency
    histogram: Histogram = field(repr=False, compare=False, default_factory=Histogram)
    error_kinds: Mapping[str, int] = field(default_factory=dict)
    error_examples: Mapping[str, str] = field(default_factory=dict)
    weight: float | None = None  # the share asked of a mix entry (weights normalised), if any

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            **self.counts_to_dict(),
            "weight": self.weight,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointResult:
        return cls(
            name=str(data["name"]),
            method=str(data.get("method", "GET")),
            **cls.counts_from_dict(data),
            weight=None if data.get("weight") is None else float(data["weight"]),
        )


@dataclass(frozen=True)
class EndpointSummary:
    """One endpoint over all repetitions of a measurement (``Measurement.endpoints``):
    what a report shows in the endpoint's row. Latency figures are means over the
    repetitions in which the endpoint completed a request (as the run's own are)."""

    name: str
    method: str
    requests: int  # summed over repetitions, failed ones included
    errors: int
    rps: float  # mean over repetitions (0 for a repetition that did not send it)
    share: float  # its requests / the requests of every endpoint
    weight: float | None  # the share asked of the mix (normalised), if any
    latency: Latency | None  # None when no request of it completed

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": self.error_rate,
            "rps": self.rps,
            "share": self.share,
            "weight": self.weight,
            "latency": None if self.latency is None else self.latency.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointSummary:
        latency = data.get("latency")
        return cls(
            name=str(data["name"]),
            method=str(data.get("method", "GET")),
            requests=int(data["requests"]),
            errors=int(data.get("errors", 0)),
            rps=float(data["rps"]),
            share=float(data.get("share", 0.0)),
            weight=None if data.get("weight") is None else float(data["weight"]),
            latency=None if latency is None else Latency.from_dict(latency),
        )


class WithEndpoints(Protocol):
    """What ``endpoint_summaries`` reads of a repetition (``measurement.RunResult``)."""

    @property
    def endpoints(self) -> Mapping[str, EndpointResult]: ...


def endpoint_summaries(runs: Sequence[WithEndpoints]) -> dict[str, EndpointSummary]:
    """Each endpoint of ``runs`` (in the order first sent) over all of them; empty when
    the runs sent a single request shape."""
    names = list(dict.fromkeys(name for run in runs for name in run.endpoints))
    total = sum(e.requests for run in runs for e in run.endpoints.values())
    found: dict[str, EndpointSummary] = {}
    for name in names:
        mine = [run.endpoints[name] for run in runs if name in run.endpoints]
        requests = sum(e.requests for e in mine)
        timed = [e.latency for e in mine if e.requests]
        latency = None
        if timed:
            latency = Latency(
                **{
                    f.name: sum(float(getattr(t, f.name)) for t in timed) / len(timed)
                    for f in fields(Latency)
                }
            )
        weights = [e.weight for e in mine if e.weight is not None]
        found[name] = EndpointSummary(
            name=name,
            method=mine[0].method,
            requests=requests,
            errors=sum(e.errors for e in mine),
            rps=sum(e.rps for e in mine) / len(runs),
            share=requests / total if total else 0.0,
            weight=weights[0] if weights else None,
            latency=latency,
        )
    return found
