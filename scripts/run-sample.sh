#!/usr/bin/env bash
# `make run`: the service over the bundled sample agent log (file: source, heuristic judge unless
# STEF_LLM_* is set), results and dead letters as JSONL under out/, metrics on 127.0.0.1 while it
# runs; the service exits at the end of the file, then the summary is printed.
# The service logs errors only (one line per record at info would flood the screen), so this
# script reports progress itself: a line whenever another tenth of the log has been written out.
set -euo pipefail
log=examples/agent_log.jsonl
mkdir -p out
rm -f out/results.jsonl out/dead_letters.jsonl
total=$(grep -c . "$log")
echo "stef run: judging $total lines of $log (results in out/results.jsonl)" >&2
started=$(date +%s.%N)
.venv/bin/stef run --source "file:$log" --rules rules \
    --results file:out/results.jsonl --dead-letters file:out/dead_letters.jsonl \
    --metrics-host 127.0.0.1 --metrics-port 0 --log-level "${STEF_LOG_LEVEL:-error}" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' INT TERM
written() { cat out/results.jsonl out/dead_letters.jsonl 2>/dev/null | grep -c . || true; }
step=$(( (total + 9) / 10 ))
shown=0
while kill -0 "$pid" 2>/dev/null; do
  n=$(written)
  if (( n >= shown + step )); then
    shown=$n
    echo "stef run: $n/$total lines done" >&2
  fi
  sleep 0.2
done
status=0
wait "$pid" || status=$?
trap - INT TERM
if (( status != 0 )); then
  echo "stef run: exit status $status" >&2
  exit "$status"
fi
printf 'stef run: %s/%s lines done in %.1f s\n\n' "$(written)" "$total" \
    "$(echo "$(date +%s.%N) - $started" | bc)" >&2
.venv/bin/stef summary out/results.jsonl --dead-letters out/dead_letters.jsonl
