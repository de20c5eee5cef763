"""Pure renderers: they render what they are given and decide nothing."""
