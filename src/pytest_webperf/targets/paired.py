"""A target started twice for an A/B run: the change (B) and its base (A).

The test's code sees one target (B's url, name and logs: what the working tree serves);
the measurement loop sees both. ``base`` is None when the target is the same at the
base ref and the run does not measure unchanged targets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_webperf.targets.base import Target, restart


class PairedTarget:
    def __init__(
        self, change: Target, base: Target | None, *, changed: bool, compared: str = ""
    ) -> None:
        self.change = change
        self.base = base
        self.changed = changed
        self.compared = compared  # what decided ``changed``, for the unchanged line
        self.name = change.name
        self.host, self.port = change.host, change.port

    @property
    def url(self) -> str:
        return self.change.url

    def side(self, letter: str) -> Target:
        """``"A"``: the base, ``"B"``: the change."""
        if letter == "B":
            return self.change
        if self.base is None:
            raise ValueError(f"{self.name} has no base side (unchanged)")
        return self.base

    def parts(self) -> Mapping[str, int]:
        return self.change.parts()

    def check_alive(self) -> None:
        self.change.check_alive()
        if self.base is not None:
            self.base.check_alive()

    def logs(self) -> str:
        return self.change.logs()

    def restart(self) -> None:
        """Both sides afresh (the same placement, new process instances)."""
        for target in (self.base, self.change):
            if target is not None:
                restart(target)
        self.host, self.port = self.change.host, self.change.port

    def describe(self) -> dict[str, Any]:
        return self.change.describe()
