"""The machine fingerprint: what, if it changed, changes every measurement.

Baselines live under ``baselines/<machine-id>/``; a run compares only with
baselines of the same id. The id is readable and stable::

    <cpu-slug>-<ncores>c-<hash8>       e.g. intel-xeon-2c-1a2b3c4d

where ``hash8`` covers everything in ``MachineInfo``: CPU model, logical cores,
memory (whole GiB, so a few MB of kernel reservation do not move it), kernel
release, container engine version, the CPU quota given to targets, the
network mode, the CPU placement, the HTTP user a measurement ran with when it is not
the lean one (``generator``: the native loop times requests differently; the same
user whether given by option, environment, ini, marker or ``webperf.http(user=...)``;
MQTT measurements have none), and the keys users add through the
``pytest_webperf_update_machine_info`` hook (``extra``; with none, the hash is
what it was before the hook existed, so existing baselines keep their id).
The engine version is passed in (this module does not talk to
Docker). ``--webperf-machine-id=NAME`` replaces the id, e.g. to share baselines
between identical CI runners, or to compare against another machine on purpose.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import psutil

from pytest_webperf.errors import OptionError, WebperfError

GIB = 1024**3
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Words that say nothing about the CPU: trademarks, "CPU", clock suffixes.
_NOISE_WORDS = re.compile(r"\((?:r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", re.IGNORECASE)


@dataclass(frozen=True)
class MachineInfo:
    cpu_model: str
    cores: int  # logical CPUs the OS reports
    memory_gib: int
    kernel: str
    engine_version: str | None = None  # e.g. Docker's "24.0.5"; None for local targets
    cpu_quota: float | None = None  # CPUs given to each target (--cpus), None = no limit
    network_mode: str = "host"
    placement: str | None = None  # CPU placement of target and generator, when they are pinned
    generator: str | None = None  # the run's HTTP user, when not lean (None: not in the hash)
    # keys added by the pytest_webperf_update_machine_info hook (JSON values)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:8]

    def to_dict(self) -> dict[str, Any]:
        """Flat: the built-in keys, then the added ones (as the hook saw them)."""
        data = asdict(self)
        extra = data.pop("extra")
        if data["generator"] is None:  # absent, so that older ids stay what they were
            del data["generator"]
        return {**data, **extra}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MachineInfo:
        quota = data.get("cpu_quota")
        return cls(
            cpu_model=str(data["cpu_model"]),
            cores=int(data["cores"]),
            memory_gib=int(data["memory_gib"]),
            kernel=str(data["kernel"]),
            engine_version=data.get("engine_version"),
            cpu_quota=None if quota is None else float(quota),
            network_mode=str(data.get("network_mode", "host")),
            placement=data.get("placement"),
            generator=data.get("generator"),
            extra={k: v for k, v in data.items() if k not in _BUILT_IN},
        )

    @classmethod
    def from_hook(cls, data: Mapping[str, Any], source: str) -> MachineInfo:
        """A ``to_dict()`` as ``source`` (a hook) left it: checked, then parsed."""
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise WebperfError(
                f"{source} removed {', '.join(missing)} from the machine info: the machine "
                "fingerprint needs them (--webperf-machine-id=NAME replaces the whole id)"
            )
        try:
            json.dumps(dict(data), sort_keys=True)
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise WebperfError(
                f"{source} left a value in the machine info that does not fit ({exc}): "
                "built-in keys keep their types; added ones are str, numbers, bool, None, "
                "and lists or dicts of them"
            ) from None


_BUILT_IN = frozenset(f.name for f in dataclass_fields(MachineInfo)) - {"extra"}
_REQUIRED = ("cpu_model", "cores", "memory_gib", "kernel")


def cpu_model(cpuinfo: str) -> str:
    """The CPU's model name from /proc/cpuinfo text (x86 'model name'; ARM boards
    give 'Hardware' or 'Model'), else what the platform module knows."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "hardware", "model", "cpu model", "processor"):
        if key in fields and not fields[key].isdigit():
            return fields[key]
    return platform.processor() or platform.machine() or "unknown-cpu"


def slug(text: str, limit: int = 40) -> str:
    """Lower-case words joined by '-', for ids and file names."""
    words = re.findall(r"[a-z0-9]+", _NOISE_WORDS.sub(" ", text).lower())
    return "-".join(words)[:limit].strip("-") or "cpu"


def collect(
    *,
    engine_version: str | None = None,
    cpu_quota: float | None = None,
    network_mode: str = "host",
    placement: str | None = None,
    cpuinfo_path: Path = Path("/proc/cpuinfo"),
) -> MachineInfo:
    """This machine, as the fingerprint sees it."""
    try:
        text = cpuinfo_path.read_text(errors="replace")
    except OSError:
        text = ""  # not Linux: the platform module answers instead
    memory = psutil.virtual_memory().total
    return MachineInfo(
        cpu_model=cpu_model(text),
        cores=os.cpu_count() or 1,
        memory_gib=max(1, round(memory / GIB)),
        kernel=platform.release(),
        engine_version=engine_version,
        cpu_quota=cpu_quota,
        network_mode=network_mode,
        placement=placement,
    )


def check_machine_id(name: str) -> str:
    """A user-given id, checked: it names a directory under the baseline dir."""
    if not _SAFE_ID.fullmatch(name):
        raise OptionError(
            f"--webperf-machine-id={name!r} cannot name a baseline directory: use 1-100 "
            "letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def machine_id(info: MachineInfo, override: str | None = None) -> str:
    """``<cpu-slug>-<ncores>c-<hash8>``, or the checked override."""
    if override:
        return check_machine_id(override)
    return f"{slug(info.cpu_model)}-{info.cores}c-{info.fingerprint()}"
