"""The seed studies' published figures beside this run's (``../shared/EXPERIMENTS.md``).

The studies ran on other hardware, at other scales: their numbers are references for
shape (who beats whom), not values to reach. So each comparison puts the study's
figure beside this machine's and says whether the study's ordering of the servers
holds here. A comparison is made only for the suites' own tests (matched by test file
and function) and servers that both the study and this run measured.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.gate import ordering
from pytest_webperf.report.studies.published import STUDIES, Figures, Study
from pytest_webperf.report.table import Entry, fmt, number, rep_rps, repetitions

KEPT = 0.9  # a paced server that served this share of the offered rate kept up


def _test_of(nodeid: str) -> str:
    """``suites/test_x.py::test_y[params]`` -> ``test_x.py::test_y``."""
    file, _, rest = nodeid.partition("::")
    return f"{file.rsplit('/', 1)[-1]}::{rest.partition('[')[0]}"


def _value(entry: Entry, metric: str) -> float | None:
    if metric == "rps":
        return number(entry.get("rps"))
    values = [_rep_value(r, metric) for r in repetitions(entry)]
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def _rep_value(rep: Mapping[str, Any], metric: str) -> float | None:
    if metric == "rps":
        return rep_rps(rep)
    if metric == "tps":  # seed 002's MQTT throughput: stored / (last stored - first sent)
        mqtt = rep.get("mqtt")
        return number(mqtt.get("tps")) if isinstance(mqtt, Mapping) else None
    return number(rep.get(metric))


def _series(rep: Mapping[str, Any]) -> tuple[float, ...]:
    """A repetition's per-second throughput (the floor under its spread)."""
    series = rep.get("series")
    found = []
    for snap in series if isinstance(series, list) else ():
        if not isinstance(snap, Mapping):
            continue
        requests, elapsed = number(snap.get("requests")), number(snap.get("elapsed"))
        if requests is not None and elapsed:
            found.append(requests / elapsed)
    return tuple(found)


def side(entry: Entry, metric: str) -> ordering.Side:
    """One server's repetitions as the ordering judge reads them (a report without
    repetitions gives its one figure: a single unit, never ranked)."""
    reps = [r for r in repetitions(entry) if _rep_value(r, metric) is not None]
    name = str(entry.get("server"))
    if not reps:
        value = _value(entry, metric)
        return ordering.Side(name, () if value is None else (value,))
    instances = [r.get("instance") for r in reps]
    return ordering.Side(
        name,
        tuple(float(_rep_value(r, metric) or 0.0) for r in reps),
        tuple(i if isinstance(i, int) and not isinstance(i, bool) else None for i in instances),
        tuple(_series(r) for r in reps),
        sum(1 for r in reps if r.get("generator_bound") is True),
    )


def _counted_times(entry: Entry) -> list[float]:
    """The time taken by each counted repetition (``requests=N``) of an entry."""
    return [
        t
        for r in repetitions(entry)
        if number(r.get("requests_asked")) is not None
        for t in [number(r.get("time_taken_s")) or number(r.get("duration_s"))]
        if t is not None
    ]


def _offered(entry: Entry) -> float | None:
    """A paced entry's offered rate (users / interval), requests (or MQTT messages) per
    second."""
    workload = entry.get("workload")
    interval = number(workload.get("interval_s")) if isinstance(workload, Mapping) else None
    if interval is None:  # an MQTT run's pacing is its repetitions'
        mqtt: Mapping[str, Any] = next(
            (r["mqtt"] for r in repetitions(entry) if isinstance(r.get("mqtt"), Mapping)), {}
        )
        interval = number(mqtt.get("interval_s"))
    users = number(entry.get("concurrency"))
    return users / interval if interval and users else None


def _collapse(
    study: Study, group: Figures, servers: Sequence[str], here: Mapping[str, float], users: int
) -> dict[str, Any] | None:
    """Where the study's servers stored well under the offered rate (``collapse_from``):
    each server's share of the offered rate there and here, and those that fell short
    here too (under ``KEPT``)."""
    if not study.collapse_from or not study.interval_s or group.users < study.collapse_from:
        return None
    study_shares = {
        s: v / (group.users / study.interval_s)
        for s in servers
        if (v := group.values.get(s)) is not None
    }
    shares = {s: here[s] / (users / study.interval_s) for s in servers}
    return {
        "study": study_shares,
        "here": shares,
        "reproduced": [s for s in servers if shares[s] < KEPT],
    }


