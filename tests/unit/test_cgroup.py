"""cgroup discovery and counters, on fake cgroup trees (v2, v1, both Docker drivers)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.sampling.cgroup import (
    V2,
    CgroupDirs,
    CgroupMount,
    CgroupReader,
    container_layouts,
    locate,
    owns_its_cgroup,
    parse_cpu_max,
    parse_flat_keyed,
    parse_mountinfo,
    parse_proc_cgroup,
)

CID = "2881d04c8b1b9b1222a9d27da9c59011387a53099ac3348d225126f5298a352f"

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

HYBRID_PROC_CGROUP = f"""\
9:name=systemd:/docker/{CID}
4:memory:/docker/{CID}
2:cpuacct:/docker/{CID}
1:cpu:/docker/{CID}
0::/docker/{CID}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_proc_cgroup_of_a_hybrid_host() -> None:
    paths = parse_proc_cgroup(HYBRID_PROC_CGROUP)
    assert paths[V2] == f"/docker/{CID}"
    assert paths["cpuacct"] == paths["memory"] == f"/docker/{CID}"
    assert paths["name=systemd"] == f"/docker/{CID}"


def test_proc_cgroup_splits_combined_controllers() -> None:
    paths = parse_proc_cgroup("4:cpu,cpuacct:/system.slice/docker-abc.scope\n")
    assert paths == {
        "cpu": "/system.slice/docker-abc.scope",
        "cpuacct": "/system.slice/docker-abc.scope",
    }


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["cpu", "memory", "pids", ""]),
            st.from_regex(r"/[a-z0-9/._:-]{0,30}", fullmatch=True),
        ),
        unique_by=lambda item: item[0],
    )
)
def test_proc_cgroup_round_trip(entries: list[tuple[str, str]]) -> None:
    text = "".join(f"{n}:{ctrl}:{path}\n" for n, (ctrl, path) in enumerate(entries))
    assert parse_proc_cgroup(text) == dict(entries)


def test_mountinfo_finds_v1_and_v2_mounts() -> None:
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    assert [m.mount_point.name for m in mounts] == [
        "cpu",
        "cpuacct",
        "memory",
        "systemd",
        "unified",
    ]
    assert [m.v2 for m in mounts] == [False, False, False, False, True]
    assert mounts[0].controllers == {"cpu"}
    assert mounts[3].controllers == {"name=systemd"}


