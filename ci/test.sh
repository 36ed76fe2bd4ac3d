#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up (packages + Release build), the smoke suite
# checked against its committed baseline (any change in a method's output fails here unless
# results/baselines/smoke.json changes in the same commit), then every CTest test. Tests needing
# the shared folder skip with a message where it is absent; the end lists every skip's reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
./build/kvbench run smoke --db build/ci-smoke.db --fresh
./build/kvbench check --db build/ci-smoke.db --baseline results/baselines/smoke.json
# The CUDA kernels and their LibTorch glue are compiled (not run: no GPU here) so they cannot
# rot; their GPU tests report "skipped: no GPU" (listed below with the others).
# Where no nvcc is found that check is skipped, and the end of the output says so.
junits=()
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cuda_skip=""
if [ -x "$nvcc" ]; then
  bash ci/cuda_build.sh build-cuda
  junits+=("$PWD/build-cuda/gpu-junit.xml")
else
  cuda_skip="skipped: the CUDA compile check (ci/cuda_build.sh): no nvcc at $nvcc (set NVCC to another)"
fi
cd build
# Then every skipped test with the reason it printed (CTest's own summary says only "Skipped").
status=0
ctest --output-on-failure -j"$(nproc)" --output-junit "$PWD/ctest-junit.xml" "$@" || status=$?
bash ../ci/skipped_tests.sh ctest-junit.xml "${junits[@]}"
[ -z "$cuda_skip" ] || echo "$cuda_skip"
exit "$status"
