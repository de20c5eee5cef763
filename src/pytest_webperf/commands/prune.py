"""``webperf prune``: which ``webperf/*`` image tags the catalogue no longer builds.

A tag is ``webperf/<server>:<content hash>``; editing a server makes a new hash and
leaves the old image behind. Only tags of servers in the given catalogue are stale:
an image of a server the catalogue does not know (another ``--servers`` directory,
another checkout) is kept, since nothing here says it is unused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
