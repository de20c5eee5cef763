"""The public home of the ``webperf`` fixture's class: ``pytest_webperf.api.Webperf``
(it lives in ``fixture/handle/webperf.py``); kept so that type hints in users' tests
keep working."""

from pytest_webperf.fixture.handle import Webperf

__all__ = ["Webperf"]
