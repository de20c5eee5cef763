"""The seed studies as regression gates. Concurrency, duration and repetitions come
from the command line (``--webperf-concurrency=100,500,1000``), so one command
re-runs a study at the seed's scale or guards it at CI scale."""
