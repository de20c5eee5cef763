"""A process target's build (``webperf.process(..., build=...)``): run in each side's tree
before the server starts, or its whole output restored from the build cache."""
