#!/usr/bin/env bash
# `make run`: judge the bundled sample agent log with the heuristic judge and print the summary.
set -euo pipefail
mkdir -p out
.venv/bin/stef replay examples/agent_log.jsonl --rules rules --output out/results.jsonl \
    --dead-letters out/dead_letters.jsonl
