#!/usr/bin/env bash
# The README's first command: set everything up (idempotent), then run the suites.
# Arguments go to pytest, e.g. ./scripts/suites.sh --webperf-concurrency=100,500,1000
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec .venv/bin/pytest suites "$@"
