"""Targets: what load is sent to. See ``base.Target`` for the seam."""

from pytest_webperf.targets.base import Target
from pytest_webperf.targets.container import ContainerTarget, Limits, start_target
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.process import ProcessTarget

__all__ = ["ContainerTarget", "ExternalTarget", "Limits", "ProcessTarget", "Target", "start_target"]
