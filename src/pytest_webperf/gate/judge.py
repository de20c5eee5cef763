"""The one judge: every verdict, whatever it is judged against, decided here through
``decide.decide`` (the session calls it for each measurement).

- An A/B run (``against`` with the base's runs): against side A, pair by pair (the
  process instances and the looks taken are in ``against``).
- A target new since the base (``against``, no base runs): by the absolute limits
  alone, said in the notes.
- Otherwise: against this machine's stored baseline. A broken baseline file raises
  ``BaselineError`` (it fails this test only), except under --webperf-save, which
  replaces it (the fix its message names).

A measurement with a CPU profile gets its diff here too (``attribution.attribute``),
scaled by the same estimate of ``cpu_per_req`` its check is judged on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_webperf.errors import BaselineError
from pytest_webperf.gate import attribution, baseline, decide, estimates, undecided
from pytest_webperf.gate.grammar import Check
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.models.measurement import Measurement


def judge(
    measurement: Measurement,
    *,
    store_for: Callable[[Measurement], baseline.BaselineStore],
    run_checks: Sequence[Check] | None = None,
    saving: bool = False,
    checks: Sequence[Check] | None = None,
    max_error_rate: float | None = None,
    require_power: bool = False,
    evidence: undecided.Evidence | None = None,
    counted: Measurement | None = None,
) -> Measurement:
    """The measurement with its verdict. ``checks``: the test's (marker), else
    ``run_checks`` (the run's), else ``decide.default_checks``; ``store_for``: the
    baseline store of a measurement's machine id, read only when there is no A/B base;
    ``saving``: this run saves baselines (--webperf-save); ``evidence``: what the run
    spent and could do besides, said on the line of a check it leaves undecided;
    ``counted``: the same load counted (``--webperf-count=auto``), whose
    ``instructions_per_req`` check decides the CPU-cost checks timing left open."""
    settled_by = None if counted is None else counted.verdict
    chosen = tuple(checks or run_checks or decide.default_checks(measurement))
    bound = decide.mostly_generator_bound(measurement.runs) or decide.mostly_generator_bound(
        measurement.base_runs
    )
    against = measurement.against
    if against is not None:
        current = dataclasses.replace(measurement, base_runs=())
        if not measurement.base_runs:  # nothing to compare with: absolute limits only
            verdict = decide.decide(
                current,
                None,
                chosen,
                generator_bound=bound,
                max_error_rate=max_error_rate,
                require_power=require_power,
            )
            note = (
                f"{measurement.server} does not exist at {against.get('ref')}: measured "
                "alone, nothing to compare with"
            )
            verdict = dataclasses.replace(
                verdict,
                reasons=tuple(r for r in verdict.reasons if r != decide.NO_BASELINE),
                notes=(*verdict.notes, note),
            )
            return dataclasses.replace(measurement, verdict=verdict)
        base = dataclasses.replace(current, runs=measurement.base_runs)
        instances = tuple(against.get("instances", ()))
        verdict = decide.decide(
            current,
            base,
            chosen,
            generator_bound=bound,
            instances=instances,
            look=max(1, int(against.get("looks", 1))),
            max_error_rate=max_error_rate,
            require_power=require_power,
            evidence=evidence,
            counted=settled_by,
        )
        diffed = None
        if measurement.profile is not None:
            cpu = estimates.paired_estimate(METRICS["cpu_per_req"], current, base, instances)
            diffed = attribution.attribute(measurement.profile, cpu)
        return dataclasses.replace(measurement, verdict=verdict, profile=diffed)
    notes: list[str] = []
    try:
        stored = store_for(measurement).load(measurement.nodeid, measurement.name)
    except baseline.NewerSchemaError:
        raise  # never replaced: the store refuses to overwrite a newer format
    except BaselineError as exc:
        if not saving:
            raise
        stored = None
        notes.append(f"the stored baseline is unreadable, this run replaces it: {exc}")
    if stored is None:
        notes += other_machines_note(store_for(measurement), measurement)
    verdict = decide.decide(
        measurement,
        stored,
        chosen,
        generator_bound=bound,
        saving=saving,
        max_error_rate=max_error_rate,
        require_power=require_power,
        evidence=evidence,
        counted=settled_by,
    )
    verdict = dataclasses.replace(verdict, notes=(*verdict.notes, *notes))
    profile: Mapping[str, Any] | None = measurement.profile
    if profile is not None and stored is not None:
        cpu = estimates.level_estimate(METRICS["cpu_per_req"], measurement, stored)
        profile = attribution.attribute(profile, cpu, stored=stored.profile, against_stored=True)
    return dataclasses.replace(measurement, verdict=verdict, profile=profile)


def other_machines_note(store: baseline.BaselineStore, measurement: Measurement) -> list[str]:
    """Why a measurement with no baseline here may have one elsewhere: the stores of
    other machine ids that hold it (never compared across machines)."""
    others = store.other_machines(measurement.nodeid, measurement.name)
    if not others:
        return []
    return [
        f"baselines exist for other machines ({', '.join(others)}), not for "
        f"{store.machine_id}: performance differs across machines, so they are "
        "not compared (--webperf-machine-id=NAME names a fleet)"
    ]
