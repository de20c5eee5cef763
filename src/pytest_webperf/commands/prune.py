"""``webperf prune``: which ``webperf/*`` image tags the catalogue no longer builds;
with ``--baselines DIR``, the baseline store's size per machine and its old profiles.

A tag is ``webperf/<server>:<content hash>``; editing a server makes a new hash and
leaves the old image behind. Only tags of servers in the given catalogue are stale:
an image of a server the catalogue does not know (another ``--servers`` directory,
another checkout) is kept, since nothing here says it is unused.

A baseline keeps at most one profile per measurement (its ``latest`` entry, bounded:
``profiling/digest.py``), so the store is bounded by construction; ``--baselines DIR
--profiles-older-than 30d`` trims it further, removing the profiles of baselines saved
before then (a profile is only worth its bytes while runs compare against it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.gate.baseline import store_sizes, strip_profiles
from pytest_webperf.targets.catalog import Catalog, image_tag

REPO_PREFIX = "webperf/"


@dataclass(frozen=True)
class PrunePlan:
    stale: tuple[str, ...]  # tags the catalogue no longer builds: to remove
    unknown: tuple[str, ...]  # tags of servers this catalogue does not have: kept


def current_tags(catalog: Catalog) -> dict[str, str]:
    """Image repository -> the tag the catalogue builds now."""
    tags = {}
    for spec in catalog:
        built = catalog.image_spec(spec)  # image_from: another server's image
        tags[built.image_repo] = image_tag(built)
    return tags


def plan(tags: Iterable[str], current: dict[str, str]) -> PrunePlan:
    """Sort the engine's ``webperf/*`` tags into stale and unknown (others ignored)."""
    stale, unknown = [], []
    for tag in sorted(set(tags)):
        repo = tag.rpartition(":")[0]
        if not repo.startswith(REPO_PREFIX):
            continue
        if repo not in current:
            unknown.append(tag)
        elif current[repo] != tag:
            stale.append(tag)
    return PrunePlan(tuple(stale), tuple(unknown))


def baselines(base_dir: Path, older_than_s: float | None, *, dry_run: bool) -> list[str]:
    """What ``webperf prune --baselines`` prints: each machine's files, bytes and
    profiles, then the profiles removed (or that would be) saved ``older_than_s`` ago."""
    lines = [
        f"{s.machine_id}: {s.files} file(s), {s.size / 1024:.0f} KiB; {s.profiles} profile(s), "
        f"{s.profile_size / 1024:.0f} KiB"
        for s in store_sizes(base_dir)
    ] or [f"{base_dir}: no baselines"]
    if older_than_s is None:
        return lines
    now = dt.datetime.now(dt.timezone.utc)  # dt.UTC is 3.11+
    cutoff = (now - dt.timedelta(seconds=older_than_s)).isoformat(timespec="seconds")
    removed = strip_profiles(base_dir, cutoff, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    lines += [
        f"{verb} the profile of {name!r} in {path} ({size / 1024:.0f} KiB)"
        for path, name, size in removed
    ]
    total = sum(size for _, _, size in removed)
    lines.append(
        f"webperf: {verb} {len(removed)} profile(s) saved before {cutoff}, {total / 1024:.0f} KiB"
    )
    return lines
