#!/usr/bin/env bash
# Install the npm tools the deploy tests need into build/deploy-tools/ (gitignored). Idempotent.
#   @grafana/schema            Grafana's dashboard types (it ships TypeScript types, no JSON schema)
#   ts-json-schema-generator   turns the Dashboard type into a JSON schema
#   @kubernetes-models/keda    KEDA's CRD schemas as validators (ScaledObject is a CRD that
#                              kubernetes-validate does not know); 0.4.x runs on Node 20
# Output: build/deploy-tools/grafana-dashboard.schema.json (draft-07), the schema of Grafana's
# classic dashboard JSON (the `Dashboard` interface of raw/dashboard/x/types.gen.d.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/deploy-tools
grafana_schema=13.2.3
generator=2.9.0
keda_models=0.4.2
want="@grafana/schema@$grafana_schema ts-json-schema-generator@$generator @kubernetes-models/keda@$keda_models"
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
[ -f "$dir/package.json" ] || echo '{"name": "stef-deploy-tools", "private": true}' > "$dir/package.json"
# shellcheck disable=SC2086  # $want is a list of package specs
npm install --prefix "$dir" --no-audit --no-fund --silent --save-exact $want
types="$dir/node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts"
"$dir/node_modules/.bin/ts-json-schema-generator" --path "$types" --type Dashboard \
  --no-type-check --out "$schema.tmp"
mv "$schema.tmp" "$schema"
echo "$want" > "$stamp"
echo "install-deploy-tools: $want -> $dir"
