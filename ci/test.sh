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
# The CUDA kernels are compiled (not run: no GPU here) so they cannot rot.
if [ -x "${NVCC:-/usr/local/cuda/bin/nvcc}" ]; then bash ci/cuda_build.sh build-cuda; fi
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
