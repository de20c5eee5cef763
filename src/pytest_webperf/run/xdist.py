"""pytest-xdist from the plugin's side: a worker measures and sends its session's output,
the controller hands out the run's lock file, receives, reports and saves (registered by
the plugin in its role)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_webperf.run.lock import MeasurementLock
from pytest_webperf.run.session import WebperfSession

if TYPE_CHECKING:  # annotations only: pytest is imported by plugin.py alone
    import pytest

# pytest-xdist. Decision: a lock, not ``xdist_group`` + ``--dist loadgroup``.
# - Every --dist mode works, plain ``-n 2`` included: nothing to refuse, and a suite
#   that merely has the plugin installed is never told to change its dist mode.
# - loadgroup appends "@group" to grouped tests' node ids, which would split each
#   test's baselines between runs with and without xdist.
# - An flock dies with its worker: a crashed worker never blocks the others.
# The cost: a worker that draws a webperf test while another measures waits for it.
WORKER_LOCK = "webperf_lock"  # workerinput key: the run's lock file


WORKER_OUTPUT = "webperf"  # workeroutput key: WebperfSession.worker_output()


def join_xdist(config: pytest.Config, session: WebperfSession) -> None:
    """Registered only in its role: a worker measures and sends, the controller
    receives, reports and saves."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        session.distribution.worker = str(workerinput["workerid"])
        if WORKER_LOCK in workerinput:
            session.distribution.lock = MeasurementLock(Path(workerinput[WORKER_LOCK]))
        config.pluginmanager.register(_XdistWorker(session), "webperf-xdist-worker")
    elif config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(session), "webperf-xdist-controller")


class _XdistWorker:
    def __init__(self, webperf: WebperfSession) -> None:
        self.webperf = webperf

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # between xdist's hook wrapper setting up workeroutput and sending it
        session.config.workeroutput[WORKER_OUTPUT] = self.webperf.worker_output()  # type: ignore[attr-defined]


class _XdistController:
    def __init__(self, webperf: WebperfSession) -> None:
        self.webperf = webperf
        self.lock_path: Path | None = None

    def pytest_configure_node(self, node: Any) -> None:
        if self.lock_path is None:
            fd, name = tempfile.mkstemp(prefix="pytest-webperf-", suffix=".lock")
            os.close(fd)
            self.lock_path = Path(name)
        node.workerinput[WORKER_LOCK] = str(self.lock_path)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.webperf.distribution.collected = tuple(ids)

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
        if output:
            self.webperf.receive(str(node.gateway.id), output)
        elif error is not None:  # it crashed before sending anything
            self.webperf.distribution.lost.append(str(node.gateway.id))

    def pytest_unconfigure(self) -> None:
        if self.lock_path is not None:
            self.lock_path.unlink(missing_ok=True)
