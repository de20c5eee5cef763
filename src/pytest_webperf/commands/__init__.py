"""The ``webperf`` command's tools (``cli.py`` dispatches to them)."""
