"""How much of the machine's CPU other processes took while a run was measured.

The machine's busy seconds less this process tree's (the generator, the MQTT
observer, the sampler's thread) less the server's are what other processes used:
above a threshold (``metrics.CONTENDED_CPU_PERCENT``) throughput and latency
changes are not the server's.
"""

from __future__ import annotations

import psutil

from pytest_webperf.sampling.tree import GONE


def machine_busy_seconds() -> float:
    """CPU seconds this machine spent not idle, all cores, since boot (steal included:
    a VM's neighbours take CPU from the run as surely as a local process does)."""
    times = psutil.cpu_times()
    return float(
        sum(times)
        - times.idle
        - getattr(times, "iowait", 0.0)
        - getattr(times, "guest", 0.0)
        - getattr(times, "guest_nice", 0.0)
    )


def own_tree_seconds() -> float:
    """CPU seconds of this process and all its descendants (the generator, the MQTT
    observer, the sampler's thread), children already reaped included."""
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except GONE:
            continue
        total += times.user + times.system
        if proc.pid == me.pid:
            total += times.children_user + times.children_system
    return total


def foreign_cpu_percent(other_s: float, server_s: float | None, duration_s: float) -> float | None:
    """CPU used during the measured phase by processes that are neither the server nor
    this measurement (``other_s``: the machine's busy seconds minus this process tree's),
    100 = one core; None when the server's CPU is not known (a target given by URL)."""
    if server_s is None or duration_s <= 0:
        return None
    return max(0.0, other_s - server_s) / duration_s * 100
