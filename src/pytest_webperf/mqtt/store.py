"""The server's store, read back after a run: rows of ``webperf.telemetry`` in MariaDB.

Queried with the ``mariadb`` client inside the database's own container (docker exec), so
the plugin needs no MySQL driver. Rows of a run are told apart by ``sent_at``: the
generator's send time is never earlier than the run's start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.errors import TargetError

SqlRunner = Callable[[str], str]


@dataclass(frozen=True)
class StoredRow:
    client: int
    seq: int
    sent_at: float
    received_at: float


def parse_rows(text: str) -> list[StoredRow]:
    """Tab-separated ``client_id, seq, sent_at, received_at`` lines (``mariadb -N -B``)."""
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 4 or "NULL" in fields:
            continue
        rows.append(StoredRow(int(fields[0]), int(fields[1]), float(fields[2]), float(fields[3])))
    return rows


class TelemetryStore:
    """``count``/``rows`` of the messages a run's server stored via a given path."""

    def __init__(self, run_sql: SqlRunner, via: str = "mqtt") -> None:
        self.run_sql = run_sql
        self.via = via

    def _where(self, since: float) -> str:
        return f"WHERE via = '{self.via}' AND sent_at >= {since:.6f}"

    def count(self, since: float) -> int:
        text = self.run_sql(f"SELECT COUNT(*) FROM telemetry {self._where(since)}").strip()
        return int(text or 0)

    def rows(self, since: float) -> list[StoredRow]:
        return parse_rows(
            self.run_sql(
                "SELECT client_id, seq, sent_at, UNIX_TIMESTAMP(received_at) "
                f"FROM telemetry {self._where(since)}"
            )
        )


def container_sql(container: Any, port: int) -> SqlRunner:
    """Run SQL with the ``mariadb`` client in the database's container (a docker Container)."""
    base: Sequence[str] = (
        "mariadb",
        "-uwebperf",
        "-pwebperf",
        "-h127.0.0.1",
        f"-P{port}",
        "--quick",
        "-N",
        "-B",
        "webperf",
        "-e",
    )

    def run(sql: str) -> str:
        code, output = container.exec_run([*base, sql], demux=True)
        stdout, stderr = output
        if code != 0:
            raise TargetError(
                f"query on the telemetry store failed ({sql!r}): "
                f"{(stderr or b'').decode(errors='replace').strip()}"
            )
        return (stdout or b"").decode()

    return run
