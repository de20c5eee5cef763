"""The HTML report: one self-contained page, its tables, charts and flame graph."""
