"""The one judge: checks, metrics, estimates, baselines and verdicts."""
