"""Hooks a ``conftest.py`` or a plugin can implement to add to what webperf records.

Like pytest-benchmark's: implement them by name, e.g. in ``conftest.py``::

    def pytest_webperf_update_machine_info(config, machine_info):
        machine_info["runner_pool"] = os.environ.get("RUNNER_POOL", "local")

    def pytest_webperf_update_json(config, report):
        report["ci"] = {"build": os.environ.get("BUILD_ID")}

Every implementation is called (none "wins"); they change the dict in place and
return nothing. Under pytest-xdist they run in the controller and in every worker,
so they must give the same answer in each (read the environment, not a counter).

This module is pytest glue, like plugin.py: it imports pytest for the marker.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_webperf_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add to (or correct) the machine info, once per run, before anything uses it.

    ``machine_info`` holds what ``pytest_webperf.models.machine.MachineInfo`` collected:
    ``cpu_model``, ``cores``, ``memory_gib``, ``kernel``, ``engine_version``,
    ``cpu_quota``, ``network_mode``, ``placement``. Every key (yours included) is
    part of the machine fingerprint, so a key you add gives a new machine id and a
    new baseline directory: add what makes results incomparable (a runner pool, a
    BIOS setting), not what changes every run (a date, a build number; those belong
    in ``pytest_webperf_update_json``). Values must be JSON (str, number, bool,
    None, lists and dicts of them). ``cpu_model``, ``cores``, ``memory_gib`` and
    ``kernel`` cannot be removed (the other built-in keys fall back to their
    defaults); ``--webperf-machine-id=NAME`` replaces the whole id instead.

    The result is in the JSON report's ``machine`` and in every saved baseline.
    """


@pytest.hookspec
def pytest_webperf_update_json(config: pytest.Config, report: dict[str, Any]) -> None:
    """Add to the JSON report (``--webperf-json``) just before it is written.

    ``report`` is the whole document (see docs/reference/report-schema.md): top-level keys
    such as ``machine``, ``config`` and ``tests`` (one entry per measurement). Add
    your own top-level keys, or keys inside a test entry; changing the built-in
    ones makes the report disagree with the terminal table and the baselines. The
    HTML and Markdown reports are written from the report as it was before this hook.
    """
