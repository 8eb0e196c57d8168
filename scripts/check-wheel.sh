#!/usr/bin/env bash
# Build the wheel, install it into a fresh virtualenv (no source tree, no STEF_PROMPTS_DIR), and
# judge one record with the LLM backend against the fake OpenAI-compatible server of that install.
set -euo pipefail
py=${1:-python3.11}
root=$(pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# pip's output without this machine's index-location warnings; a failing pip still fails the check.
quiet_pip() {
  local out
  if ! out=$("$@" 2>&1); then
    printf '%s\n' "$out" >&2
    return 1
  fi
  printf '%s\n' "$out" | grep -v -e "^WARNING: Location" -e '^$' || true
}
rm -rf dist
# Built by the locked setuptools of .venv, without isolation; installed over the locked runtime.
quiet_pip .venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w dist .
wheel=$(ls dist/stef-*.whl)
"$py" -m venv "$work/venv"
for lock in requirements/build.txt requirements/run.txt; do
  quiet_pip "$work/venv/bin/python" -m pip install -q --require-hashes --no-deps -r "$lock"
done
quiet_pip "$work/venv/bin/python" -m pip install -q --no-deps "$root/$wheel"
"$work/venv/bin/python" -m pip check
cd "$work"  # nothing of the source tree is importable from here
env -u STEF_PROMPTS_DIR "$work/venv/bin/python" -m stef.testing.fake_server --port 0 > server.out &
server_pid=$!
for _ in $(seq 1 100); do
  [ -s server.out ] && break
  sleep 0.1
done
base_url=$(head -n 1 server.out)
case "$base_url" in http://127.0.0.1:*) ;; *) echo "check-wheel: fake server did not start" >&2; exit 1 ;; esac
env -u STEF_PROMPTS_DIR STEF_LLM_BASE_URL="$base_url" STEF_LLM_MODEL=fake-judge STEF_LLM_API_KEY=test \
  "$work/venv/bin/stef" judge -q "How many orders in 2023?" \
  -s "SELECT COUNT(*) FROM orders WHERE year = 2023" > result.json
"$work/venv/bin/python" - <<'PY'
import json
r = json.load(open("result.json"))
assert r["judge"]["backend"] == "llm", r["judge"]
assert r["outcome"] == "evaluated", r
assert r["judge"]["prompt_version"], r["judge"]
print(f"check-wheel: installed wheel judged with the LLM backend: score {r['score']}, "
      f"prompt_version {r['judge']['prompt_version']}")
PY
# The report's page is a template inside the wheel too.
"$work/venv/bin/python" -c 'import json; print(json.dumps(json.load(open("result.json"))))' > results.jsonl
"$work/venv/bin/stef" report results.jsonl -o report.html
grep -q "<h1>STEF report</h1>" report.html
echo "check-wheel: installed wheel wrote the report page"