def _collapse_text(collapse: Mapping[str, Any]) -> str:
    """``the study's collapse (it stored 21-43 % of the offered rate): ...``."""
    study = [float(v) for v in collapse["study"].values()]
    here = collapse["here"]
    span = f"{min(study):.0%}-{max(study):.0%}" if study else "less"
    head = f"the study's collapse (its servers stored {span} of the offered rate)"
    short = collapse["reproduced"]
    if not short:
        return f"{head}: not reproduced, every server stored {min(here.values()):.0%} or more"
    fell = ", ".join(f"{s} {here[s]:.0%}" for s in short)
    return f"{head}: reproduced here for {fell}"


def _path(entry: Entry) -> str | None:
    """The workload's path: its own, or its one mix entry's (``webperf.capacity(mix=[...])``
    of one request); None when it has none."""
    workload = entry.get("workload")
    if not isinstance(workload, Mapping):
        return None
    path = workload.get("path")
    mix = workload.get("mix")
    if not path and isinstance(mix, list) and len(mix) == 1 and isinstance(mix[0], Mapping):
        path = mix[0].get("path")
    return str(path) if path else None


def _nearest(groups: Sequence[Figures], path: str | None, users: int) -> Figures | None:
    """The study's group for this workload whose number of users is nearest ``users``
    (by ratio): 100 users here compare with the study's 100, 10,000 with its 10,000."""
    fitting = [g for g in groups if g.path is None or g.path == path]
    if not fitting or users < 1:
        return None
    return min(fitting, key=lambda g: abs(math.log(users / g.users)))


def compare(
    entries: Sequence[Entry],
    placement: Mapping[str, Any] | None = None,
    cores: int | None = None,
) -> list[dict[str, Any]]:
    """One comparison per workload and number of users this run measured in a study's
    suite: this run's figure per server beside the study's nearest group, and the
    study's ordering judged here pair by pair (``ordering.judge``). ``placement`` and
    ``cores`` (the report's) say whether server and generator shared the cores."""
    found = []
    for study in STUDIES:
        mine = [e for e in entries if _test_of(str(e.get("nodeid", ""))) == study.test]
        runs: dict[tuple[str | None, int], dict[str, float]] = {}
        sides: dict[tuple[str | None, int], dict[str, ordering.Side]] = {}
        counted: dict[tuple[str | None, int], dict[str, list[float]]] = {}
        kept: dict[tuple[str | None, int], list[bool]] = {}
        for e in mine:
            value = _value(e, study.metric)
            users = int(number(e.get("concurrency")) or 0)
            key = (_path(e), users)
            server = str(e.get("server"))
            if value is not None and server not in runs.get(key, {}):
                runs.setdefault(key, {})[server] = value
                sides.setdefault(key, {})[server] = side(e, study.metric)
                counted.setdefault(key, {})[server] = _counted_times(e)
                offered = _offered(e)
                if offered is not None:
                    kept.setdefault(key, []).append(value >= KEPT * offered)
        shared = ordering.shared_cores(placement, cores)
        for (path, users), here in runs.items():
            group = _nearest(study.groups, path, users)
            if group is None:
                continue
            ranked = [s for s in group.ranking if s in here]
            if len(ranked) < 2:
                continue
            order_here = sorted(ranked, key=lambda s: -here[s])
            # paced load that every server kept up with ranks nothing: they all did
            all_kept = bool(kept.get((path, users))) and all(kept[(path, users)])
            pairs = (
                []
                if all_kept
                else ordering.judge_ranking(
                    [sides[(path, users)][s] for s in ranked],
                    [group.ratio(a, b) for a, b in itertools.pairwise(ranked)],
                )
            )
            status = ordering.NOT_RANKED if all_kept else ordering.overall(pairs)
            short = ordering.short_counted(
                {s: counted[(path, users)][s] for s in ranked if counted[(path, users)][s]}
            )
            notes = [n for n in (short, "" if all_kept else shared) if n]
            collapse = _collapse(study, group, ranked, here, users)
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
                    "ranking": order_here,
                    "status": status,
                    "pairs": [p.to_dict() for p in pairs],
                    "kept": all_kept,
                    "notes": notes,
                    "holds": None
                    if status in (ordering.NOT_RANKED, ordering.NOT_SEPARATED)
                    else status == ordering.HOLDS,
                    **({"collapse": collapse} if collapse else {}),
                }
            )
    return found + capacity_compare(entries)


