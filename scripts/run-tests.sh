#!/usr/bin/env bash
# Run the whole suite; pytest's exit code 5 (no tests collected) is a failure, like any other.
#   VENV=.venv-latest run-tests.sh ...   runs it in another virtualenv (make test-latest)
#   TEST_WORKERS=N run-tests.sh          N pytest-xdist workers (default 2; 0 runs in one process).
#                                        Not STEF_*: STEF refuses STEF_ variables it does not know.
# Each worker runs whole test files (--dist loadfile): a file's fixtures (a broker, a Prometheus,
# llama-server) start once, in one worker, and every service binds its own free port. Files go
# out in collection order (--no-loadscope-reorder), which starts the longest one first
# (tests/conftest.py, pytest_collection_modifyitems).
set -uo pipefail
venv=${VENV:-.venv}
workers=${TEST_WORKERS:-2}
"$venv/bin/python" -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
