#!/usr/bin/env bash
# Install the npm tools the deploy tests need into build/deploy-tools/ (gitignored). Idempotent.
#   @grafana/schema            Grafana's dashboard types (it ships TypeScript types, no JSON schema)
#   ts-json-schema-generator   turns the Dashboard type into a JSON schema
#   @kubernetes-models/keda    KEDA's CRD schemas as validators (ScaledObject is a CRD that
#                              kubernetes-validate does not know); 0.4.x runs on Node 20
# Versions and every transitive package's integrity hash are locked in deploy/tools/
# (package.json, package-lock.json), installed with `npm ci`. To move a version: edit
# deploy/tools/package.json, run `npm install --package-lock-only --prefix deploy/tools`, commit both.
# Output: build/deploy-tools/grafana-dashboard.schema.json (draft-07), the schema of Grafana's
# classic dashboard JSON (the `Dashboard` interface of raw/dashboard/x/types.gen.d.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/deploy-tools
lock=deploy/tools/package-lock.json
want=$(sha256sum deploy/tools/package.json "$lock" | cut -d' ' -f1 | tr '\n' ' ')
schema="$dir/grafana-dashboard.schema.json"
stamp="$dir/.installed"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -s "$schema" ]; then
  exit 0
fi
mkdir -p "$dir"
cp deploy/tools/package.json "$lock" "$dir/"
npm ci --prefix "$dir" --no-audit --no-fund --silent
types="$dir/node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts"
"$dir/node_modules/.bin/ts-json-schema-generator" --path "$types" --type Dashboard \
  --no-type-check --out "$schema.tmp"
mv "$schema.tmp" "$schema"
echo "$want" > "$stamp"
echo "install-deploy-tools: deploy/tools/package-lock.json -> $dir"
