#!/usr/bin/env bash
# Everything on a GPU machine, one command: the CUDA build, every test, the GPU tests for real,
# the smoke suite on the CPU against its baseline and (where kvbench takes --device) on the GPU.
#   1. bash ci/setup.sh --cuda: build-gpu/ against the CUDA LibTorch (Torch_DIR, else python3's
#      torch), -DKVBENCH_CUDA=ON: the CUDA kernels and their LibTorch glue built in;
#   2. the whole CTest suite of build-gpu/ except label "gpu" (in parallel);
#   3. ctest -L gpu (one at a time: one GPU): must run: any "skipped: no GPU" fails this step,
#      as do no tests, or no CUDA kernel (CudaKernels.*) or glue (TorchGlue.*) tests among them;
#   4. build-gpu/kvbench run smoke --fresh, then kvbench check against results/baselines/smoke.json;
#   5. build-gpu/kvbench run smoke --device cuda --fresh (exit status 0: every cell complete),
#      where `kvbench run --help` lists --device;
#   6. kvbench run eviction --device cuda --dtype bf16 (kvbench-tiny-v2's passkey task);
#   7. kvbench generate --model random-llama3-8b --device cuda --dtype bf16 on a 32k-token prompt,
#      then the same with --cuda-graphs (each prints its decode rate, host ms and syncs per token);
#   8. kvbench_bench --benchmark_filter=gpu_ (device copy, the decode kernel dense and sparse at
#      32k/128k, ATen SDPA on the same shapes; CUDA events around each call queued behind a held
#      stream: the device's time, counter with_host_us the call as called), its medians printed before the table,
#      then issue 21's kernel targets from them (ci/gpu_targets.py: ratios met or missed) and
#      the selection pieces' times per layer (KVBENCH_GPU_BENCH_FILTER, default gpu_: another
#      filter, e.g. 'gpu_(copy|decode|sdpa)' for the attention kernels alone on a short lease);
#   9. kvbench train-tiny --recipe training/recipes/v2.json --device cuda --dtype bf16
#      --scale 0.02 (86 steps of every phase: the seconds per step of each phase;
#      skipped, saying so, without the shared folder's word lists and essays);
#  10. kvbench generate --profile for Full, Quest, PQCache and ClusterKV (B = 1024) on the 32k
#      prompt of step 7: the device time of each kernel and the host time of each operator per
#      decode step and phase (engine/op_profile.h), printed, and build-gpu/profile-METHOD.tsv
#      (with a Chrome trace, profile-METHOD.tsv.trace.json); Full's run also records its
#      prefill (--profile-prefill build-gpu/profile-prefill-full.tsv);
#  11. kvbench run latency_gpu_32k: every method's decode step at 32k / B=1024 on the 8B shape
#      (selection / attention / rest, the host's time in each, prefill), its table printed;
#  12. kvbench run latency_gpu_128k_targets: Full, Quest, ClusterKV and PQCache at 128k / B=1024
#      (issue 21's selection and clustering targets are stated there), then
#  13. the same with --cuda-graphs;
#  14. (not under --quick) the selection's kernels under Nsight Compute: each step-8 benchmark
#      that launches one (Quest's page scores and top-k, PQCache's selection, ClusterKV's rows;
#      at 32k and 128k) run under `ncu --clock-control none` (NCU: the ncu to use, else ncu on
#      PATH, CUDA's, or the newest under /opt/nvidia/nsight-compute), launches 2-5 of its
#      kernels profiled (the first is the benchmark's untimed warm-up; ncu flushes the caches
#      before each pass, so the data come colder than in the benchmark's loop), the
#      raw metrics in build-gpu/ncu-BENCHMARK.csv, summarised by ci/ncu_summary.py (time,
#      launch shape, occupancy, throughputs, the stall reasons that cost the most), and where
#      this ncu prints it, each SASS instruction's stall samples in ncu-BENCHMARK-sass.csv.
# Then the skipped tests with their reasons, the kernel targets (step 8) and the step targets
# of the latency databases there are (ci/latency_targets.py), and a table of the steps. Exit 0
# when every step passed, 1 otherwise, 2 when the set-up could not start (no CUDA LibTorch, no nvcc: its one line).
#
# Without a package manager: KVBENCH_DEPS_PREFIX=DIR (made by ci/pack_deps.sh on Debian 12);
# KVBENCH_SETUP_PACKAGES then defaults to skip. Also read: Torch_DIR, NVCC,
# KVBENCH_CUDA_ARCHITECTURES, JOBS (ci/setup.sh's header). Logs and databases go to build-gpu/.
# Usage: bash ci/gpu_test.sh [--quick] [--only N,M,...] [--pack FILE]
#   --pack FILE: on exit, whatever the steps did, FILE (a .tar.gz) holds build-gpu/'s logs,
#   JUnit files, benchmark JSON, profile TSVs (not their Chrome traces), ncu CSVs and result databases,
#   each database first checkpointed (a kvbench run killed by a time limit leaves its cells in
#   the -wal file beside it, which a copy of the .db alone loses): one file to bring back from
#   a machine that returns few.
#   --only: those steps only (and step 1, the build, which a warm machine's build-gpu/ makes
#   quick), so that a short device lease can split the run over calls of at most 10 minutes,
#   e.g. --only 3,8, then --only 12, then --only 11 (README: On a GPU machine, the times). A
#   step not listed is reported as SKIP.
#   --quick: steps 1, 3, 7, 8, 10, 11, 12 and 13 only (the CUDA build of the targets they use,
#   the GPU tests, generate, the kernel benchmarks and targets, the profiles, the latency cells),
#   for a session's short device time (on an H200 steps 1-8 took 70 s to build and about 60 s
#   after, run as separate commands; on an H100, 2026-11-26, the build 95 s, step 3's tests
#   3 s and 11 s, step 8 48 s, step 10's profiles 6-11 s each, step 11's 12 cells 130 s, each
#   run on its own; the script has not run whole; step 12's cells, from a suite file written
#   for the call, had prefills of 46-79 s each on the H100);
#   the others are listed as SKIP.
set -uo pipefail
quick=0 only="" pack=""
usage="usage: bash ci/gpu_test.sh [--quick] [--only N,M,...] [--pack FILE]"
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --pack)
      [ -n "${2:-}" ] || { echo "gpu_test: --pack needs a file name ($usage)" >&2; exit 2; }
      pack="$2" && shift ;;
    --only)
      [[ "${2:-}" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "gpu_test: --only needs step numbers like 3,7,8 ($usage)" >&2; exit 2; }
      only=",$2," && shift ;;
    *) echo "gpu_test: unknown argument \"$1\" ($usage)" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.." || exit 1
