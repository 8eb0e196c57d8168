#!/usr/bin/env bash
# Create the virtualenv and install STEF with its test tools. Idempotent.
set -euo pipefail
py=${1:-python3.11}
venv=${2:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[test]"
# The compiled sqlglot extra is faster; it is optional, so a failed build is not fatal.
"$venv/bin/python" -m pip install -q "sqlglot[c]" || echo "setup: sqlglot[c] did not install; using pure-Python sqlglot" >&2