def capacity_compare(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The studies' orderings judged on capacity: per workload, the suite's
    ``webperf.capacity`` tests' highest rates within the SLO, beside the study's figures
    at its heaviest load (the ranking a study under load gives), each pair judged from
    the two searches' brackets (``ordering.judge_capacities``)."""
    found = []
    for study in STUDIES:
        by_path: dict[str | None, dict[str, Mapping[str, Any]]] = {}
        users: dict[str | None, int] = {}
        for e in entries:
            capacity = e.get("capacity")
            if _test_of(str(e.get("nodeid", ""))) != study.capacity_test:
                continue
            if isinstance(capacity, Mapping):
                path = _path(e) or None
                by_path.setdefault(path, {}).setdefault(str(e.get("server")), capacity)
                users[path] = int(number(e.get("concurrency")) or 0)
        for path, here in by_path.items():
            fitting = [g for g in study.groups if path is None or g.path in (None, path)]
            if not fitting:
                continue
            group = max(fitting, key=lambda g: g.users)
            ranked = [s for s in group.ranking if s in here]
            if len(ranked) < 2:
                continue
            rate = {s: float(here[s].get("rate") or 0.0) for s in ranked}
            pairs = [
                ordering.judge_capacities(here[a], here[b]) for a, b in itertools.pairwise(ranked)
            ]
            status = ordering.overall(pairs)
            found.append(
                {
                    "seed": study.seed,
                    "title": study.title,
                    "metric": "capacity",
                    "label": f"capacity, req/s within {here[ranked[0]].get('slo') or 'the SLO'}",
                    "path": path or group.path,
                    "users": users[path],
                    "study_users": group.users,
                    "servers": ranked,
                    "here": rate,
                    "study": {s: group.values.get(s) for s in ranked},
                    "study_ranking": ranked,
                    "ranking": sorted(ranked, key=lambda s: -rate[s]),
                    "status": status,
                    "pairs": [p.to_dict() for p in pairs],
                    "kept": False,
                    "notes": [],
                    "holds": None
                    if status in (ordering.NOT_RANKED, ordering.NOT_SEPARATED)
                    else status == ordering.HOLDS,
                }
            )
    return found


def of_report(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``compare`` on a whole report: its tests, its placement and its machine's cores."""
    tests = report.get("tests")
    machine = report.get("machine")
    cores = number(machine.get("cores")) if isinstance(machine, Mapping) else None
    placement = report.get("placement")
    return compare(
        [t for t in tests if isinstance(t, Mapping)] if isinstance(tests, list) else [],
        placement if isinstance(placement, Mapping) else None,
        None if cores is None else int(cores),
    )


def pair_text(pair: Mapping[str, Any]) -> str:
    """``nginx-cache/varnish 1.09x, 95% CI 0.97..1.22: not separated (why)``."""
    return ordering.Ordering(
        str(pair.get("first")),
        str(pair.get("second")),
        number(pair.get("ratio")),
        number(pair.get("low")),
        number(pair.get("high")),
        str(pair.get("status")),
        str(pair.get("why") or ""),
        number(pair.get("confidence")) or ordering.CONFIDENCE,
        bracket=pair.get("bracket") is True,
    ).text()


def verdict_text(c: Mapping[str, Any]) -> str:
    """The study line's conclusion, in words."""
    collapse = c.get("collapse")
    tail = f"; {_collapse_text(collapse)}" if isinstance(collapse, Mapping) else ""
    if c.get("kept"):
        return f"every server kept the offered rate: no ranking at this load{tail}"
    study = " > ".join(c["study_ranking"])
    pairs = "; ".join(pair_text(p) for p in c.get("pairs", ()))
    return f"{pairs}; the study's {study}: {c.get('status')}{tail}"


def lines(comparisons: Sequence[Mapping[str, Any]]) -> list[str]:
    """The comparisons as terminal lines: one per study group, under one heading, each
    note indented under its line."""
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
        out.append(
            f"  seed {c['seed']}{where}, {fmt(c['users'])} users here "
            f"({fmt(c['study_users'])} in the study), {c['label']}: {figures}; "
            f"{verdict_text(c)}"
        )
        out += [f"    note: {n}" for n in c.get("notes", ())]
    return out