root=$PWD
build="build-gpu"
say() { echo "gpu_test: $*" >&2; }

# --pack: build-gpu/'s results in one archive, the databases checkpointed first.
pack_results() {
  local files=() f
  cd "$root" || return
  for f in "$build"/*.db; do
    [ -f "$f" ] && python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$f"
  done
  for f in "$build"/*.log "$build"/*.xml "$build"/*.json "$build"/*.tsv "$build"/*.csv "$build"/*.db; do
    [ -f "$f" ] && [[ "$f" != *.trace.json ]] && files+=("$f")
  done
  case "$pack" in /*) ;; *) pack="$root/$pack" ;; esac
  if ((${#files[@]} == 0)); then say "nothing in $build/ to pack into $pack"; return; fi
  if tar czf "$pack" "${files[@]}"; then say "packed ${#files[@]} files into $pack"
  else say "could not write $pack"; fi
}
if [ -n "$pack" ]; then trap pack_results EXIT; fi

if [ -n "${KVBENCH_DEPS_PREFIX:-}" ] && [ -z "${KVBENCH_SETUP_PACKAGES:-}" ]; then
  export KVBENCH_SETUP_PACKAGES=skip
fi

steps=() results=() notes=()
record() {
  steps+=("$1") results+=("$2") notes+=("$3")
  say "$2: $1${3:+ ($3)}"
}

timed_step() {  # NAME COMMAND...: PASS with the seconds, or FAIL with the exit status
  local name=$1 rc=0 started=$SECONDS
  shift
  "$@" || rc=$?
  if ((rc == 0)); then record "$name" PASS "$((SECONDS - started)) s"
  else record "$name" FAIL "exit $rc"; fi
}
quick_steps=",3,7,8,10,11,12,13,"
skipped() {  # NUMBER NAME: true (the step recorded as SKIP) where --only or --quick leaves it out
  if [ -n "$only" ] && [[ "$only" != *",$1,"* ]]; then record "$2" SKIP "--only"; return 0; fi
  if ((quick)) && [[ "$quick_steps" != *",$1,"* ]]; then record "$2" SKIP "--quick"; return 0; fi
  return 1
}

summary() {
  local i failed=0
  echo
  echo "gpu_test: summary ($build/)"
  printf '  %-36s %-6s %s\n' "step" "result" "notes"
  for i in "${!steps[@]}"; do
    printf '  %-36s %-6s %s\n' "${steps[$i]}" "${results[$i]}" "${notes[$i]}"
    [ "${results[$i]}" != FAIL ] || failed=1
  done
  return "$failed"
}

# attribute NAME of JUnit FILE's <testsuite> (CTest writes one per line).
junit_count() { sed -n "s/^[[:space:]]*$1=\"\([0-9]*\)\".*/\1/p" "$2" | head -n 1; }

if command -v nvidia-smi >/dev/null && gpu=$(nvidia-smi -L 2>/dev/null | head -n 1) && [ -n "$gpu" ]; then
  say "$gpu"
else
  say "nvidia-smi lists no GPU: the GPU tests will fail"
fi

# 1. The CUDA build (under --quick or --only without step 2 only what the other steps run: not
# kvbench_tests).
started=$SECONDS
if { ((quick)) || { [ -n "$only" ] && [[ "$only" != *",2,"* ]]; }; } && [ -z "${KVBENCH_BUILD_TARGETS:-}" ]; then
  export KVBENCH_BUILD_TARGETS="kvbench kvbench_bench kvbench_device_tests kvbench_gpu_tests"
fi
setup_rc=0
bash ci/setup.sh --cuda || setup_rc=$?
if ((setup_rc != 0)); then
  if ((setup_rc == 2)); then
    record "setup --cuda" FAIL "exit 2: could not start (its line above)"
  else
    record "setup --cuda" FAIL "exit $setup_rc; log: $build/setup.log"
  fi
  summary
  exit $((setup_rc == 2 ? 2 : 1))
fi
record "setup --cuda" PASS "$((SECONDS - started)) s"
cd "$build" || exit 1

# 2. Every test but the GPU ones.
rm -f ctest-junit.xml gpu-junit.xml  # an earlier run's
if ! skipped 2 "ctest -LE gpu"; then
  started=$SECONDS
  rc=0
  ctest --output-on-failure -j"${JOBS:-$(nproc)}" -LE gpu --output-junit "$PWD/ctest-junit.xml" || rc=$?
  total=$(junit_count tests ctest-junit.xml) failures=$(junit_count failures ctest-junit.xml)
  skipped_tests=$(junit_count skipped ctest-junit.xml)
  note="${total:-?} tests, ${failures:-?} failed, ${skipped_tests:-?} skipped, $((SECONDS - started)) s"
  if ((rc == 0)); then record "ctest -LE gpu" PASS "$note"; else record "ctest -LE gpu" FAIL "$note"; fi
fi

# 3. The GPU tests, which must run here.
if ! skipped 3 "ctest -L gpu (on the GPU)"; then
  started=$SECONDS
  rc=0
  ctest --output-on-failure -L gpu --output-junit "$PWD/gpu-junit.xml" || rc=$?
  total=$(junit_count tests gpu-junit.xml) failures=$(junit_count failures gpu-junit.xml)
  no_gpu=$(bash "$root/ci/skipped_tests.sh" gpu-junit.xml 2>/dev/null | grep -A1 '^  - no GPU' || true)
  problems=()
  ((rc == 0)) || problems+=("${failures:-?} failed")
  [ "${total:-0}" -gt 0 ] || problems+=("no GPU tests found")
  [ -z "$no_gpu" ] || problems+=("skipped: no GPU")
  grep -q 'name="CudaKernels\.' gpu-junit.xml 2>/dev/null || problems+=("no CudaKernels.* tests")
  grep -q 'name="TorchGlue\.' gpu-junit.xml 2>/dev/null || problems+=("no TorchGlue.* tests")
  note="${total:-0} tests, $((SECONDS - started)) s"
  if ((${#problems[@]} == 0)); then
    record "ctest -L gpu (on the GPU)" PASS "$note"
  else
    joined=$(printf '%s, ' "${problems[@]}")
    record "ctest -L gpu (on the GPU)" FAIL "$note; ${joined%, }"
  fi
fi
cd "$root" || exit 1

# 4. The smoke suite on the CPU, against its committed baseline.
if ! skipped 4 "smoke (cpu) + check baseline"; then
  started=$SECONDS
  if "./$build/kvbench" run smoke --db "$build/gpu-smoke.db" --fresh &&
     "./$build/kvbench" check --db "$build/gpu-smoke.db" --baseline results/baselines/smoke.json; then
    record "smoke (cpu) + check baseline" PASS "$((SECONDS - started)) s"
  else
    record "smoke (cpu) + check baseline" FAIL "see above"
  fi
fi

# 5. The smoke suite on the GPU.
if skipped 5 "smoke --device cuda"; then
  :
elif "./$build/kvbench" run --help 2>/dev/null | grep -q -- --device; then
  timed_step "smoke --device cuda" "./$build/kvbench" run smoke --device cuda \
    --db "$build/gpu-smoke-cuda.db" --fresh
else
  record "smoke --device cuda" SKIP "this kvbench has no run --device"
fi

# 6. The eviction suite on the GPU in bf16 (kvbench-tiny-v2, in the repository: needs no shared folder).
skipped 6 "eviction --device cuda --dtype bf16" ||
  timed_step "eviction --device cuda --dtype bf16" "./$build/kvbench" run eviction --device cuda \
    --dtype bf16 --db "$build/gpu-eviction.db" --fresh

# 7. Llama-3-8B's shape (random weights, 32 layers) in bf16 on a 32k-token prompt.
long_prompt=$(head -c 32000 /dev/zero | tr '\0' 'a')  # the byte tokenizer: 32k tokens
if ! skipped 7 "generate random-llama3-8b 32k bf16"; then
  timed_step "generate random-llama3-8b 32k bf16" "./$build/kvbench" generate \
    --model random-llama3-8b --device cuda --dtype bf16 --max-new 16 --prompt "$long_prompt"
  timed_step "the same, --cuda-graphs" "./$build/kvbench" generate --cuda-graphs \
    --model random-llama3-8b --device cuda --dtype bf16 --max-new 16 --prompt "$long_prompt"
fi

# 8. The GPU kernel benchmarks (benchmarks/gpu_bench.cpp), then issue 21's kernel targets.
rm -f "$build/gpu-bench.json"
skipped 8 "kvbench_bench gpu_" ||
  timed_step "kvbench_bench ${KVBENCH_GPU_BENCH_FILTER:-gpu_}" "./$build/kvbench_bench" \
    --benchmark_filter="${KVBENCH_GPU_BENCH_FILTER:-gpu_}" \
    --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$build/gpu-bench.json" --benchmark_out_format=json
targets=""
if [ -s "$build/gpu-bench.json" ]; then
  targets=$(python3 ci/gpu_targets.py "$build/gpu-bench.json" 2>&1) || true
fi

# 9. A shortened v2 training run on the GPU: its log's phase lines give seconds per step.
shared="${KVBENCH_SHARED:-$root/../shared}"
if skipped 9 "train-tiny v2 x0.02 cuda bf16"; then
  :
elif [ -d "$shared/data/wordlists" ] && [ -f "$shared/data/haystack/PaulGrahamEssays.json" ]; then
  rm -rf "$build/v2-probe"
  timed_step "train-tiny v2 x0.02 cuda bf16" "./$build/kvbench" train-tiny \
    --recipe training/recipes/v2.json --device cuda --dtype bf16 --scale 0.02 \
    --out "$build/v2-probe"
else
  record "train-tiny v2 x0.02 cuda bf16" SKIP "no word lists and essays under $shared"
fi

# 10. Where a decode step's time goes, kernel by kernel, for the methods whose selection issue
# 21 times (and Full beside them): 8 warm-up steps, then 8 recorded.
for method in full quest pqcache clusterkv; do
  skipped 10 "profile $method 32k" && continue
  extra=(--profile-prefill "$build/profile-prefill-full.tsv")  # Full's prefill too
  [ "$method" = full ] || extra=(--budget 1024)
  timed_step "profile $method 32k" "./$build/kvbench" generate --model random-llama3-8b \
    --device cuda --dtype bf16 --max-new 16 --method "$method" "${extra[@]}" \
    --prompt "$long_prompt" --profile "$build/profile-$method.tsv"
done

# 11. Every method's decode step at 32k / B = 1024 on the 8B shape (the run prints its table).
skipped 11 "latency_gpu_32k" ||
  timed_step "latency_gpu_32k" "./$build/kvbench" run latency_gpu_32k --db "$build/gpu-latency.db" --fresh

# 12-13. Issue 21's selection and clustering targets at 128k / B = 1024, eager and with graphs.
skipped 12 "latency_gpu_128k_targets" ||
  timed_step "latency_gpu_128k_targets" "./$build/kvbench" run latency_gpu_128k_targets \
    --db "$build/gpu-latency-128k.db" --fresh
skipped 13 "latency_gpu_128k_targets --cuda-graphs" ||
  timed_step "latency_gpu_128k_targets --cuda-graphs" "./$build/kvbench" run \
    latency_gpu_128k_targets --cuda-graphs --db "$build/gpu-latency-128k-graphs.db" --fresh

# 14. The selection's kernels under Nsight Compute (issue 21's selection share: the H200's
# profiles put Quest's top-k at 16 us a layer, PQCache's pq_select_kernel at 55 and ClusterKV's
# cluster_rows_kernel at 35, each one block a KV head; what they wait on was never measured).
ncu_bin=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null ||
                 ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -n 1)}
ncu_selection() {  # each "benchmark filter" "kernel regex" pair: ncu-<filter>.csv
  local runs=(
    gpu_quest_scores/131072 quest_vector_kernel
    gpu_quest_select/8192/0 top_pages_kernel
    gpu_quest_select/2048/0 top_pages_kernel
    gpu_pq_select/131072/0 'pq_select_kernel|pq_slice_counts_kernel'
    gpu_pq_select/32768/0 'pq_select_kernel|pq_slice_counts_kernel'
    gpu_cluster_rows/131072 cluster_rows_kernel
    gpu_cluster_rows/32768 cluster_rows_kernel
  )
  local i filter kernels csv rc=0 files=()
  for ((i = 0; i < ${#runs[@]}; i += 2)); do
    filter=${runs[i]} kernels=${runs[i + 1]}
    csv="$build/ncu-$(echo "$filter" | tr '/' '-').csv"
    rm -f "$csv" "$csv.ncu-rep"
    # OMP_WAIT_POLICY set: kvbench_bench runs as itself, not re-executed (ncu follows either).
    OMP_WAIT_POLICY=PASSIVE "$ncu_bin" --target-processes all --clock-control none \
      --kernel-name "regex:$kernels" --launch-skip 1 --launch-count 4 \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      --section SourceCounters \
      --export "$csv.ncu-rep" --force-overwrite \
      "./$build/kvbench_bench" --benchmark_filter="$filter" --benchmark_min_time=0.01 \
      --benchmark_repetitions=1 > "$csv.log" 2>&1 || rc=1
    if grep -q ERR_NVGPUCTRPERM "$csv.log"; then
      say "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): $csv.log"
    fi
    "$ncu_bin" --import "$csv.ncu-rep" --csv --page raw --print-units base > "$csv" \
      2>> "$csv.log" || rc=1
    # Best effort, for reading by hand: each SASS instruction with its stall samples.
    "$ncu_bin" --import "$csv.ncu-rep" --csv --page source --print-source sass \
      > "${csv%.csv}-sass.csv" 2>> "$csv.log" || echo "(no SASS page: see $csv.log)"
    files+=("$csv")
  done
  python3 ci/ncu_summary.py "${files[@]}" || rc=1
  return "$rc"
}
if skipped 14 "ncu selection kernels"; then
  :
elif [ -z "$ncu_bin" ]; then
  record "ncu selection kernels" SKIP "no ncu (NCU, PATH, /usr/local/cuda/bin, /opt/nvidia)"
else
  timed_step "ncu selection kernels" ncu_selection
fi

echo
skips=()
for junit in "$build/ctest-junit.xml" "$build/gpu-junit.xml"; do [ -f "$junit" ] && skips+=("$junit"); done
((${#skips[@]} == 0)) || bash ci/skipped_tests.sh "${skips[@]}"
if [ -n "$targets" ]; then
  echo
  echo "gpu_test: issue 21's kernel targets (ci/gpu_targets.py $build/gpu-bench.json)"
  echo "$targets"
fi
latency_dbs=()  # this run's and, on a warm machine, an earlier --only call's
for db in gpu-latency gpu-latency-128k gpu-latency-128k-graphs; do
  [ -f "$build/$db.db" ] && latency_dbs+=("$build/$db.db")
done
if ((${#latency_dbs[@]})); then
  echo
  echo "gpu_test: issue 21's step targets (ci/latency_targets.py ${latency_dbs[*]})"
  python3 ci/latency_targets.py "${latency_dbs[@]}" || true
fi
if summary; then exit 0; fi
exit 1
