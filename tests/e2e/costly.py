"""The ``costly`` catalogue server (tests/servers/costly) in an A/B test's repository,
its CPU cost per request (``COST_US``) set by the test."""

from __future__ import annotations

import shutil
from pathlib import Path

COSTLY = Path(__file__).resolve().parents[1] / "servers" / "costly"


def set_cost(repo: Path, cost: int) -> None:
    """The microseconds of CPU the repository's costly server burns per request."""
    toml = repo / "servers" / "costly" / "server.toml"
    text = toml.read_text()
    start = text.index('COST_US = "')
    end = text.index('"', start + len('COST_US = "'))
    toml.write_text(f'{text[:start]}COST_US = "{cost}{text[end:]}')


def copy_costly(repo: Path, cost: int) -> None:
    """The costly server into ``repo``'s catalogue, burning ``cost`` us per request."""
    shutil.copytree(COSTLY, repo / "servers" / "costly")
    set_cost(repo, cost)
