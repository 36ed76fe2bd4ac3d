#!/usr/bin/env bash
# Sets kvbench up on Debian 12: installs the missing Debian packages (apt-get update first,
# only when something is missing), then configures and builds in Release into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#
# Quiet: one line per stage (a progress line while building); the full apt, CMake and compiler
# output goes to build/setup.log, named at the end. A failing stage says which, shows the last
# lines of the log and exits 1. A first build takes about 10 minutes on 2 cores.
# KVBENCH_SETUP_PACKAGES=skip leaves the Debian packages alone (tests; managed machines).
# JOBS=N: parallel compile jobs (default: every core).
# KVBENCH_BUILD_TARGETS="kvbench kvbench_bench ...": build only these targets (and what they need),
# not every one (ci/gpu_test.sh --quick: no kvbench_tests, which is most of a build's files).
#
# bash ci/setup.sh --cuda: the GPU build, into build-gpu/ (log build-gpu/setup.log), beside
# build/ (the CPU build, untouched). Configures with -DKVBENCH_CUDA=ON against an installed CUDA
# LibTorch: $Torch_DIR when set (the folder holding TorchConfig.cmake, or the root of an
# unpacked libtorch archive), else python3's PyTorch (torch.utils.cmake_prefix_path); stops with
# one line and exit 2 when there is none (unset/unimportable, or a CPU-only build) or no nvcc
# ($NVCC, else /usr/local/cuda/bin/nvcc, else nvcc on PATH). The kernels are built for the GPU
# nvidia-smi reports (else sm_80; KVBENCH_CUDA_ARCHITECTURES=90 or "80;90" overrides); Ninja when
# installed. The packages stage leaves LibTorch out. Without a package manager (no apt-get): set
# KVBENCH_SETUP_PACKAGES=skip and KVBENCH_DEPS_PREFIX=DIR, a folder made by ci/pack_deps.sh on
# Debian 12 (nlohmann-json, CLI11, SQLite, GTest, Google Benchmark unpacked with dpkg -x):
# DIR/usr is appended to CMAKE_PREFIX_PATH. ci/gpu_test.sh runs this and every test on the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=0
case "${1:-}" in
  "") ;;
  --cuda) cuda=1 ;;
  *) echo "setup: error: unknown argument \"$1\" (usage: bash ci/setup.sh [--cuda])" >&2; exit 2 ;;
esac

build_dir=build
log="$build_dir/setup.log"
packages=(build-essential cmake git pkg-config libtorch-dev nlohmann-json3-dev libcli11-dev
          libsqlite3-dev libbenchmark-dev libgtest-dev gnuplot-nox libopenblas0-pthread
          sqlite3 ccache python3 python3-jieba unicode-data)  # python3: ci/check_layers.py
if ((cuda)); then
  build_dir=build-gpu
  log="$build_dir/setup.log"
  # LibTorch comes from the CUDA install, not from Debian's CPU package.
  packages=(build-essential cmake git pkg-config nlohmann-json3-dev libcli11-dev libsqlite3-dev
            libbenchmark-dev libgtest-dev gnuplot-nox sqlite3 ccache python3 python3-jieba
            unicode-data)
fi

say() { echo "setup: $*" >&2; }

# A set-up that cannot start: one line, exit 2.
usage_error() {
  echo "setup: error: $*" >&2
  exit 2
}

# Reports the failed stage with the tail of the log, and stops.
fail() {
  say "FAILED while $1 (exit $2); the last 40 lines of $log:"
  tail -n 40 "$log" | sed 's/^/  | /' >&2
  say "full log: $log"
  exit 1
}

# Runs "$@" with its output appended to the log; a failure ends the set-up.
logged() {
  local stage=$1 rc=0
  shift
  "$@" >>"$log" 2>&1 || rc=$?
  ((rc == 0)) || fail "$stage" "$rc"
}

install_packages() {
  if [ "${KVBENCH_SETUP_PACKAGES:-}" = skip ]; then
    say "[1/3] Debian packages: left alone (KVBENCH_SETUP_PACKAGES=skip)"
    return
  fi
  if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    usage_error "no apt-get/dpkg-query here to install packages: set KVBENCH_SETUP_PACKAGES=skip (with --cuda and no packages: KVBENCH_DEPS_PREFIX=DIR from ci/pack_deps.sh)"
  fi
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "[1/3] Debian packages: all ${#packages[@]} installed"
    return
  fi
  say "[1/3] installing ${#missing[@]} Debian packages (and their dependencies): ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  logged "running apt-get update" $sudo apt-get update
  logged "installing Debian packages" env DEBIAN_FRONTEND=noninteractive \
    $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}

