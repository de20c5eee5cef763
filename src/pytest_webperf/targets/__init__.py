"""Targets: what load is sent to. See ``base.Target`` for the seam.

The kinds of target are imported when first named (PEP 562): a container target needs
docker-py and testcontainers, which a run without containers, and every pytest run of a
project that has the plugin installed, need not import.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from pytest_webperf.targets.base import Target

if TYPE_CHECKING:
    from pytest_webperf.targets.container import ContainerTarget, Limits, start_target
    from pytest_webperf.targets.external import ExternalTarget
    from pytest_webperf.targets.process import ProcessTarget

_HOMES = {
    "ContainerTarget": "container",
    "Limits": "container",
    "start_target": "container",
    "ExternalTarget": "external",
    "ProcessTarget": "process",
}

__all__ = [
    "ContainerTarget",
    "ExternalTarget",
    "Limits",
    "ProcessTarget",
    "Target",
    "remove_session_containers",
    "start_target",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def remove_session_containers() -> int:
    """Remove every container this process started: none, and the engine not asked, when
    it started none (the container module is imported to start one)."""
    containers = sys.modules.get(f"{__name__}.container")
    return 0 if containers is None else int(containers.remove_session_containers())
