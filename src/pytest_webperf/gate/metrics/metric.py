"""One thing a check can look at (``Metric``): its unit, the direction that is bad, how
repetitions combine, its per-second series and per-endpoint reading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pytest_webperf.gate.metrics.readings import (
    NOT_RECORDED,
    Combine,
    Direction,
    _endpoint_latency,
    _latency,
    _snapshot_latency,
    requests_exposure,
)
from pytest_webperf.models.endpoints import EndpointResult
from pytest_webperf.models.measurement import RunResult


@dataclass(frozen=True)
class Metric:
    """One thing a check can look at.

    ``per_run`` gives the value of one repetition (None: not measured); ``series``
    its per-second values (for the within-run spread); ``combine`` says how the
    repetitions make the value an absolute limit is held against. ``count`` metrics
    are event counts compared as rates per request. ``throughput`` metrics measure
    the generator when it is the bottleneck. ``load_sensitive`` metrics (throughput and
    latency) move when other processes take the machine's CPU, so a relative check on
    them is not judged when either run was contended; service demand is not affected.
    """

    name: str
    unit: str
    bad: Direction
    per_run: Callable[[RunResult], float | None] = field(compare=False)
    series: Callable[[RunResult], list[float]] | None = field(default=None, compare=False)
    combine: Combine = "mean"
    count: bool = False
    throughput: bool = False
    load_sensitive: bool = False  # moves when other processes take the CPU (rps, latency)
    aliases: tuple[str, ...] = ()  # the first one is how absolute limits are written
    exposure: Callable[[RunResult], float] = field(default=requests_exposure, compare=False)
    # the same figure read from one endpoint of a request mix (``RunResult.endpoints``);
    # None: it cannot be split by endpoint, and ``whole_run_only`` says why
    per_endpoint: Callable[[EndpointResult], float | None] | None = field(
        default=None, compare=False
    )
    whole_run_only: str = NOT_RECORDED
    endpoint: str | None = None  # set on the copy ``for_endpoint`` makes
    events: str = "requests"  # what a count metric's exposure counts
    # counted figures (count=True): changes and what a run could detect shown to 0.01 %;
    # a figure that may be 0 (no allocation, no system call): 0 -> more is judged as such
    precise: bool = False
    may_be_zero: bool = False
    counted: bool = False  # read from a counted repetition's callgrind window (or beside it)
    # a counted figure whose fresh processes of the same code sit on levels of their
    # runtime's allocator (``estimates.LEVELS``): an A/B pair's interval is no narrower
    levelled: bool = False

    @property
    def limit_name(self) -> str:
        return self.aliases[0] if self.aliases else self.name

    @property
    def label(self) -> str:
        """How verdicts name the figure: ``p95``, or ``p95[create]`` for an endpoint."""
        return self.name if self.endpoint is None else f"{self.name}[{self.endpoint}]"

    def for_endpoint(self, endpoint: str) -> Metric:
        """The metric read from ``run.endpoints[endpoint]`` of every repetition (None
        where a repetition has no such endpoint); counts are rates per request of that
        endpoint. Endpoints have no per-second series, so no within-run spread."""
        read = self.per_endpoint
        if read is None:
            raise ValueError(f"{self.name} cannot be split by endpoint: {self.whole_run_only}")

        def per_run(run: RunResult) -> float | None:
            found = run.endpoints.get(endpoint)
            return None if found is None else read(found)

        def exposure(run: RunResult) -> float:
            found = run.endpoints.get(endpoint)
            return 0.0 if found is None else float(found.requests)

        return replace(self, per_run=per_run, series=None, exposure=exposure, endpoint=endpoint)


def _latency_metric(name: str, figure: str, *, per_second: bool = False) -> Metric:
    """A latency figure (a percentile or the mean, ``figure`` of ``Latency``): the run's,
    each endpoint's, and per second where the generator's snapshots carry it."""
    return Metric(
        name,
        "ms",
        "up",
        _latency(figure),
        _snapshot_latency(figure) if per_second else None,
        aliases=(figure,),
        load_sensitive=True,
        per_endpoint=_endpoint_latency(figure),
    )
