#!/usr/bin/env bash
# Compile-checks the CUDA code so that it cannot rot, where nvcc and a CPU LibTorch are (no GPU
# needed; ci/test.sh runs it when nvcc exists): a separate build dir configured with
# -DKVBENCH_CUDA=ON, building only
#   kvbench_cuda              kernels/cuda/*.cu with nvcc,
#   kvbench_gpu_tests         their tests against kernels/reference (label "gpu"),
#   kvbench_torch_glue_check  kernels/cuda/torch_glue.cpp and tests/kernels/cuda/torch_glue_test.cpp
#                             compiled, not linked, against this LibTorch's ATen/cuda headers (with
#                             a CUDA LibTorch: the glue and its tests built for real). What that
#                             checks and what not: the CUDA block of CMakeLists.txt.
# then runs the GPU tests through CTest: without a GPU each must say "skipped: no GPU" (a test
# that fails, or skips for another reason or none, fails this script); the skips are listed at
# the end of ci/test.sh from $build/gpu-junit.xml.
# A GPU machine runs everything for real with ci/gpu_test.sh instead.
# Usage: ci/cuda_build.sh [build-dir]   (default: build-cuda; NVCC: the nvcc to use,
#        default /usr/local/cuda/bin/nvcc; JOBS: parallel compile jobs, default 2)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build-cuda}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVBENCH_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc"
build="$(cd "$build" && pwd)"
cmake --build "$build" -j"${JOBS:-2}" --target kvbench_cuda kvbench_gpu_tests kvbench_torch_glue_check

junit="$build/gpu-junit.xml"
rm -f "$junit"
status=0
(cd "$build" && ctest -L gpu --output-on-failure --output-junit "$junit") || status=$?
# Every GPU test either ran or said why not in the project's words.
if ! grep -q '<testcase ' "$junit" 2>/dev/null; then
  echo "cuda_build: no GPU tests were run (ctest -L gpu in $build found none)" >&2
  exit 1
fi
skips=$(bash "$src/ci/skipped_tests.sh" "$junit")
if [ -n "$skips" ]; then
  echo "$skips"
  if grep '^  - ' <<<"$skips" | grep -qv '^  - no GPU'; then
    echo "cuda_build: a GPU test skipped without saying \"skipped: no GPU\" (above)" >&2
    status=1
  fi
fi
exit "$status"
