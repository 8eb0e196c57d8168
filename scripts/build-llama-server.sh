#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (CPU) from the sources vendored in the PyPI sdist of
# llama-cpp-python, for the real-model tests (tests/judges/llm/test_real_model.py). PyPI has no prebuilt
# wheel for this platform and no other host is reachable, so the sdist is the source of llama.cpp.
# Output: build/llama-server/bin/llama-server (build/ is gitignored). Idempotent: when that binary
# exists and answers --version, nothing is done. 7-10 minutes on 2 cores (585 s measured, shared).
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
# The sdist's sha256 (as PyPI lists it): the sources built are the ones pinned, never a newer upload.
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
root=build/llama-server
bin="$root/bin/llama-server"
jobs="${LLAMA_BUILD_JOBS:-$(nproc)}"

if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "build-llama-server: $bin is there ($("$bin" --version 2>&1 | head -n 1)); nothing to do"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    $sudo apt-get update -qq
    apt_updated=1
  fi
  echo "build-llama-server: apt-get install $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
command -v c++ >/dev/null || apt_install g++
command -v cmake >/dev/null || apt_install cmake
command -v ninja >/dev/null || apt_install ninja-build

pip=".venv/bin/pip"
[ -x "$pip" ] || pip="python3 -m pip"

src="$root/src"
mkdir -p "$src" "$root/bin"
sdist_dir="$src/sdist"
if ! ls "$sdist_dir"/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
  mkdir -p "$sdist_dir"
  echo "build-llama-server: pip download llama-cpp-python==$version (sdist)"
  # Only this package is taken as source: its build requirements (needed to read its metadata)
  # come as wheels.
  $pip download --quiet --no-deps --no-binary=llama-cpp-python -d "$sdist_dir" \
    "llama-cpp-python==$version"
fi
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
if ! echo "$sdist_sha256  $sdist" | sha256sum --check --status; then
  echo "build-llama-server: $sdist does not have the pinned sha256 $sdist_sha256" >&2
  rm -f "$sdist"
  exit 1
fi
name="$(basename "$sdist" .tar.gz)"
if [ ! -d "$src/$name/vendor/llama.cpp" ]; then
  echo "build-llama-server: unpacking $sdist"
  tar xzf "$sdist" -C "$src"
fi
llama="$src/$name/vendor/llama.cpp"

common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF
  # Without this the build tries to download the web UI, and no such host is reachable.
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF)
# Portable x86-64 flags first so the cached binary runs on another machine of this kind; the
# native build ties it to the building CPU, so it is only the fallback.
portable=(-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
native=(-DGGML_NATIVE=ON)

build() {
  local dir="$1"
  shift
  echo "build-llama-server: cmake $* (in $llama/$dir)"
  cmake -S "$llama" -B "$llama/$dir" "${common[@]}" "$@" >"$root/cmake-$dir.log" 2>&1 || return 1
  echo "build-llama-server: cmake --build -j$jobs --target llama-server (several minutes)"
  cmake --build "$llama/$dir" -j"$jobs" --target llama-server >"$root/build-$dir.log" 2>&1 || return 1
  "$llama/$dir/bin/llama-server" --version >/dev/null 2>&1 || return 1
  cp "$llama/$dir/bin/llama-server" "$bin.tmp"
  mv "$bin.tmp" "$bin"
}

start=$SECONDS
if ! build build-portable "${portable[@]}"; then
  echo "build-llama-server: the portable build failed (see $root/*-build-portable.log);" \
    "falling back to GGML_NATIVE=ON"
  build build-native "${native[@]}" || {
    echo "build-llama-server: the native build failed too; see $root/build-build-native.log" >&2
    tail -n 30 "$root/build-build-native.log" >&2 || true
    exit 1
  }
fi
echo "build-llama-server: $bin built in $((SECONDS - start)) s ($("$bin" --version 2>&1 | head -n 1))"
