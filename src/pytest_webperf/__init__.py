"""pytest-webperf: performance regression gates for web servers and MQTT brokers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pytest-webperf")  # from the git tag, through setuptools-scm
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0.0.0+unknown"
