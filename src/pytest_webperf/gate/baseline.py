"""The baseline store: one JSON file per test, one directory per machine.

Layout::

    <base_dir>/<machine-id>/<test-slug>-<hash8>.json

The file name is the test's node id made filesystem-safe (a readable slug, cut
short) plus 8 hex digits of its SHA-256, so two ids that slug alike never share a
file. A file holds, for every measurement name of the test, the latest baseline
(the whole ``Measurement``, the one compared against) and a bounded history of
compact per-repetition summaries (the last ``HISTORY_LIMIT`` saves; appended and
trimmed, never rewritten), each with the metadata of its save: ``saved_at``, the
machine id and whatever the caller passes (git commit, machine fingerprint
details), and the code the measurement itself ran (``code``: its image, or its
process target's commit)::

    {"schema": 1, "nodeid": "...", "machine_id": "...",
     "measurements": {"<name>": {"latest": ENTRY, "history": [SUMMARY, ...]}}}

A measurement that was profiled keeps a digest of its profile in its ``latest`` entry
(``profiling/digest.py``: each repetition's largest functions and its folded stacks, at
most 64 KiB), never in its history, so a stored-baseline failure names functions too
and the file stays bounded however often it is saved.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``, fsync
of the directory): a crash leaves the old file or the new one, never half of one.
A file from a newer schema is refused; a corrupt one raises ``BaselineError``
naming the file and the fix. Saving over a corrupt file keeps it beside the new
one as ``<name>.corrupt-<time>`` instead of throwing its history away.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_webperf.errors import BaselineError
from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.profiling import digest
from pytest_webperf.profiling.stacks import parse_folded

SCHEMA = 1
HISTORY_LIMIT = 20
DEFAULT_DIR = Path("baselines")
HOW_TO_FIX = "delete it, or re-run with --webperf-save to record a new baseline"


@dataclass(frozen=True)
class BaselineEntry:
    """A stored baseline and where it came from."""

    measurement: Measurement
    saved_at: str
    machine_id: str
    metadata: Mapping[str, Any]


class NewerSchemaError(BaselineError):
    """A baseline file written by a newer pytest-webperf: refused, never overwritten."""


def file_name(nodeid: str) -> str:
    """``<slug>-<hash8>.json``: readable, safe on every filesystem, unique per id."""
    digest = hashlib.sha256(nodeid.encode()).hexdigest()[:8]
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid.replace("::", "--")).strip("-.")
    return f"{text[:80].rstrip('-.') or 'test'}-{digest}.json"


def summary(measurement: Measurement) -> dict[str, list[float | None]]:
    """Per-repetition values of every metric: what history keeps (a few hundred bytes)."""
    return {
        name: [metric.per_run(run) for run in measurement.runs]
        for name, metric in METRICS.items()
        if name != "tps"
    }


def code_of(target: Mapping[str, Any]) -> dict[str, Any]:
    """Which code a measurement ran, from its target's ``describe()``: the image(s) of a
    container target, the commit (and dirtiness) of a process target's directory."""
    parts = target.get("parts")
    images = sorted(
        {str(p["image"]) for p in parts.values() if isinstance(p, Mapping) and p.get("image")}
        if isinstance(parts, Mapping)
        else ()
    )
    found: dict[str, Any] = {}
    if images:
        found["image"] = ", ".join(images)
    git = target.get("git")
    if isinstance(git, Mapping) and git.get("commit"):
        found["git"] = {"commit": git.get("commit"), "dirty": bool(git.get("dirty"))}
    return found


