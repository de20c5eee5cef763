"""One repetition's RunResult, built from what its swarm measured and its monitor sampled:
the figures, each endpoint's, the cores the target could use, a short count's note."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pytest_webperf.measurement.plan import Monitor, RunPlan
from pytest_webperf.measurement.punctuality import fell_behind
from pytest_webperf.models.endpoints import EndpointResult
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency, ResourceSample
from pytest_webperf.models.workload import MIN_COUNTED_S
from pytest_webperf.sampling.contention import foreign_cpu_percent
from pytest_webperf.sampling.resources import (
    generator_bound,
    remote_bound,
    server_cpu_series,
    usable_threads_peak,
)
from pytest_webperf.swarm.recorder import Interval
from pytest_webperf.swarm.runner import SwarmOutcome


def short_count(requests: int, seconds: float) -> str:
    """The note of a counted repetition that ended under ``MIN_COUNTED_S``."""
    return (
        f"short count: {requests:,} requests took {seconds:.2f} s, under "
        f"{MIN_COUNTED_S:.0f} s: its start-up (connections, a cold server) weighs on its "
        "figures more than on a longer run's (a larger requests=N, or --webperf-requests, "
        "lasts longer)"
    )


def run_result(
    outcome: SwarmOutcome,
    repetition: int,
    plan: RunPlan,
    monitor: Monitor | None,
    *,
    other_cpu_s: float | None = None,
    interval_s: float = 0.0,
    requests_asked: int = 0,
    arrival_rate: float = 0.0,
    weights: Mapping[tuple[str, str], float] | None = None,
) -> RunResult:
    """One repetition's result from what its swarm measured and the monitor sampled;
    ``interval_s``: the users' pacing (0: a closed loop); ``requests_asked``: a fixed
    request count (0: the run lasted its duration); ``arrival_rate``: requests due per
    second in total (0: not an arrival-rate run); ``weights``: a request mix's entries,
    (method, name) -> share asked (every entry an endpoint, even one that never
    completed a request)."""
    total = outcome.total
    resources = tuple(monitor.resource_samples()) if monitor else ()
    generator = tuple(monitor.generator_samples()) if monitor else ()
    bound = generator_bound(generator, resources, plan.workers, server_cores=plan.server_cores)
    bound = bound or remote_bound(outcome, resources, plan.server_cores)
    notes = list(outcome.notes)
    behind = fell_behind(
        total,
        interval_s,
        users=plan.concurrency,
        seconds=outcome.duration_s,
        generator=generator,
        workers=plan.workers,
        arrival_rate=arrival_rate,
    )
    if behind is not None:
        notes.append(behind[0])
        bound = bound or behind[1]
    if requests_asked and total.requests < requests_asked:
        notes.append(
            f"cut at the time limit: {total.requests:,} of the {requests_asked:,} requests "
            f"asked completed in {outcome.duration_s:.1f} s (raise duration=, the limit)"
        )
    elif requests_asked and outcome.duration_s < MIN_COUNTED_S:
        notes.append(short_count(requests_asked, outcome.duration_s))
    if monitor is not None:
        notes += [f"sampler: {error}" for error in dict.fromkeys(monitor.errors)]
    if bound:
        notes.append(
            "generator-bound: the load generator's CPU was saturated, the server's was not"
        )
    server_cpu = monitor.server_cpu_seconds() if monitor else None
    foreign = (
        None
        if other_cpu_s is None
        else foreign_cpu_percent(other_cpu_s, server_cpu, outcome.duration_s)
    )
    return RunResult(
        repetition=repetition,
        concurrency=plan.concurrency,
        duration_s=outcome.duration_s,
        requests=total.requests,
        errors=total.errors,
        timeouts=outcome.timeouts,
        connect_errors=outcome.connect_errors,
        bytes=total.bytes,
        latency=Latency.of(total.histogram),
        series=tuple(outcome.series),
        histogram=total.histogram,
        resources=resources,
        generator=generator,
        error_kinds=dict(total.error_kinds),
        error_examples=dict(total.error_examples),
        server_cpu_seconds=server_cpu,
        generator_bound=bound,
        server_cores=usable_cores(resources, plan.server_cores),
        generator_processes=tuple(g.to_dict() for g in outcome.generators),
        foreign_cpu_percent=foreign,
        notes=tuple(notes),
        service=Latency.of(total.service) if total.service is not None else None,
        schedule_lag=Latency.of(total.lag) if total.lag is not None else None,
        requests_asked=requests_asked or None,
        users_peak=sum(total.users_busy.values()) if total.users_busy else None,
        users_opened=sum(total.users_opened.values()) if total.users_opened else None,
        endpoints=endpoint_results(total, outcome.duration_s, weights or {}),
        connect=Latency.of(total.connect) if total.connect is not None else None,
        tls_handshake=Latency.of(total.handshake) if total.handshake is not None else None,
        ctx_switches=monitor.server_ctx_switches() if monitor else None,
        ttfb=Latency.of(total.ttfb) if total.ttfb is not None else None,
        body_stall=Latency.of(total.stall) if total.stall is not None else None,
        http2=total.http2,
    )


def endpoint_results(
    total: Interval, duration_s: float, weights: Mapping[tuple[str, str], float]
) -> dict[str, EndpointResult]:
    """Each endpoint's figures over the measured phase, by name (``METHOD name`` where
    two methods share a name): every recorder channel when there were several, every
    entry of a mix (``weights``) whether or not it completed a request."""
    parts = {key: total.endpoints.get(key, Interval()) for key in weights}
    parts.update(total.endpoints)
    names = [name for _, name in parts]
    results = {}
    for (method, name), part in parts.items():
        key = name if names.count(name) == 1 else f"{method} {name}"
        results[key] = EndpointResult(
            name=name,
            method=method,
            requests=part.requests,
            errors=part.errors,
            bytes=part.bytes,
            duration_s=duration_s,
            latency=Latency.of(part.histogram),
            histogram=part.histogram,
            error_kinds=dict(part.error_kinds),
            error_examples=dict(part.error_examples),
            weight=weights.get((method, name)),
        )
    return results


def usable_cores(
    resources: Sequence[ResourceSample], limit: float | None, machine: int | None = None
) -> float:
    """The CPUs the target could use, for its capacity estimate. "Usable" is the least of:
    - its limit (quota or cpuset) when it has one, else the machine's cores;
    - the most threads it could run at once in any second: each process's threads,
      except that a process under a global interpreter lock (CPython, PyPy: one thread
      runs Python at a time; Ruby, Node.js alike: ``tree.gil_bound``) counts one,
      however many threads it has. So a
      single-threaded server, or a threaded Python server, counts one core; a tree of
      four Python worker processes four. (C extensions that release the GIL can use
      more: the estimate stays on the safe side.);
    - when it was saturated at fewer whole cores than that (a server holding one lock
      at 100 % of one core), that many."""
    cores = float(limit) if limit else float(machine or os.cpu_count() or 1)
    per_tick = server_cpu_series(resources)  # the server's CPU %, summed over its parts
    most_threads = usable_threads_peak(resources)
    if not per_tick or most_threads is None:
        return cores
    if 0 < most_threads < cores:
        return float(most_threads)
    if limit:
        return cores
    busy = sum(per_tick) / len(per_tick) / 100  # mean cores in use
    whole = max(1, round(busy))
    if whole < cores and busy >= 0.9 * whole and busy <= whole + 0.05:
        return float(whole)
    return cores
