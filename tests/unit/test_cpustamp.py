"""The CPU counters the swarm child stamps (``swarm/stamp.py``): a cgroup's file in either
version, and a process tree."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.sampling.tree import stamped_delta
from pytest_webperf.swarm.stamp import CpuProbe, probes_of, read_counter, read_tree, stamp


def test_a_cgroup_counter_is_read_in_seconds_in_either_version(tmp_path: Path) -> None:
    v2 = tmp_path / "cpu.stat"
    v2.write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert read_counter(str(v2)) == 2.5
    v1 = tmp_path / "cpuacct.usage"
    v1.write_text("1500000000\n")
    assert read_counter(str(v1)) == 1.5
    (tmp_path / "broken" / "cpu.stat").parent.mkdir()
    (tmp_path / "broken" / "cpu.stat").write_text("nr_periods 0\n")
    assert read_counter(str(tmp_path / "broken" / "cpu.stat")) is None
    assert read_counter(str(tmp_path / "gone")) is None


def test_a_stamp_holds_this_process_tree() -> None:
    stamped = stamp([CpuProbe("me", os.getpid())])
    rows = stamped["parts"]["me"]["tree"]
    assert rows[0][0] == os.getpid() and stamped["parts"]["me"]["cgroup"] is None
    assert read_tree(2**22 + 7) is None  # no such process
    assert stamped_delta(rows, rows) == 0.0


@given(st.lists(st.tuples(st.integers(1, 2**22), st.integers(1, 2**22)), max_size=4))
def test_probes_travel_in_the_spec_unchanged(pids: list[tuple[int, int]]) -> None:
    probes = tuple(CpuProbe(f"p{i}", a, f"/sys/x/{b}/cpu.stat") for i, (a, b) in enumerate(pids))
    assert probes_of([p.to_dict() for p in probes]) == probes
