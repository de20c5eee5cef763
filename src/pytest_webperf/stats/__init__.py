"""The statistics of the gate, in plain Python."""
