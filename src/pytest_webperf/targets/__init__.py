"""Targets: what load is sent to. See ``base.Target`` for the seam."""

from pytest_webperf.targets.base import Target
from pytest_webperf.targets.container import ContainerTarget, Limits, start_target
from pytest_webperf.targets.external import ExternalTarget

__all__ = ["ContainerTarget", "ExternalTarget", "Limits", "Target", "start_target"]
