"""A container's cgroup counters: CPU time, memory, CPU limit (cgroup v2, and v1).

psutil sees the processes that are alive at each sample; the CPU of a process
that lived and died between two samples (a CGI child, a short-lived PHP
worker) is lost to it. The kernel's cgroup counters keep it, so they are the
ground truth for the service demand (CPU time of the target per request) and
the cross-check of the process-tree figures.

The cgroup is found from ``/proc/<pid>/cgroup`` of the container's init
process and ``/proc/self/mountinfo``, so both Docker cgroup drivers work
(cgroupfs: ``/docker/<id>``; systemd: ``/system.slice/docker-<id>.scope``)
without knowing which one is in use, on pure v2, pure v1 and hybrid hosts.
When that fails (a reader inside a private cgroup namespace sees ``/``), the
known layouts are tried by container id.

Per resource the v2 file is preferred and v1 is the fallback: on a hybrid host
(v1 controllers, v2 mounted at ``/sys/fs/cgroup/unified``) CPU comes from the
v2 ``cpu.stat`` (always present) and memory from the v1 memory controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

V2 = ""  # the key of the unified hierarchy in /proc/<pid>/cgroup ("0::/path")


@dataclass(frozen=True)
class CgroupMount:
    """One cgroup hierarchy as mounted: which controllers, its root and where it is."""

    controllers: frozenset[str]  # empty for v2; e.g. {"cpu", "cpuacct"} or {"name=systemd"}
    root: str  # the cgroup path mounted at mount_point (normally "/")
    mount_point: Path
    v2: bool

    def directory(self, cgroup_path: str) -> Path | None:
        """The directory of ``cgroup_path`` under this mount, or None if it is outside it."""
        root = self.root.rstrip("/")
        if cgroup_path != root and not cgroup_path.startswith(root + "/"):
            return None
        relative = cgroup_path[len(root) :].lstrip("/")
        return self.mount_point / relative if relative else self.mount_point


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` as controller -> path; the v2 hierarchy is under ``V2``."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            paths[V2] = path
            continue
        for controller in controllers.split(","):
            paths[controller] = path
    return paths


def parse_mountinfo(text: str) -> list[CgroupMount]:
    """The cgroup (v1) and cgroup2 mounts listed in ``/proc/<pid>/mountinfo``."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 4 or len(fields) < 5:
            continue
        fstype, super_options = fields[sep + 1], fields[sep + 3]
        root, mount_point = _unescape(fields[3]), Path(_unescape(fields[4]))
        if fstype == "cgroup2":
            mounts.append(CgroupMount(frozenset(), root, mount_point, v2=True))
        elif fstype == "cgroup":
            options = frozenset(super_options.split(",")) - {"rw", "ro"}
            mounts.append(CgroupMount(options, root, mount_point, v2=False))
    return mounts


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def parse_flat_keyed(text: str) -> dict[str, int]:
    """A ``key value`` per line file (``cpu.stat``, ``memory.stat``) as a dict of ints."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


def parse_cpu_max(text: str) -> float | None:
    """v2 ``cpu.max`` (``"max 100000"`` or ``"50000 100000"``) as cores, None if unlimited."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    return int(parts[0]) / int(parts[1])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # the cgroup went away with its container, or the file does not exist
        return None


@dataclass(frozen=True)
class CgroupDirs:
    """Where each counter of one cgroup lives (None where this host has no such file)."""

    v2: Path | None = None
    cpuacct: Path | None = None  # v1
    cpu: Path | None = None  # v1 (quota)
    memory: Path | None = None  # v1

    def exist(self) -> bool:
        return any(d is not None and d.is_dir() for d in (self.v2, self.cpuacct, self.memory))


def locate(proc_cgroup: Mapping[str, str], mounts: Iterable[CgroupMount]) -> CgroupDirs:
    """The directories of the cgroup named in a parsed ``/proc/<pid>/cgroup``."""
    found: dict[str, Path | None] = {"v2": None, "cpuacct": None, "cpu": None, "memory": None}
    for mount in mounts:
        if mount.v2:
            keys = ["v2"] if V2 in proc_cgroup else []
        else:
            keys = [c for c in ("cpuacct", "cpu", "memory") if c in mount.controllers]
        for key in keys:
            path = proc_cgroup.get(V2 if key == "v2" else key)
            directory = None if path is None else mount.directory(path)
            if directory is not None and directory.is_dir() and found[key] is None:
                found[key] = directory
    return CgroupDirs(**found)


def container_layouts(mounts: Iterable[CgroupMount], container_id: str) -> CgroupDirs:
    """The directories of a Docker container's cgroup by id, for both cgroup drivers."""
    names = (f"docker/{container_id}", f"system.slice/docker-{container_id}.scope")

    def first(mount_points: Iterable[Path]) -> Path | None:
        for point in mount_points:
            for name in names:
                if (point / name).is_dir():
                    return point / name
        return None

    mounts = list(mounts)

    def v1(controller: str) -> Iterator[Path]:
        return (m.mount_point for m in mounts if not m.v2 and controller in m.controllers)

    return CgroupDirs(
        v2=first(m.mount_point for m in mounts if m.v2),
        cpuacct=first(v1("cpuacct")),
        cpu=first(v1("cpu")),
        memory=first(v1("memory")),
    )


