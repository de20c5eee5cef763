"""CPU profiles of a target while it is measured, and their per-function differences."""
