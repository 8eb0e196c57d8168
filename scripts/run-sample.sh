#!/usr/bin/env bash
# `make run`: the service over the bundled sample agent log (file: source, heuristic judge unless
# STEF_LLM_* is set), results and dead letters as JSONL under out/, metrics on 127.0.0.1 while it
# runs; the service exits at the end of the file, then the summary table is printed.
set -euo pipefail
mkdir -p out
rm -f out/results.jsonl out/dead_letters.jsonl
.venv/bin/stef run --source file:examples/agent_log.jsonl --rules rules \
    --results file:out/results.jsonl --dead-letters file:out/dead_letters.jsonl \
    --metrics-host 127.0.0.1 --metrics-port 0 --log-level "${STEF_LOG_LEVEL:-error}"
.venv/bin/stef summary out/results.jsonl --dead-letters out/dead_letters.jsonl
