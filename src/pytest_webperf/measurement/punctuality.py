"""Whether an open-model HTTP run kept its schedule (paced users, or an arrival rate),
and if not, who is to blame: the generator (flagged, never passed), the users' cap,
or the server."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_webperf.models.samples import GeneratorSample
from pytest_webperf.sampling.resources import generator_cpu_stats
from pytest_webperf.swarm.pacing import kept
from pytest_webperf.swarm.recorder import Interval

# A paced run that sent less than this share of its offered rate did not keep its schedule.
KEPT_SHARE = 0.9
GENERATOR_SATURATED = 0.8  # of its processes' CPU (as resources.generator_bound)


def fell_behind(
    total: Interval,
    interval_s: float,
    *,
    users: int,
    seconds: float,
    generator: Sequence[GeneratorSample],
    workers: int,
    arrival_rate: float = 0.0,
) -> tuple[str, bool] | None:
    """Whether a paced or arrival-rate run kept its schedule: None if it did (or was
    neither); else what to say and whether the generator is to blame (it was saturated:
    the run measured the generator and is flagged). A schedule missed with the
    generator not saturated is the server's (or the machine's) doing: its latencies,
    counted from each intended start, show it; an arrival rate missed with every user
    busy at once was limited by the users' cap, which the note says."""
    if total.lag is None or (interval_s <= 0 and arrival_rate <= 0):
        return None
    if arrival_rate > 0:
        share = total.requests / seconds / arrival_rate if seconds > 0 else 0.0
    else:
        share = kept(total.requests, seconds, users, interval_s)
    if share >= KEPT_SHARE:
        return None
    lag = total.lag.percentile(99) / 1000
    if arrival_rate > 0:
        missed = (
            f"the arrival schedule was not kept: {share:.0%} of the {arrival_rate:,g} req/s "
            f"asked ({users} users at most), p99 of sends {lag:,.1f} ms late"
        )
    else:
        offered = users / interval_s
        missed = (
            f"the paced schedule was not kept: {share:.0%} of the offered {offered:,.0f} "
            f"req/s ({users} users, one request each per {interval_s * 1000:g} ms), p99 of "
            f"sends {lag:,.1f} ms late"
        )
    stats = generator_cpu_stats(generator)
    saturated = (
        stats is not None
        and workers > 0  # else every generator is remote: resources.remote_bound judges them
        and stats.mean >= GENERATOR_SATURATED * min(workers, os.cpu_count() or 1) * 100
    )
    if saturated:
        return (
            f"generator-bound: {missed}, with the generator's CPU saturated: latencies "
            "measure the generator; use fewer users, a longer interval or more "
            "--webperf-workers",
            True,
        )
    if arrival_rate > 0 and sum(total.users_busy.values()) >= users:
        return (
            f"{missed}; all {users} users were busy at once: the cap (concurrency) limited "
            "the rate, not the generator; give more users to see how many the server needs",
            False,
        )
    return f"{missed}; the generator was not saturated, so the server did not keep up", False
