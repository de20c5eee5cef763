"""The seed studies' published figures beside this run's (``../shared/EXPERIMENTS.md``).

The studies ran on other hardware, at other scales: their numbers are references for
shape (who beats whom), not values to reach. So each comparison puts the study's
figure beside this machine's and says whether the study's ordering of the servers
holds here. A comparison is made only for the suites' own tests (matched by test file
and function) and servers that both the study and this run measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_webperf.report.table import Entry, fmt, number, repetitions

KEPT = 0.9  # a paced server that served this share of the offered rate kept up


@dataclass(frozen=True)
class Figures:
    """One of a study's published groups: a workload at a number of users."""

    path: str | None  # None: the study did not say, or had one workload
    users: int
    values: Mapping[str, float | None]  # catalogue server -> figure (None: ranked only)
    ranking: tuple[str, ...]  # best first, as the study found it


@dataclass(frozen=True)
class Study:
    seed: str
    title: str
    test: str  # "test_seed004_c10k.py::test_c10k": the suite's test it compares
    metric: str  # "rps" or "requests" (mean per repetition)
    label: str
    groups: tuple[Figures, ...]


def _f(path: str | None, users: int, ranking: str, **values: float | None) -> Figures:
    return Figures(
        path,
        users,
        {k.replace("_", "-"): v for k, v in values.items()},
        tuple(ranking.split(" > ")),
    )


STUDIES: tuple[Study, ...] = (
    Study(
        "000",
        "Apache+PHP vs Node.js (wrk, 20 s)",
        "test_seed000_apache_vs_node.py::test_apache_vs_node",
        "requests",
        "requests per repetition",
        (
            _f("/hello", 100, "node > apache-php", apache_php=9_000, node=11_800),
            _f("/hello", 500, "node > apache-php", apache_php=12_500, node=59_000),
            _f("/hello", 1000, "node > apache-php", apache_php=24_000, node=118_000),
        ),
    ),
    Study(
        "001",
        "nginx proxy_cache vs Varnish in front of Apache (ab -c 200)",
        "test_seed001_proxy_cache.py::test_proxy_cache",
        "rps",
        "req/s",
        (_f(None, 200, "nginx-cache > varnish", nginx_cache=1_207, varnish=None),),
    ),
    Study(
        "002",
        "Tomcat vs Node vs Go, HTTP telemetry into MariaDB (500 ms per user)",
        "test_mqtt_qos2.py::test_http_telemetry",
        "rps",
        "req/s",
        (
            _f(
                "/telemetry",
                1000,
                "go-mqtt > tomcat-mqtt > node-mqtt",
                go_mqtt=1_639,
                tomcat_mqtt=1_221,
                node_mqtt=953,
            ),
        ),
    ),
    Study(
        "003",
        "async vs process pool, alone and behind a load balancer (wrk -c 1000, 10 s)",
        "test_seed003_async_vs_pool.py::test_async_vs_pool",
        "rps",
        "req/s",
        (
            _f(
                "/hello",
                1000,
                "python-async > lb-async > python-pool > lb-pool",
                python_async=6_900,
                lb_async=5_000,
                python_pool=1_800,
                lb_pool=225,
            ),
        ),
    ),
    Study(
        "004",
        "nginx vs Node vs a libuv Python server at C10K (ab -n 80000 -c 10000)",
        "test_seed004_c10k.py::test_c10k",
        "rps",
        "req/s",
        (
            _f(
                "/500b",
                10_000,
                "nginx > python-uv > node",
                nginx=15_674,
                python_uv=9_420,
                node=3_775,
            ),
            _f(
                "/20kb",
                10_000,
                "nginx > python-uv > node",
                nginx=15_152,
                python_uv=6_786,
                node=3_415,
            ),
        ),
    ),
)


def _test_of(nodeid: str) -> str:
    """``suites/test_x.py::test_y[params]`` -> ``test_x.py::test_y``."""
    file, _, rest = nodeid.partition("::")
    return f"{file.rsplit('/', 1)[-1]}::{rest.partition('[')[0]}"


