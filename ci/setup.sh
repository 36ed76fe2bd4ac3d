#!/usr/bin/env bash
# Sets kvbench up on Debian 12: installs the missing Debian packages (apt-get update first,
# only when something is missing), then configures and builds in Release into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake git pkg-config libtorch-dev nlohmann-json3-dev libcli11-dev
          libsqlite3-dev libbenchmark-dev libgtest-dev gnuplot-nox libopenblas0-pthread
          sqlite3 ccache python3-jieba unicode-data)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
echo "setup: built build/kvbench and build/kvbench_tests" >&2
