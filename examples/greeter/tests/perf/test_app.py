"""Performance gate for the greeter service.

Locally:  pytest tests/perf --webperf-duration=3s --webperf-repeat=3
In CI:    the pytest-webperf action (.github/workflows/perf.yml), which measures
          this change against its base branch in the same job.
"""


def test_hello(webperf):
    app = webperf.server("app")  # servers/app/: image built once, started, health-checked
    result = webperf.http(app, path="/hello?name=perf&lang=fr")
    assert result.errors == 0