def test_mountinfo_with_optional_fields_and_escaped_space() -> None:
    line = (
        "41 31 0:38 /sub /mnt/my\\040cgroup rw shared:9 master:1 - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    (mount,) = parse_mountinfo(line)
    assert mount.v2 and mount.root == "/sub" and mount.mount_point == Path("/mnt/my cgroup")


def test_mount_directory_maps_paths_under_its_root() -> None:
    mount = CgroupMount(frozenset(), "/outer", Path("/sys/fs/cgroup"), v2=True)
    assert mount.directory("/outer/docker/x") == Path("/sys/fs/cgroup/docker/x")
    assert mount.directory("/outer") == Path("/sys/fs/cgroup")
    assert mount.directory("/outerside/x") is None
    assert mount.directory("/elsewhere") is None


@given(
    st.dictionaries(
        st.from_regex(r"[a-z_]{1,20}", fullmatch=True), st.integers(min_value=0, max_value=2**63)
    )
)
def test_flat_keyed_round_trip(values: dict[str, int]) -> None:
    text = "".join(f"{k} {v}\n" for k, v in values.items())
    assert parse_flat_keyed(text) == values


def test_cpu_max() -> None:
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("150000 100000\n") == 1.5


def fake_v2(root: Path, cgroup: str) -> Path:
    """A pure v2 host: one cgroup2 mount at root/cgroup."""
    directory = root / "cgroup" / cgroup.lstrip("/")
    write(directory / "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    write(directory / "memory.current", str(300 * 2**20))
    write(directory / "memory.stat", f"anon 1000\ninactive_file {100 * 2**20}\nactive_file 5\n")
    write(directory / "cpu.max", "200000 100000\n")
    return directory


def fake_proc(root: Path, pid: int, membership: str, mountinfo: str, ppid: int = 1) -> Path:
    proc = root / "proc"
    write(proc / str(pid) / "cgroup", membership)
    write(proc / str(pid) / "stat", f"{pid} (sh (x) y) S {ppid} 1 1 0 -1\n")
    write(proc / "self" / "mountinfo", mountinfo)
    return proc


def test_v2_systemd_driver_counters(tmp_path: Path) -> None:
    scope = f"/system.slice/docker-{CID}.scope"
    fake_v2(tmp_path, scope)
    mountinfo = f"30 23 0:26 / {tmp_path}/cgroup rw - cgroup2 cgroup2 rw\n"
    proc = fake_proc(tmp_path, 42, f"0::{scope}\n", mountinfo)
    reader = CgroupReader.for_pid(42, proc=proc)
    assert reader is not None and reader.path == scope
    assert reader.cpu_seconds() == 2.5
    assert reader.memory_bytes() == 200 * 2**20  # inactive page cache left out
    assert reader.cpu_limit_cores() == 2.0


def test_v1_cgroupfs_driver_counters(tmp_path: Path) -> None:
    cgroup = f"/docker/{CID}"
    write(tmp_path / "cpuacct" / cgroup[1:] / "cpuacct.usage", "3307102719\n")
    memory = tmp_path / "memory" / cgroup[1:]
    write(memory / "memory.usage_in_bytes", str(50 * 2**20))
    write(memory / "memory.stat", f"inactive_file 1\ntotal_inactive_file {20 * 2**20}\n")
    write(tmp_path / "cpu" / cgroup[1:] / "cpu.cfs_quota_us", "-1\n")
    write(tmp_path / "cpu" / cgroup[1:] / "cpu.cfs_period_us", "100000\n")
    mountinfo = HYBRID_MOUNTINFO.replace("/sys/fs/cgroup", str(tmp_path))
    proc = fake_proc(tmp_path, 7, HYBRID_PROC_CGROUP, mountinfo)
    reader = CgroupReader.for_pid(7, proc=proc)
    assert reader is not None
    assert reader.dirs.v2 is None  # the unified directory does not exist in this fake
    assert reader.cpu_seconds() == 3.307102719
    assert reader.memory_bytes() == 30 * 2**20
    assert reader.cpu_limit_cores() is None


def test_hybrid_prefers_v2_cpu_and_falls_back_to_v1_memory(tmp_path: Path) -> None:
    cgroup = f"/docker/{CID}"
    write(tmp_path / "unified" / cgroup[1:] / "cpu.stat", "usage_usec 1000000\n")
    write(tmp_path / "cpuacct" / cgroup[1:] / "cpuacct.usage", "999\n")
    memory = tmp_path / "memory" / cgroup[1:]
    write(memory / "memory.usage_in_bytes", "4096\n")
    write(memory / "memory.stat", "total_inactive_file 1024\n")
    mounts = parse_mountinfo(HYBRID_MOUNTINFO.replace("/sys/fs/cgroup", str(tmp_path)))
    reader = CgroupReader(locate(parse_proc_cgroup(HYBRID_PROC_CGROUP), mounts))
    assert reader.cpu_seconds() == 1.0
    assert reader.memory_bytes() == 3072


def test_container_layouts_when_proc_names_an_invisible_path(tmp_path: Path) -> None:
    """A reader in a private cgroup namespace sees "/" for everyone: find it by id."""
    fake_v2(tmp_path, f"/system.slice/docker-{CID}.scope")
    mountinfo = f"30 23 0:26 / {tmp_path}/cgroup rw - cgroup2 cgroup2 rw\n"
    proc = fake_proc(tmp_path, 42, "0::/../../elsewhere\n", mountinfo)
    assert CgroupReader.for_pid(42, proc=proc) is None
    reader = CgroupReader.for_pid(42, proc=proc, container_id=CID)
    assert reader is not None and reader.cpu_seconds() == 2.5
    assert container_layouts(parse_mountinfo(mountinfo), "other").exist() is False


def test_a_vanished_cgroup_reads_none(tmp_path: Path) -> None:
    reader = CgroupReader(CgroupDirs(v2=tmp_path / "gone", memory=tmp_path / "gone"))
    assert reader.cpu_seconds() is None
    assert reader.memory_bytes() is None
    assert reader.cpu_limit_cores() is None


def test_for_pid_of_a_missing_process(tmp_path: Path) -> None:
    assert CgroupReader.for_pid(99, proc=tmp_path) is None


def test_owns_its_cgroup_only_when_the_parent_is_elsewhere(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 10, f"0::/docker/{CID}\n", "", ppid=5)
    write(proc / "5" / "cgroup", "0::/system.slice/containerd.service\n")
    assert owns_its_cgroup(10, proc=proc)
    write(proc / "5" / "cgroup", f"0::/docker/{CID}\n")
    assert not owns_its_cgroup(10, proc=proc)
    assert not owns_its_cgroup(11, proc=proc)


def test_a_child_of_this_process_does_not_own_its_cgroup() -> None:
    """What the plugin's local targets look like: same cgroup as pytest."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not owns_its_cgroup(child.pid)
    finally:
        child.kill()
        child.wait()
