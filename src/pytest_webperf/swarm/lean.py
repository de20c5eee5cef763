"""The public home of the lean HTTP user: ``pytest_webperf.swarm.lean.LeanHttpUser`` (it
lives in ``swarm/child/lean.py``, with what only runs in a swarm child); a locustfile
imports it from here. Importing it imports Locust, as any Locust user does."""

from pytest_webperf.swarm.child.lean import LeanHttpUser

__all__ = ["LeanHttpUser"]