def _value(entry: Entry, metric: str) -> float | None:
    if metric == "rps":
        return number(entry.get("rps"))
    values = [number(r.get(metric)) for r in repetitions(entry)]
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def _offered(entry: Entry) -> float | None:
    """A paced entry's offered rate (users / interval), requests per second."""
    workload = entry.get("workload")
    interval = number(workload.get("interval_s")) if isinstance(workload, Mapping) else None
    users = number(entry.get("concurrency"))
    return users / interval if interval and users else None


def _path(entry: Entry) -> str | None:
    workload = entry.get("workload")
    return str(workload.get("path")) if isinstance(workload, Mapping) else None


def _nearest(groups: Sequence[Figures], path: str | None, users: int) -> Figures | None:
    """The study's group for this workload whose number of users is nearest ``users``
    (by ratio): 100 users here compare with the study's 100, 10,000 with its 10,000."""
    fitting = [g for g in groups if g.path is None or g.path == path]
    if not fitting or users < 1:
        return None
    return min(fitting, key=lambda g: abs(math.log(users / g.users)))


def compare(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """One comparison per workload and number of users this run measured in a study's
    suite: this run's figure per server beside the study's nearest group, and whether
    the study's ordering held."""
    found = []
    for study in STUDIES:
        mine = [e for e in entries if _test_of(str(e.get("nodeid", ""))) == study.test]
        runs: dict[tuple[str | None, int], dict[str, float]] = {}
        kept: dict[tuple[str | None, int], list[bool]] = {}
        for e in mine:
            value = _value(e, study.metric)
            users = int(number(e.get("concurrency")) or 0)
            if value is not None:
                runs.setdefault((_path(e), users), {}).setdefault(str(e.get("server")), value)
                offered = _offered(e)
                if offered is not None:
                    kept.setdefault((_path(e), users), []).append(value >= KEPT * offered)
        for (path, users), here in runs.items():
            group = _nearest(study.groups, path, users)
            if group is None:
                continue
            ranked = [s for s in group.ranking if s in here]
            if len(ranked) < 2:
                continue
            ordering = sorted(ranked, key=lambda s: -here[s])
            # paced load that every server kept up with ranks nothing: they all did
            all_kept = bool(kept.get((path, users))) and all(kept[(path, users)])
            found.append(
                {
                    "seed": study.seed,
                    "title": study.title,
                    "metric": study.metric,
                    "label": study.label,
                    "path": path,
                    "users": users,
                    "study_users": group.users,
                    "servers": ranked,
                    "here": {s: here[s] for s in ranked},
                    "study": {s: group.values.get(s) for s in ranked},
                    "study_ranking": ranked,
                    "ranking": ordering,
                    "holds": None if all_kept else ordering == ranked,
                }
            )
    return found


def lines(comparisons: Sequence[Mapping[str, Any]]) -> list[str]:
    """The comparisons as terminal lines: one per study group, under one heading."""
    if not comparisons:
        return []
    out = ["webperf: the studies' figures beside this run's (their hardware, not ours)"]
    for c in comparisons:
        figures = ", ".join(
            f"{s} {fmt(c['here'][s])} ("
            + ("ranked" if c["study"][s] is None else f"study {fmt(c['study'][s])}")
            + ")"
            for s in c["servers"]
        )
        where = f" {c['path']}" if c["path"] else ""
        if c["holds"] is None:
            verdict = "every server kept the offered rate: no ranking at this load"
        elif c["holds"]:
            verdict = "the study's ordering holds"
        else:
            verdict = "differs from the study's " + " > ".join(c["study_ranking"])
        out.append(
            f"  seed {c['seed']}{where}, {fmt(c['users'])} users here "
            f"({fmt(c['study_users'])} in the study), {c['label']}: {figures}; "
            f"here {' > '.join(c['ranking'])}: {verdict}"
        )
    return out
