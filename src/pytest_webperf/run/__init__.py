"""The pytest run: its state, its end, its processes under pytest-xdist."""
