#!/usr/bin/env bash
# The README's second command: set everything up (idempotent), then lint, type-check,
# build the documentation site, validate the CI workflow and run the plugin's own tests (unit + end to end).
# Arguments go to pytest, e.g. ./scripts/test.sh -m "not e2e"
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WEBPERF_WITH_BROWSER=1 "$root/scripts/setup.sh"
cd "$root"
# The end-to-end tests start pytest and a swarm child several hundred times each. Where
# PYTHONDONTWRITEBYTECODE is set (many images set it), every one of them compiled the
# plugin's modules again, and pytest rewrote their asserts again. The caches go to
# __pycache__ (ignored by git). One small run here (a 1 s paced run of a process target,
# 2026-11-26, load average under 1) took 2.1 s of CPU without the caches and with
# Hypothesis's plugin, 1.3 s with the caches and without the plugin.
unset PYTHONDONTWRITEBYTECODE
step() { printf '\n[webperf test] %s\n' "$*" >&2; }
step "ruff"
.venv/bin/ruff check src tests suites benchmarks examples setup.py
.venv/bin/ruff format --check src tests suites benchmarks examples setup.py
step "mypy (strict)"
.venv/bin/mypy
step "import layers (.importlinter, docs/explanation/modules.md)"
.venv/bin/lint-imports --no-logo
step "documentation site (mkdocs.yml: a broken link fails)"
# not --quiet: it drops the warnings before strict mode counts them (mkdocs/mkdocs#4126)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build 2>&1 | { grep -v '^INFO ' || true; }
step "workflow and action schemas"
.venv/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml \
    examples/greeter/.github/workflows/perf.yml
.venv/bin/check-jsonschema --builtin-schema vendor.github-actions action.yml
if [ "$#" -gt 0 ]; then  # your own selection: pytest as given
    step "pytest $*"
    exec .venv/bin/pytest "$@"
fi
# The unit tests measure nothing: both cores share them. The end-to-end tests that only
# check what a user sees (errors counted, reports, refusals, counted measurements) run
# four at a time: they wait on containers and fixed-length runs as much as they compute.
# Those whose assertions read timed figures (marker `timed`, tests/e2e/conftest.py): the
# ones judged on A/B pairs alone (marker `paired`: the pairs interleave both sides, so
# other load lands on both) two at a time, the others one at a time, alone.
# The slowest tests start first and a worker takes one test at a time (--maxschedchunk=1,
# SLOW_FIRST in tests/e2e/conftest.py), so no worker runs a long one alone at the end.
# --durations: where the 25 minutes go.
step "pytest: unit tests (2 processes)"
.venv/bin/pytest tests/unit -n 2 -q
# Hypothesis's pytest plugin imports Hypothesis at every session's end (0.25 s of CPU):
# the end-to-end tests and the pytest runs they start use none of it.
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -p no:hypothesispytest"
step "pytest: end-to-end tests that read no timed figure (4 processes)"
.venv/bin/pytest tests/e2e -m "not timed" -n 4 --maxschedchunk=1 -q --durations=15
step "pytest: end-to-end tests judged on A/B pairs (2 processes)"
.venv/bin/pytest tests/e2e -m "timed and paired" -n 2 --maxschedchunk=1 -q --durations=15
step "pytest: end-to-end tests that read timed figures (one at a time)"
exec .venv/bin/pytest tests/e2e -m "timed and not paired" --durations=25
