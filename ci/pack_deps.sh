#!/usr/bin/env bash
# Packs kvbench's build dependencies other than LibTorch for a machine without a package
# manager or network (a GPU machine: see ci/setup.sh --cuda, ci/gpu_test.sh). Run on Debian 12
# (amd64, as the target): downloads the Debian packages of nlohmann-json, CLI11, SQLite, GTest
# and Google Benchmark with `apt-get download` (no root; the package lists must be current:
# apt-get update) and unpacks each with `dpkg -x` into DIR, which then holds DIR/usr/include,
# DIR/usr/lib/x86_64-linux-gnu (with the CMake package files) and DIR/usr/share/cmake, plus
# DIR/MANIFEST (package, version, architecture). Nothing is installed here.
# Carry DIR over (e.g. tar czf deps.tgz -C DIR .), then on the GPU machine:
#   KVBENCH_SETUP_PACKAGES=skip KVBENCH_DEPS_PREFIX=DIR bash ci/gpu_test.sh
# Usage: ci/pack_deps.sh DIR      (DIR is created; existing files in it are overwritten)
set -euo pipefail
dir=${1:-}
if [ -z "$dir" ] || [ $# -ne 1 ]; then
  echo "usage: ci/pack_deps.sh DIR" >&2
  exit 2
fi
for tool in apt-get dpkg dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "pack_deps: error: no $tool here (run on Debian 12)" >&2; exit 2; }
done
packages=(nlohmann-json3-dev libcli11-dev libsqlite3-dev libsqlite3-0 libgtest-dev
          libbenchmark-dev libbenchmark1debian)

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
echo "pack_deps: downloading ${#packages[@]} packages: ${packages[*]}" >&2
if ! (cd "$debs" && apt-get download "${packages[@]}") >"$debs/apt.log" 2>&1; then
  sed 's/^/  | /' "$debs/apt.log" >&2
  echo "pack_deps: error: apt-get download failed (stale package lists? run apt-get update)" >&2
  exit 1
fi
: >"$dir/MANIFEST"
for deb in "$debs"/*.deb; do
  dpkg -x "$deb" "$dir"
  # shellcheck disable=SC2016  # dpkg-deb's own ${Field} syntax
  dpkg-deb -W --showformat='${Package} ${Version} ${Architecture}\n' "$deb" >>"$dir/MANIFEST"
done
# What ci/setup.sh --cuda's CMake will look for under DIR/usr.
missing=0
for f in usr/include/nlohmann/json.hpp usr/include/CLI/CLI.hpp usr/include/sqlite3.h \
         usr/include/gtest/gtest.h usr/include/benchmark/benchmark.h; do
  [ -e "$dir/$f" ] || { echo "pack_deps: error: $dir/$f missing after unpacking" >&2; missing=1; }
done
for pattern in "usr/lib/*/libsqlite3.so" "usr/lib/*/libgtest.a" "usr/lib/*/libbenchmark.so" \
               "usr/lib/*/cmake/GTest/GTestConfig.cmake" "usr/lib/*/cmake/benchmark/benchmarkConfig.cmake" \
               "usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" "usr/share/cmake/CLI11/CLI11Config.cmake"; do
  compgen -G "$dir/$pattern" >/dev/null || { echo "pack_deps: error: no $dir/$pattern after unpacking" >&2; missing=1; }
done
((missing == 0)) || exit 1
echo "pack_deps: $dir: $(wc -l <"$dir/MANIFEST") packages unpacked ($(du -sh "$dir" | cut -f1)); on the GPU machine:" >&2
echo "  KVBENCH_SETUP_PACKAGES=skip KVBENCH_DEPS_PREFIX=$dir bash ci/gpu_test.sh" >&2
