#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up (packages + Release build), the smoke suite
# checked against its committed baseline (any change in a method's output fails here unless
# results/baselines/smoke.json changes in the same commit), then every CTest test. Tests needing
# ../shared skip with a message where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
./build/kvbench run smoke --db build/ci-smoke.db --fresh
./build/kvbench check --db build/ci-smoke.db --baseline results/baselines/smoke.json
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
