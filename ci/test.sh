#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up (packages + Release build), then every CTest
# test. Tests needing ../shared skip with a message where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
