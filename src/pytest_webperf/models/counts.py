"""What a counted repetition (``count=True``) measured, as saved (``Counts``): its counted
window under Valgrind's callgrind (instructions, allocations) and its native window beside
it (system calls, context switches), with what each cost.

Every figure is a total over its window; the ``*_per_req`` properties divide by that
window's requests. The two windows send the same N requests to two fresh instances of the
same program, pinned alike (``pinning``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _per(total: float | None, requests: int) -> float | None:
    return None if total is None or requests <= 0 else total / requests


class _Counted:
    """What a counted window's figures share: instructions and allocations per request."""

    requests: int
    instructions: int | None
    allocations: int | None

    @property
    def instructions_per_req(self) -> float | None:
        return _per(self.instructions, self.requests)

    @property
    def allocs_per_req(self) -> float | None:
        return _per(self.allocations, self.requests)


@dataclass(frozen=True)
class EndpointCounts(_Counted):
    """One endpoint of a counted mix in one window: its requests, and its instructions
    and allocations when the window was counted per endpoint (None: the mix's whole only)."""

    requests: int
    instructions: int | None = None
    allocations: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "instructions": self.instructions,
            "instructions_per_req": self.instructions_per_req,
            "allocations": self.allocations,
            "allocs_per_req": self.allocs_per_req,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointCounts:
        def optional(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        return cls(int(data["requests"]), optional("instructions"), optional("allocations"))


@dataclass(frozen=True)
class Counts(_Counted):
    """One counted repetition: the counted window (``requests`` under callgrind, every
    process and thread summed) and the native window (``native_requests`` without it)."""

    requests: int
    instructions: int
    allocations: int  # every allocation once: libc's allocators, operator new, the runtime's
    processes: int  # processes under callgrind in the window
    window_s: float  # the counted window's wall time
    native_requests: int
    native_window_s: float
    tool: str  # callgrind's version and options: counts depend on them
    runtime: str = "native"
    pinning: str = ""  # what was pinned for the runtime
    runtime_allocations: Mapping[str, int] = field(default_factory=dict)
    cpu_s: float | None = None  # the target's CPU in the counted window
    native_cpu_s: float | None = None
    native_errors: int = 0
    syscalls: int | None = None  # in the native window
    syscall_tool: str | None = None
    ctx_switches: int | None = None  # of the target's threads, in the native window
    run_s: float = 0.0  # the whole repetition: both starts, warm-ups, windows and dumps
    notes: tuple[str, ...] = ()
    # where ``run_s`` went: seconds per phase (start under callgrind, warm-up, probe, window,
    # dump, reading the dumps, native window), in the order they ran
    phases: Mapping[str, float] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # the cores the side's instances were pinned to; (): none
    # an ordered mix's window, per endpoint: its requests and, where the window was cut
    # per endpoint, its instructions and allocations (``EndpointCounts``)
    endpoints: Mapping[str, EndpointCounts] = field(default_factory=dict)
    # libc's allocators and operator new alone (all that ``allocations`` counted before)
    libc_allocations: int | None = None

    @property
    def syscalls_per_req(self) -> float | None:
        return _per(self.syscalls, self.native_requests)

    @property
    def ctx_switches_per_req(self) -> float | None:
        return _per(self.ctx_switches, self.native_requests)

    @property
    def slowdown(self) -> float | None:
        """Valgrind's slowdown: the target's CPU per request under callgrind over its CPU
        per request natively (None when either is unknown or zero)."""
        counted = _per(self.cpu_s, self.requests)
        native = _per(self.native_cpu_s, self.native_requests)
        return None if not counted or not native else counted / native

    @property
    def wall_slowdown(self) -> float | None:
        """The counted window's wall time per request over the native window's."""
        counted = _per(self.window_s, self.requests)
        native = _per(self.native_window_s, self.native_requests)
        return None if not counted or not native else counted / native

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "instructions": self.instructions,
            "instructions_per_req": self.instructions_per_req,
            "allocations": self.allocations,
            "allocs_per_req": self.allocs_per_req,
            "runtime_allocations": dict(self.runtime_allocations),
            "libc_allocations": self.libc_allocations,
            "processes": self.processes,
            "window_s": self.window_s,
            "cpu_s": self.cpu_s,
            "native_requests": self.native_requests,
            "native_errors": self.native_errors,
            "native_window_s": self.native_window_s,
            "native_cpu_s": self.native_cpu_s,
            "syscalls": self.syscalls,
            "syscalls_per_req": self.syscalls_per_req,
            "syscall_tool": self.syscall_tool,
            "ctx_switches": self.ctx_switches,
            "ctx_switches_per_req": self.ctx_switches_per_req,
            "slowdown": self.slowdown,
            "wall_slowdown": self.wall_slowdown,
            "run_s": self.run_s,
            "tool": self.tool,
            "runtime": self.runtime,
            "pinning": self.pinning,
            "notes": list(self.notes),
            "phases": dict(self.phases),
            "cpus": list(self.cpus),
            "endpoints": {k: v.to_dict() for k, v in self.endpoints.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Counts:
        def optional(key: str, kind: type[int] | type[float]) -> Any:
            value = data.get(key)
            return None if value is None else kind(value)

        return cls(
            requests=int(data["requests"]),
            instructions=int(data["instructions"]),
            allocations=int(data.get("allocations", 0)),
            processes=int(data.get("processes", 1)),
            window_s=float(data.get("window_s", 0.0)),
            native_requests=int(data.get("native_requests", 0)),
            native_window_s=float(data.get("native_window_s", 0.0)),
            tool=str(data.get("tool", "")),
            runtime=str(data.get("runtime", "native")),
            pinning=str(data.get("pinning", "")),
            runtime_allocations={
                str(k): int(v) for k, v in (data.get("runtime_allocations") or {}).items()
            },
            cpu_s=optional("cpu_s", float),
            native_cpu_s=optional("native_cpu_s", float),
            native_errors=int(data.get("native_errors", 0)),
            syscalls=optional("syscalls", int),
            syscall_tool=data.get("syscall_tool"),
            ctx_switches=optional("ctx_switches", int),
            run_s=float(data.get("run_s", 0.0)),
            notes=tuple(str(n) for n in data.get("notes", ())),
            phases={str(k): float(v) for k, v in (data.get("phases") or {}).items()},
            cpus=tuple(int(c) for c in data.get("cpus", ())),
            libc_allocations=optional("libc_allocations", int),
            endpoints={
                str(k): EndpointCounts.from_dict(v)
                for k, v in (data.get("endpoints") or {}).items()
            },
        )
