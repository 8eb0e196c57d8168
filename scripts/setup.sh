#!/usr/bin/env bash
# Create the virtualenv and install STEF from the lock files (requirements/README.md). Idempotent.
#   setup.sh PY VENV run      the runtime only (what `make run` needs), from requirements/run.txt,
#                             and sqlglot's compiled parser (requirements/fast.txt) if a wheel exists
#   setup.sh PY VENV test     the runtime, the test tools and sqlglot[c], from requirements/test.txt
#   setup.sh PY VENV latest   the same as test, but the newest allowed versions (make test-latest)
set -euo pipefail
py=${1:-python3.11}
venv=${2:-.venv}
what=${3:-test}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
case "$what" in
  run | test)
    [ "$what" = run ] && echo "setup: installing STEF's runtime into $venv (test tools: make test)" >&2
    # pip and setuptools first, from the lock: STEF itself is built with them, without isolation.
    "${pip[@]}" --require-hashes --no-deps -r requirements/build.txt
    "${pip[@]}" --require-hashes --no-deps -r "requirements/$what.txt"
    # sqlglot's compiled parser where this platform has a wheel of it (test.txt holds it already):
    # the same results for about a quarter less CPU a record; else the pure-Python parser.
    if [ "$what" = run ] && ! "${pip[@]}" --require-hashes --no-deps --only-binary=:all: \
      -r requirements/fast.txt; then
      echo "setup: sqlglotc (sqlglot's compiled parser) did not install (pip's error above; no" \
        "wheel for this platform?): STEF runs on the pure-Python parser (the same results," \
        "more CPU a record)" >&2
    fi
    # The build backend warns about editable installs in general; it is noise on a first run.
    PYTHONWARNINGS=ignore "${pip[@]}" --no-deps --no-build-isolation -e .
    ;;
  latest)
    "${pip[@]}" --upgrade pip setuptools
    "${pip[@]}" --upgrade -e ".[test,fast,duckdb,otel]"
    ;;
  *)
    echo "setup: third argument is run, test or latest, not $what" >&2
    exit 2
    ;;
esac
