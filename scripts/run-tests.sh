#!/usr/bin/env bash
# Run the whole suite; pytest's exit code 5 (no tests collected) is a failure, like any other.
#   VENV=.venv-latest run-tests.sh ...   runs it in another virtualenv (make test-latest)
set -uo pipefail
venv=${VENV:-.venv}
"$venv/bin/python" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
