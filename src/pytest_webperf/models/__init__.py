"""Values that are saved or sent, each with ``to_dict``/``from_dict``.

The public names: ``pytest_webperf.models.RunResult`` (one repetition), ``Measurement``
(one measurement, judged) and ``Verdict`` live in ``models/measurement.py``."""

from pytest_webperf.models.measurement import SCHEMA_VERSION, Measurement, RunResult, Verdict

__all__ = ["SCHEMA_VERSION", "Measurement", "RunResult", "Verdict"]
