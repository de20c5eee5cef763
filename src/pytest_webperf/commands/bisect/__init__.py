"""``webperf bisect GOOD BAD``: the first commit that made a test slower."""