compile_line='Building (CXX|C|CUDA) object'

# The number of files a build would compile now, from the Makefiles CMake generates: a dry run
# where the tree was built before (it knows which objects are stale), else every object rule
# (a dry run stops at the first missing object).
files_to_compile() {
  local dry_run
  if [ -f "$build_dir/build.ninja" ]; then
    # Ninja's dry run lists exactly the stale steps, but on build.ninja itself it stops at
    # CMake's always-dirty glob check (CONFIGURE_DEPENDS); a copy has no such edge.
    cp "$build_dir/build.ninja" "$build_dir/.setup-dry-run.ninja"
    # shellcheck disable=SC2086  # the targets, one word each
    ninja -C "$build_dir" -f .setup-dry-run.ninja -n ${KVBENCH_BUILD_TARGETS:-} 2>/dev/null |
      grep -cE "$compile_line" || true
    rm -f "$build_dir/.setup-dry-run.ninja"
  elif dry_run=$(make -C "$build_dir" -n 2>/dev/null); then
    grep -cE "$compile_line" <<<"$dry_run" || true
  else
    cat "$build_dir"/CMakeFiles/*.dir/build.make | grep -cE "$compile_line" || true
  fi
}

# "CMakeFiles/kvbench_core.dir/harness/suite/suite.cpp.o" -> "harness/suite/suite.cpp".
step_subject() {
  local line=$1
  case $line in
    *"Linking "*) echo "linking ${line##* }" ;;
    *) line=${line##* }; line=${line#CMakeFiles/*.dir/}; echo "${line%.o}" ;;
  esac
}

# Reads the build's output, appends it to the log and shows "compiling i/N (P%) FILE" and each
# link: one line rewritten in place on a terminal, else a line each 10% and one per link.
show_progress() {
  local total=$1 done=0 percent last_shown=-10 line
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line == *"Linking "* ]]; then
      if [ -t 2 ]; then
        printf '\rsetup: [3/3] %s\033[K' "$(step_subject "$line")" >&2
      else
        say "[3/3] $(step_subject "$line")"
      fi
      continue
    fi
    [[ $line =~ $compile_line ]] || continue
    done=$((done + 1))
    ((done <= total)) || total=$done  # a file CMake's glob found during the build
    percent=$((100 * done / total))
    if [ -t 2 ]; then
      printf '\rsetup: [3/3] compiling %d/%d (%d%%) %s\033[K' "$done" "$total" "$percent" \
        "$(step_subject "$line")" >&2
    elif ((percent >= last_shown + 10)); then
      say "[3/3] compiling $done/$total ($percent%)"
      last_shown=$percent
    fi
  done
  if [ -t 2 ] && ((done > 0)); then echo >&2; fi
}

build() {
  local jobs total rc
  jobs=${JOBS:-$(nproc)}
  total=$(files_to_compile)
  if ((total == 0)); then
    say "[3/3] building: nothing to compile"
  else
    local hint=""
    ((total < 100)) || hint="; a first build takes about 10 minutes on 2 cores"
    local files="files"
    ((total > 1)) || files="file"
    say "[3/3] building: $total $files to compile with $jobs jobs$hint"
  fi
  set +o pipefail
  local targets=()
  read -r -a targets <<<"${KVBENCH_BUILD_TARGETS:-}"
  ((${#targets[@]} == 0)) || say "[3/3] only the targets ${targets[*]} (KVBENCH_BUILD_TARGETS)"
  cmake --build "$build_dir" -j"$jobs" ${targets[@]+--target "${targets[@]}"} 2>&1 | show_progress "$total"
  rc=${PIPESTATUS[0]}
  set -o pipefail
  ((rc == 0)) || fail "building" "$rc"
  local warnings
  warnings=$(grep -c 'warning:' "$log" || true)
  ((warnings == 0)) || say "$warnings compiler warnings (grep warning: $log)"
}

# --cuda: the CUDA LibTorch's TorchConfig.cmake folder, from Torch_DIR or python3's torch.
find_cuda_torch() {
  local dir prefix root
  if [ -n "${Torch_DIR:-}" ]; then
    dir=$Torch_DIR
    [ -f "$dir/TorchConfig.cmake" ] || dir="$dir/share/cmake/Torch"  # the archive's root
    [ -f "$dir/TorchConfig.cmake" ] ||
      usage_error "Torch_DIR=$Torch_DIR: no TorchConfig.cmake there nor in its share/cmake/Torch (want an unpacked CUDA libtorch archive)"
  else
    command -v python3 >/dev/null ||
      usage_error "no CUDA LibTorch found: Torch_DIR is not set and there is no python3 (set Torch_DIR to an unpacked CUDA libtorch, or install PyTorch with CUDA)"
    prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) ||
      usage_error "no CUDA LibTorch found: Torch_DIR is not set and python3 cannot import torch (set Torch_DIR to an unpacked CUDA libtorch, or install PyTorch with CUDA)"
    dir="$prefix/Torch"
    [ -f "$dir/TorchConfig.cmake" ] || usage_error "python3's torch has no $dir/TorchConfig.cmake"
  fi
  dir=$(cd "$dir" && pwd)
  root=$(cd "$dir/../../.." && pwd)
  ls "$root"/lib/libtorch_cuda.* >/dev/null 2>&1 ||
    usage_error "$root is a CPU-only LibTorch (no lib/libtorch_cuda.so): --cuda needs a CUDA build (Torch_DIR: a libtorch-*+cuXXX archive; or python3 with a +cuXXX PyTorch)"
  echo "$dir"
}

# --cuda: the configure options (one a line) after the common ones.
cuda_options() {
  local torch_dir=$1 nvcc=${NVCC:-} archs=${KVBENCH_CUDA_ARCHITECTURES:-} cap
  if [ -z "$nvcc" ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc
    else nvcc=$(command -v nvcc || true)
    fi
  fi
  if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
    usage_error "no nvcc: ${nvcc:-not at /usr/local/cuda/bin/nvcc nor on PATH} (set NVCC=/path/to/nvcc)"
  fi
  if [ -z "$archs" ] && command -v nvidia-smi >/dev/null; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
    [[ $cap =~ ^[0-9]+$ ]] && archs=$cap
  fi
  echo "-DKVBENCH_CUDA=ON"
  echo "-DKVBENCH_REQUIRE_CUDA_TORCH=ON"
  echo "-DTorch_DIR=$torch_dir"
  echo "-DCMAKE_CUDA_COMPILER=$nvcc"
  [ -z "$archs" ] || echo "-DCMAKE_CUDA_ARCHITECTURES=$archs"
  if [ -n "${KVBENCH_DEPS_PREFIX:-}" ]; then
    [ -d "$KVBENCH_DEPS_PREFIX/usr" ] ||
      usage_error "KVBENCH_DEPS_PREFIX=$KVBENCH_DEPS_PREFIX has no usr/ (make it with ci/pack_deps.sh DIR on Debian 12)"
    echo "-DCMAKE_PREFIX_PATH=$(cd "$KVBENCH_DEPS_PREFIX/usr" && pwd)"
  fi
  # Ninja for a new build dir when installed; an existing one keeps its generator.
  if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then echo "-GNinja"; fi
}

configure_options=(-DCMAKE_BUILD_TYPE=Release)
configure_what="CMake, Release"
if ((cuda)); then
  torch_dir=$(find_cuda_torch)
  options=$(cuda_options "$torch_dir")
  mapfile -t extra <<<"$options"
  configure_options+=("${extra[@]}")
  configure_what="CMake, Release, CUDA, LibTorch $torch_dir"
fi

mkdir -p "$build_dir"
: >"$log"
started=$SECONDS
install_packages
say "[2/3] configuring $build_dir/ ($configure_what)"
logged "configuring (cmake)" cmake -S . -B "$build_dir" "${configure_options[@]}"
build
built="$build_dir/kvbench and $build_dir/kvbench_tests"
[ -z "${KVBENCH_BUILD_TARGETS:-}" ] || built="the targets $KVBENCH_BUILD_TARGETS in $build_dir/"
say "done in $((SECONDS - started)) s: $built; full log: $log"
