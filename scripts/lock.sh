#!/usr/bin/env bash
# Re-resolve requirements/*.txt (hashed) from pyproject.toml and requirements/build.in with uv.
#   lock.sh PY UV_VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3.11}
uv_version=${2:?uv version}
tools=build/lock-tools
if [ ! -x "$tools/bin/uv" ] || [ "$("$tools/bin/uv" --version | cut -d' ' -f2)" != "$uv_version" ]; then
  "$py" -m venv "$tools"
  "$tools/bin/python" -m pip install -q "uv==$uv_version"
fi
compile() {
  # --universal: the markers hold on every platform (the image, a developer's laptop, CI).
  "$tools/bin/uv" pip compile --quiet --generate-hashes --universal --python-version 3.11 \
    --custom-compile-command "make lock" "$@"
}
compile requirements/build.in -o requirements/build.txt
compile pyproject.toml -o requirements/run.txt
# sqlglot's compiled parser (the fast extra) alone, at the version run.txt pins: installed over
# run.txt where this platform has a wheel of it (scripts/setup.sh, the Dockerfile).
# A fresh resolution (uv takes an existing output file's pins as preferences), held to run.txt's
# versions by constraint: sqlglot[c] pins sqlglotc to sqlglot's own version.
rm -f "$tools/run-fast.txt"
compile pyproject.toml --extra fast -c requirements/run.txt -o "$tools/run-fast.txt"
{
  echo "# sqlglotc of \`uv pip compile pyproject.toml --extra fast\` (make lock): sqlglot's compiled parser,"
  echo "# installed over run.txt where a wheel of it exists (requirements/README.md)."
  awk '/^sqlglotc==/ { on = 1; print; next } on && /^[^ ]/ { on = 0 } on' "$tools/run-fast.txt"
} > requirements/fast.txt
sqlglot=$(sed -n 's/^sqlglot==\([^ ]*\) .*/\1/p' requirements/run.txt)
sqlglotc=$(sed -n 's/^sqlglotc==\([^ ]*\) .*/\1/p' requirements/fast.txt)
if [ -z "$sqlglotc" ] || [ "$sqlglotc" != "$sqlglot" ]; then
  echo "lock: fast.txt has sqlglotc '$sqlglotc' for run.txt's sqlglot '$sqlglot'" >&2
  exit 1
fi
compile pyproject.toml --extra test --extra fast --extra duckdb --extra otel -o requirements/test.txt
echo "lock: requirements/build.txt run.txt fast.txt test.txt written; commit them" >&2