class CgroupReader:
    """Reads one cgroup's counters; every read returns None once the cgroup is gone."""

    def __init__(self, dirs: CgroupDirs, path: str = "") -> None:
        self.dirs = dirs
        self.path = path  # the cgroup path as the kernel names it, for messages

    @classmethod
    def for_pid(
        cls, pid: int, *, container_id: str | None = None, proc: Path = Path("/proc")
    ) -> CgroupReader | None:
        """The cgroup of ``pid`` (a container's ``State.Pid``), None if none is readable."""
        membership = _read(proc / str(pid) / "cgroup")
        mountinfo = _read(proc / "self" / "mountinfo")
        if membership is None or mountinfo is None:
            return None
        paths = parse_proc_cgroup(membership)
        mounts = parse_mountinfo(mountinfo)
        dirs = locate(paths, mounts)
        if not dirs.exist() and container_id:
            dirs = container_layouts(mounts, container_id)
        if not dirs.exist():
            return None
        return cls(dirs, paths.get(V2) or paths.get("cpuacct") or paths.get("memory") or "")

    def cpu_counter(self) -> str | None:
        """The file ``cpu_seconds`` reads (for ``stamp.read_counter``), None if none."""
        if self.dirs.v2 is not None and (self.dirs.v2 / "cpu.stat").is_file():
            return str(self.dirs.v2 / "cpu.stat")
        if self.dirs.cpuacct is not None and (self.dirs.cpuacct / "cpuacct.usage").is_file():
            return str(self.dirs.cpuacct / "cpuacct.usage")
        return None

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process that was ever in the cgroup, in seconds."""
        if self.dirs.v2 is not None:
            text = _read(self.dirs.v2 / "cpu.stat")
            usage = None if text is None else parse_flat_keyed(text).get("usage_usec")
            if usage is not None:
                return usage / 1e6
        if self.dirs.cpuacct is not None:
            text = _read(self.dirs.cpuacct / "cpuacct.usage")  # nanoseconds
            if text is not None and text.strip().isdigit():
                return int(text) / 1e9
        return None

    def memory_bytes(self) -> int | None:
        """Memory charged to the cgroup minus inactive page cache (as ``docker stats``).

        Inactive file pages are cache the kernel reclaims first under pressure:
        counting them would make a server that reads files look like it leaks.
        """
        if self.dirs.v2 is not None:
            current = _read(self.dirs.v2 / "memory.current")
            stat = _read(self.dirs.v2 / "memory.stat")
            if current is not None and stat is not None and current.strip().isdigit():
                inactive = parse_flat_keyed(stat).get("inactive_file", 0)
                return max(0, int(current) - inactive)
        if self.dirs.memory is not None:
            usage = _read(self.dirs.memory / "memory.usage_in_bytes")
            stat = _read(self.dirs.memory / "memory.stat")
            if usage is not None and stat is not None and usage.strip().isdigit():
                inactive = parse_flat_keyed(stat).get("total_inactive_file", 0)
                return max(0, int(usage) - inactive)
        return None

    def cpu_limit_cores(self) -> float | None:
        """The CPU quota in cores (``--cpus``), None when unlimited or unknown."""
        if self.dirs.v2 is not None:
            text = _read(self.dirs.v2 / "cpu.max")
            if text is not None:
                return parse_cpu_max(text)
        if self.dirs.cpu is not None:
            quota = _read(self.dirs.cpu / "cpu.cfs_quota_us")
            period = _read(self.dirs.cpu / "cpu.cfs_period_us")
            if quota is not None and period is not None:
                q, p = int(quota), int(period)
                return q / p if q > 0 and p > 0 else None
        return None


def owns_its_cgroup(pid: int, *, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` heads its own cgroup (a container's init), not its parent's.

    A local server started by the plugin sits in the pytest process's cgroup,
    which also holds pytest and the load generator: that cgroup's counters
    would measure all of them, so they are only used when the root process's
    parent lives in a different cgroup (for a container, containerd-shim).
    """
    own = _read(proc / str(pid) / "cgroup")
    stat = _read(proc / str(pid) / "stat")
    if own is None or stat is None:
        return False
    # the command in field 2 may hold spaces and parentheses: ppid follows the last ")"
    ppid = stat.rsplit(")", 1)[-1].split()[1]
    parent = _read(proc / ppid / "cgroup")
    if parent is None:
        return False
    mine, theirs = parse_proc_cgroup(own), parse_proc_cgroup(parent)
    key = V2 if V2 in mine and mine[V2] != "/" else "cpuacct"
    return mine.get(key) is not None and mine.get(key) != theirs.get(key)
