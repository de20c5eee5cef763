"""The command line every short e2e run starts from: Locust's own plugin off, warnings as
errors, 4 users, 1 s measured after a 0.5 s warm-up (each test adds what it is about)."""

from __future__ import annotations

SHORT = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=4",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
]
