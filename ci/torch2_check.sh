#!/usr/bin/env bash
# Compile-checks kvbench against LibTorch 2.x headers on a machine that has LibTorch 1.13 (Debian
# 12): syntax and types only, nothing links or runs. The GPU machines build against LibTorch 2.x
# (pip's, with CUDA), and code behind `TORCH_VERSION_MAJOR >= 2` or KVBENCH_CUDA_KERNELS is
# otherwise first compiled there, on scarce device time.
#
# The headers are Debian 13's libtorch-dev (LibTorch 2.6, a CPU build that still ships ATen/cuda
# and c10/cuda), downloaded once from Debian's archive into the work folder. Checked:
#   default  the CUDA glue and everything naming KVBENCH_CUDA_KERNELS, with it defined, plus the
#            device tests (tests/gpu) and the glue's test, against the CUDA toolkit's headers
#            (1-3 minutes on 2 cores);
#   --all    also every source and test as the CPU build compiles them (without the macro; the
#            glue set's callers both ways; about 10 minutes on 2 cores).
# Any diagnostic fails the check (the build is warning-free under -Wall -Wextra).
# Not covered: pip's newer LibTorch on the GPU machine (2.11) where it differs from 2.6, linking,
# nvcc's .cu files (ci/cuda_build.sh), running (ci/gpu_test.sh).
# Usage: ci/torch2_check.sh [--all] [work-folder]   (default work folder: build-torch2;
#        DEBIAN_MIRROR, default http://deb.debian.org/debian; JOBS, default nproc)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
work="${1:-$src/build-torch2}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cuda_include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
root="$work/libtorch-dev"

if [ ! -f "$root/usr/include/torch/csrc/api/include/torch/version.h" ]; then
  for tool in curl xz dpkg; do
    command -v "$tool" >/dev/null ||
      { echo "torch2_check: error: needs $tool to fetch the headers (apt-get install curl xz-utils)" >&2; exit 2; }
  done
  echo "torch2_check: fetching Debian trixie's libtorch-dev from $mirror"
  curl -fsS -o "$work/Packages.xz" "$mirror/dists/trixie/main/binary-amd64/Packages.xz"
  deb_path=$(xz -dc "$work/Packages.xz" |
             awk '/^Package: /{p = ($2 == "libtorch-dev")} p && /^Filename: /{print $2; p = 0}')
  [ -n "$deb_path" ] || { echo "torch2_check: no libtorch-dev in trixie's index" >&2; exit 1; }
  curl -fsS -o "$work/libtorch-dev.deb" "$mirror/$deb_path"
  rm -rf "$root" && dpkg -x "$work/libtorch-dev.deb" "$root"
fi
include="$root/usr/include"
version=$(awk '/^#define TORCH_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END{print v}' \
          "$include/torch/csrc/api/include/torch/version.h")
echo "torch2_check: LibTorch $version headers"

# The two headers a build generates: the commit (CMake) and CUDA LibTorch's build macros.
stub="$work/stub"
mkdir -p "$stub/c10/cuda/impl"
echo '#define KVBENCH_GIT_COMMIT "torch2-check"' > "$stub/kvbench_git_commit.h"
echo '#define C10_CUDA_BUILD_SHARED_LIBS' > "$stub/c10/cuda/impl/cuda_cmake_macros.h"

flags=(-fsyntax-only -std=gnu++17 -fopenmp -D_GLIBCXX_USE_CXX11_ABI=1 -Wall -Wextra
       -Wno-unused-parameter -Wno-missing-field-initializers -DKVBENCH_BUILD_TYPE='"Release"'
       -DKVBENCH_SOURCE_DIR="\"$src\"" -DKVBENCH_BINARY='"kvbench"' -DGTEST_HAS_PTHREAD=1
       -I"$src" -I"$stub" -isystem "$include/torch/csrc/api/include" -isystem "$include")
cuda_flags=(-DKVBENCH_CUDA_KERNELS=1 -isystem "$cuda_include")

cd "$src"
mapfile -t glue < <( { echo kernels/cuda/torch_glue.cpp; echo tests/kernels/cuda/torch_glue_test.cpp
                       git ls-files 'tests/gpu/*.cpp'
                       git grep -l KVBENCH_CUDA_KERNELS -- '*.cpp'; } | sort -u)
others=()
if [ "$all" = 1 ]; then
  # The glue's callers too: the CPU build compiles them without KVBENCH_CUDA_KERNELS. Not the
  # CUDA emulation, which builds only against its own CUDA headers (tests/cuda_emulation/).
  mapfile -t others < <(git ls-files '*.cpp' |
                        grep -v '^kernels/cuda/\|^tests/kernels/cuda/\|^tests/cuda_emulation/')
fi

log="$work/diagnostics.txt"
: > "$log"
check() {  # check FILE FLAGS...: the compiler's diagnostics (or exit status), if any, to $log
  local file="$1"; shift
  local out rc=0
  out=$(g++ "$@" "$file" 2>&1) || rc=$?
  if [ -n "$out" ] || [ "$rc" != 0 ]; then
    printf '=== %s (g++ exit %s)\n%s\n' "$file" "$rc" "$out" >> "$log"
  fi
}
export -f check
export log
printf '%s\n' "${glue[@]}" |
  xargs -P"${JOBS:-$(nproc)}" -I{} bash -c 'check "$@"' _ {} "${flags[@]}" "${cuda_flags[@]}"
if [ "${#others[@]}" -gt 0 ]; then
  printf '%s\n' "${others[@]}" | xargs -P"${JOBS:-$(nproc)}" -I{} bash -c 'check "$@"' _ {} "${flags[@]}"
fi

checked=$(( ${#glue[@]} + ${#others[@]} ))  # compilations: the glue's callers count twice under --all
if [ -s "$log" ]; then
  cat "$log"
  echo "torch2_check: $(grep -c '^=== ' "$log") of $checked compilations have diagnostics (above; also $log)" >&2
  exit 1
fi
echo "torch2_check: $checked compilations clean against these headers"
