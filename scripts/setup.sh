#!/usr/bin/env bash
# Create the virtualenv and install STEF. Idempotent.
#   setup.sh PY VENV run    the runtime only (what `make run` needs)
#   setup.sh PY VENV test   the runtime, the test tools and the compiled sqlglot (`make test`)
set -euo pipefail
py=${1:-python3.11}
venv=${2:-.venv}
what=${3:-test}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
case "$what" in
  run)
    echo "setup: installing STEF's runtime into $venv (test tools: make test)" >&2
    # The build backend warns about editable installs in general; it is noise on a first run.
    PYTHONWARNINGS=ignore "$venv/bin/python" -m pip install -q --disable-pip-version-check -e .
    ;;
  test)
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e ".[test]"
    # The compiled sqlglot extra is faster; it is optional, so a failed build is not fatal.
    "$venv/bin/python" -m pip install -q "sqlglot[c]" ||
      echo "setup: sqlglot[c] did not install; using pure-Python sqlglot" >&2
    ;;
  *)
    echo "setup: third argument is run or test, not $what" >&2
    exit 2
    ;;
esac
