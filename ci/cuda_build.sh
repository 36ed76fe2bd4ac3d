#!/usr/bin/env bash
# Compile-checks the CUDA kernels (kernels/cuda/*.cu) and their GPU tests so they cannot rot:
# a separate build dir configured with -DKVBENCH_CUDA=ON, building only kvbench_cuda and
# kvbench_gpu_tests (no GPU needed). On a machine with a GPU, also run: ctest -L gpu.
# Usage: ci/cuda_build.sh [build-dir]   (default: build-cuda; NVCC overrides the compiler)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build-cuda}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVBENCH_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc"
cmake --build "$build" -j"${JOBS:-2}" --target kvbench_cuda kvbench_gpu_tests
# Without a GPU the tests must say so, not pass silently.
"$build/kvbench_gpu_tests" --gtest_brief=1 | tee "$build/gpu_tests.log"
grep -q "skipped: no GPU\|PASSED" "$build/gpu_tests.log"