def kept_profile(profile: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a baseline keeps of a measurement's profile: the digest of its side (the
    change's, in an A/B run), or None when it has none."""
    if profile is None or profile.get("why"):
        return None
    reps = profile.get("repetitions")
    if not isinstance(reps, list) or not reps:
        return None
    try:
        folded = parse_folded(str(profile.get("change_folded") or ""))
    except ValueError:
        folded = {}
    return digest.digest([str(t) for t in profile.get("tools") or ()], reps, folded)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")  # dt.UTC is 3.11+


class BaselineStore:
    """Baselines of one machine under ``base_dir`` (JSON files, reviewed in PRs)."""

    def __init__(self, base_dir: Path | str = DEFAULT_DIR, machine_id: str = "local") -> None:
        self.base_dir = Path(base_dir)
        self.machine_id = machine_id

    def path_for(self, nodeid: str, machine_id: str | None = None) -> Path:
        return self.base_dir / (machine_id or self.machine_id) / file_name(nodeid)

    # --- reading -------------------------------------------------------------------------

    def load(
        self, nodeid: str, name: str, *, allow_other_machine: bool = False
    ) -> Measurement | None:
        entry = self.load_entry(nodeid, name, allow_other_machine=allow_other_machine)
        return None if entry is None else entry.measurement

    def load_entry(
        self, nodeid: str, name: str, *, allow_other_machine: bool = False
    ) -> BaselineEntry | None:
        """This machine's baseline; with ``allow_other_machine``, failing that, the
        newest one of any machine (the entry says which)."""
        entry = self._entry(self.path_for(nodeid), name)
        if entry is not None or not allow_other_machine:
            return entry
        others = [
            self._entry(self.path_for(nodeid, m), name) for m in self.other_machines(nodeid, name)
        ]
        found = [e for e in others if e is not None]
        return max(found, key=lambda e: e.saved_at) if found else None

    def other_machines(self, nodeid: str, name: str) -> list[str]:
        """Ids of other machines holding a baseline of this measurement: for the
        message "no baseline on this machine, but there is one for ..."."""
        if not self.base_dir.is_dir():
            return []
        found = []
        for directory in sorted(self.base_dir.iterdir()):
            path = directory / file_name(nodeid)
            if directory.name != self.machine_id and path.is_file():
                with contextlib.suppress(BaselineError):
                    if name in self._read(path)["measurements"]:
                        found.append(directory.name)
        return found

    def history(self, nodeid: str, name: str) -> list[dict[str, Any]]:
        """Summaries of the last saves, oldest first (each with saved_at and metadata)."""
        path = self.path_for(nodeid)
        if not path.is_file():
            return []
        record = self._read(path)["measurements"].get(name)
        return [] if record is None else list(record["history"])

    def _entry(self, path: Path, name: str) -> BaselineEntry | None:
        if not path.is_file():
            return None
        data = self._read(path)
        record = data["measurements"].get(name)
        if record is None:
            return None
        latest = record["latest"]
        try:
            measurement = Measurement.from_dict(latest["measurement"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(
                f"baseline file {path}: measurement {name!r} cannot be "
                f"read ({type(exc).__name__}: {exc}); {HOW_TO_FIX}"
            ) from None
        return BaselineEntry(
            measurement,
            str(latest.get("saved_at", "")),
            str(data.get("machine_id", path.parent.name)),
            dict(latest.get("metadata", {})),
        )

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BaselineError(
                f"baseline file {path} cannot be read ({exc}); {HOW_TO_FIX}"
            ) from None
        _check_shape(path, data)
        return data  # type: ignore[no-any-return]

    # --- writing -------------------------------------------------------------------------

    def save(
        self, measurements: Sequence[Measurement], metadata: Mapping[str, Any] | None = None
    ) -> list[Path]:
        """Store each measurement as the latest baseline of its name and append it to
        the history; one atomic write per test file. Returns the files written."""
        stamp = {"saved_at": _now(), "machine_id": self.machine_id, **(metadata or {})}
        by_test: dict[str, list[Measurement]] = {}
        for m in measurements:
            by_test.setdefault(m.nodeid, []).append(m)
        return [self._save_test(nodeid, items, stamp) for nodeid, items in by_test.items()]

    def _save_test(
        self, nodeid: str, items: Sequence[Measurement], stamp: Mapping[str, Any]
    ) -> Path:
        path = self.path_for(nodeid)
        data = self._existing(path, nodeid)
        for m in items:
            record = data["measurements"].setdefault(m.name, {"latest": None, "history": []})
            record["latest"] = {
                "saved_at": stamp["saved_at"],
                "metadata": dict(stamp),
                "measurement": replace(m, verdict=None, profile=kept_profile(m.profile)).to_dict(),
            }
            record["history"].append(
                {
                    "saved_at": stamp["saved_at"],
                    "metadata": dict(stamp),
                    "summary": summary(m),
                    "code": code_of(m.target),
                }
            )
            del record["history"][:-HISTORY_LIMIT]
        try:
            write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            raise BaselineError(
                f"cannot write the baseline {path}: {exc.strerror or exc}; make "
                f"{self.base_dir} writable, or pass another --webperf-baseline-dir"
            ) from None
        return path

    def _existing(self, path: Path, nodeid: str) -> dict[str, Any]:
        empty = {
            "schema": SCHEMA,
            "nodeid": nodeid,
            "machine_id": self.machine_id,
            "measurements": {},
        }
        if not path.is_file():
            return empty
        try:
            return self._read(path)
        except NewerSchemaError:
            raise  # never overwrite a format this version does not understand
        except BaselineError:
            aside = path.with_name(f"{path.name}.corrupt-{dt.datetime.now():%Y%m%dT%H%M%S}")
            os.replace(path, aside)
            return empty


def _check_shape(path: Path, data: Any) -> None:
    def bad(what: str) -> BaselineError:
        return BaselineError(
            f"baseline file {path} is not a pytest-webperf baseline ({what}); {HOW_TO_FIX}"
        )

    if not isinstance(data, dict):
        raise bad("top level is not an object")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise bad(f"'schema' is {schema!r}, expected {SCHEMA}")
    if schema > SCHEMA:
        raise NewerSchemaError(
            f"baseline file {path} was written by a newer pytest-webperf (schema {schema}, "
            f"this version reads {SCHEMA}); upgrade pytest-webperf, or delete the file"
        )
    records = data.get("measurements")
    if not isinstance(records, dict):
        raise bad("'measurements' is not an object")
    for name, record in records.items():
        if not (
            isinstance(record, dict)
            and isinstance(record.get("latest"), dict)
            and isinstance(record["latest"].get("measurement"), dict)
            and isinstance(record.get("history"), list)
        ):
            raise bad(f"measurement {name!r} lacks 'latest.measurement' or 'history'")


@dataclass(frozen=True)
class StoreSize:
    """One machine's directory of the store: its files, and the bytes its profiles take."""

    machine_id: str
    files: int
    size: int
    profiles: int
    profile_size: int


def store_sizes(base_dir: Path) -> list[StoreSize]:
    """What each machine's directory under ``base_dir`` holds (unreadable files count
    by their size alone)."""
    found = []
    for directory in sorted(d for d in Path(base_dir).iterdir() if d.is_dir()):
        files = sorted(directory.glob("*.json"))
        profiles = profile_size = 0
        for path in files:
            for _, latest in _latest_entries(path):
                profile = latest["measurement"].get("profile")
                if profile is not None:
                    profiles += 1
                    profile_size += len(json.dumps(profile, indent=1, sort_keys=True))
        size = sum(p.stat().st_size for p in files)
        found.append(StoreSize(directory.name, len(files), size, profiles, profile_size))
    return found


def strip_profiles(
    base_dir: Path, saved_before: str, *, dry_run: bool = False
) -> list[tuple[Path, str, int]]:
    """Remove the profile of every ``latest`` entry saved before ``saved_before`` (an
    ISO 8601 time): a profile is worth its bytes while runs compare against it. Each
    file rewritten atomically; returns (file, measurement, bytes of its profile)."""
    removed = []
    for path in sorted(Path(base_dir).glob("*/*.json")):
        entries = [(n, e) for n, e in _latest_entries(path) if e["measurement"].get("profile")]
        old = [(n, e) for n, e in entries if str(e.get("saved_at", "")) < saved_before]
        if not old:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for name, latest in old:
            profile = latest["measurement"]["profile"]
            removed.append((path, name, len(json.dumps(profile, indent=1, sort_keys=True))))
            data["measurements"][name]["latest"]["measurement"]["profile"] = None
        if not dry_run:
            write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return removed


def _latest_entries(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(measurement name, latest entry) of a baseline file; none if it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        _check_shape(path, data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, BaselineError):
        return []
    return [(name, record["latest"]) for name, record in data["measurements"].items()]
