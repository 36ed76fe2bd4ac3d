#!/usr/bin/env bash
# Sets kvbench up on Debian 12: installs the missing Debian packages (apt-get update first,
# only when something is missing), then configures and builds in Release into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#
# Quiet: one line per stage (a progress line while building); the full apt, CMake and compiler
# output goes to build/setup.log, named at the end. A failing stage says which, shows the last
# lines of the log and exits 1. A first build takes about 10 minutes on 2 cores.
# KVBENCH_SETUP_PACKAGES=skip leaves the Debian packages alone (tests; managed machines).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
log="$build_dir/setup.log"
packages=(build-essential cmake git pkg-config libtorch-dev nlohmann-json3-dev libcli11-dev
          libsqlite3-dev libbenchmark-dev libgtest-dev gnuplot-nox libopenblas0-pthread
          sqlite3 ccache python3-jieba unicode-data)

say() { echo "setup: $*" >&2; }

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
  if dry_run=$(make -C "$build_dir" -n 2>/dev/null); then
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
  jobs=$(nproc)
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
  cmake --build "$build_dir" -j"$jobs" 2>&1 | show_progress "$total"
  rc=${PIPESTATUS[0]}
  set -o pipefail
  ((rc == 0)) || fail "building" "$rc"
  local warnings
  warnings=$(grep -c 'warning:' "$log" || true)
  ((warnings == 0)) || say "$warnings compiler warnings (grep warning: $log)"
}

mkdir -p "$build_dir"
: >"$log"
started=$SECONDS
install_packages
say "[2/3] configuring $build_dir/ (CMake, Release)"
logged "configuring (cmake)" cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
build
say "done in $((SECONDS - started)) s: $build_dir/kvbench and $build_dir/kvbench_tests; full log: $log"
