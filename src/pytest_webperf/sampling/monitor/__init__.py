"""The threads that sample a target's parts and the load generator every second.

- ``target.ResourceMonitor`` / ``generator.GeneratorMonitor``: a background thread
  sampling the target's parts (with ``tree.ProcessTreeSampler``, and the cgroup of each)
  or the generator's processes every ``interval`` (``periodic``), with marks for the
  measured phase.
- ``run.RunMonitor``: one repetition's monitoring, the shape ``plan.Monitor`` asks for.

What the samples add up to (server CPU, peak RSS, generator-bound) is in
``sampling/resources.py``; how much CPU other processes took, in ``sampling/contention.py``.
"""

from __future__ import annotations

from pytest_webperf.sampling.monitor.generator import GeneratorMonitor
from pytest_webperf.sampling.monitor.run import RunMonitor
from pytest_webperf.sampling.monitor.target import CpuSource, ResourceMonitor

__all__ = ["CpuSource", "GeneratorMonitor", "ResourceMonitor", "RunMonitor"]
