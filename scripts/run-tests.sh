#!/usr/bin/env bash
# Run the whole suite; pytest's exit code 5 (no tests collected) is a failure, like any other.
set -uo pipefail
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
