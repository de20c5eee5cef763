"""pytest-webperf."""
