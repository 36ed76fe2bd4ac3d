#!/usr/bin/env bash
# Real Slurm integration test of `kvbench slurm` / `run --shard` / `merge` (CTest label `slurm`).
#
#   bash ci/slurm_test.sh BUILD/kvbench
#
# Starts a throw-away single-node Slurm on this machine (munged, slurmctld and slurmd on
# 127.0.0.1, config, key, state and logs in a temp dir, nothing under /etc touched), then:
#   1. runs the smoke suite once in a single process (`kvbench run smoke --threads 1`);
#   2. `kvbench slurm smoke --shards 2 --submit`: a 2-task job array + dependent merge job;
#      waits; the merged database must equal the single-process one cell for cell (same
#      complete configs, same predictions, scores and metrics; timings aside);
#   3. again in a fresh folder, cancels one array task (scancel JOB_1) once it has finished
#      part of its shard, lets the dependent merge report the missing cells, resubmits that
#      task (`kvbench slurm ... --submit --array 1`) and checks the merge is now complete and
#      equal to the single run, with no config stored twice.
# Daemons are stopped on exit. Needs root (to install slurm-wlm and munge when missing, and
# to run slurmd). Exits 77 (CTest: skipped) with the reason when Slurm cannot run here.
set -uo pipefail

KVBENCH=${1:?usage: slurm_test.sh PATH/TO/kvbench}
KVBENCH=$(readlink -f "$KVBENCH")
SUITE=smoke
SHARDS=2
DEADLINE=$((SECONDS + ${KVBENCH_SLURM_TEST_TIMEOUT:-290}))

say() { echo "slurm_test: $*" >&2; }
skip() { say "SKIPPED: $*"; exit 77; }
fail() { say "FAILED: $*"; exit 1; }

[ -x "$KVBENCH" ] || fail "$KVBENCH is not an executable"
command -v sqlite3 >/dev/null || skip "the sqlite3 CLI is not installed (apt-get install sqlite3)"

# --- packages -------------------------------------------------------------------------------
need=()
for cmd in slurmctld:slurm-wlm slurmd:slurm-wlm sbatch:slurm-client munged:munge; do
  command -v "${cmd%%:*}" >/dev/null || command -v "/usr/sbin/${cmd%%:*}" >/dev/null ||
    need+=("${cmd#*:}")
done
if ((${#need[@]})); then
  [ "$(id -u)" = 0 ] || skip "Slurm is not installed (${need[*]}) and installing it needs root"
  say "installing slurm-wlm munge"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends slurm-wlm munge; } >&2 ||
    skip "apt-get install slurm-wlm munge failed (no network or no apt here?)"
fi
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs; run this test as root"
export PATH="$PATH:/usr/sbin:/sbin"

# --- a private single-node cluster ----------------------------------------------------------
T=$(mktemp -d /tmp/kvbench-slurm-XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  local code=$?
  # Jobs still queued or running on this private cluster (SLURM_CONF is ours) go first.
  if [ -n "${SLURM_CONF:-}" ] && [ -f "${SLURM_CONF}" ]; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
    sleep 1
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  if [ "$code" != 0 ] && [ "$code" != 77 ]; then
    for log in "$T"/slurmctld.log "$T"/slurmd.log "$T"/munged.log "$T"/work*/results/slurm/*/logs/*; do
      [ -f "$log" ] && { echo "----- $log (tail)" >&2; tail -n 25 "$log" >&2; }
    done
  fi
  if [ -n "${KVBENCH_SLURM_KEEP:-}" ]; then say "kept $T"; else rm -rf "$T"; fi
  say "done in ${SECONDS}s (exit $code)"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {  # a TCP port nothing listens on
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo 16817
}

mkdir -p "$T/munge" "$T/state" "$T/spool"
head -c 1024 /dev/urandom > "$T/munge.key"
chmod 400 "$T/munge.key"
munged --force --key-file="$T/munge.key" --socket="$T/munge/munge.socket" \
  --pid-file="$T/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munged.seed" \
  --foreground 2>>"$T/munged.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.2; done
[ -S "$T/munge/munge.socket" ] || skip "munged did not start: $(tail -n 3 "$T/munged.log" | tr '\n' ' ')"

CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
CPUS=2
export SLURM_CONF="$T/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=kvbtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/slurmd-%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=3
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=kvbtest Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -D -i -f "$SLURM_CONF" >>"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >>"$T/slurmd.out" 2>&1 &
PIDS+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null | head -n 1)
  case "$state" in idle*|mixed*|allocated*) break ;; esac
  sleep 0.5
done
case "$state" in
  idle*|mixed*|allocated*) say "Slurm up: node localhost $state, ports $CTLD_PORT/$SLURMD_PORT" ;;
  *) skip "Slurm did not come up (node state '${state:-none}'); slurmctld: $(tail -n 3 \
       "$T/slurmctld.log" "$T/slurmctld.out" 2>/dev/null | tr '\n' ' ') slurmd: $(tail -n 3 \
       "$T/slurmd.log" "$T/slurmd.out" 2>/dev/null | tr '\n' ' ')" ;;
esac

# A trivial job first: if Slurm cannot run even `true` here, say so and skip.
probe=$(sbatch --parsable -o "$T/probe.out" --wrap "echo ok" 2>&1) ||
  skip "sbatch refused a trivial job: $probe"
for _ in $(seq 60); do
  [ -z "$(squeue -h -j "$probe" 2>/dev/null)" ] && break
  sleep 0.5
done
grep -q ok "$T/probe.out" 2>/dev/null ||
  skip "Slurm accepted but did not run a trivial job: $(scontrol show job "$probe" 2>&1 |
       grep -o 'JobState=[^ ]*\|Reason=[^ ]*' | tr '\n' ' ') slurmd: $(tail -n 3 "$T/slurmd.log" | tr '\n' ' ')"
say "a trivial job ran (${SECONDS}s)"

# --- helpers --------------------------------------------------------------------------------
job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }

wait_jobs() {  # waits until none of the given jobs is pending or running
  while [ -n "$(squeue -h -j "$(IFS=,; echo "$*")" 2>/dev/null)" ]; do
    [ "$SECONDS" -lt "$DEADLINE" ] || fail "timed out waiting for jobs $*: $(squeue 2>&1)"
    sleep 1
  done
}

# The complete cells of a database as comparable text: config, samples, metrics except the
# timings (names ending in _s or _ms_per_token[.layerN], elapsed, and prefill_method_share, a ratio of
# two timings).
dump() {
  sqlite3 -readonly "$1" "
    SELECT c.config_json || ' | ' || s.sample_id || ' | ' || s.input_length || ' | ' ||
           s.prediction || ' | ' || s.answers_json || ' | ' || printf('%.17g', s.score)
      FROM cells c JOIN samples s ON s.cell_id = c.id WHERE c.status = 'complete'
    UNION ALL
    SELECT c.config_json || ' | ' || coalesce(m.sample_id, '-') || ' | ' || m.name || ' | ' ||
           printf('%.17g', m.value) || ' | ' || m.unit
      FROM cells c JOIN metrics m ON m.cell_id = c.id WHERE c.status = 'complete'
       AND m.name NOT LIKE '%\_s' ESCAPE '\' AND m.name NOT LIKE '%\_ms\_per\_token%' ESCAPE '\'
       AND m.name NOT IN ('elapsed', 'prefill_method_share')
    ORDER BY 1;"
}

check_equal() {  # merged db vs the single-process one, and no config twice
  local merged=$1 what=$2
  [ -f "$merged" ] || fail "$what: no merged database $merged"
  local rows distinct complete
  rows=$(sqlite3 -readonly "$merged" "SELECT count(*) FROM cells")
  distinct=$(sqlite3 -readonly "$merged" "SELECT count(DISTINCT config_json) FROM cells")
  complete=$(sqlite3 -readonly "$merged" "SELECT count(*) FROM cells WHERE status = 'complete'")
  [ "$rows" = "$distinct" ] || fail "$what: $rows cell rows for $distinct configs (duplicates)"
  [ "$complete" = "$NCELLS" ] || fail "$what: $complete of $NCELLS cells complete"
  dump "$merged" > "$T/$what.dump"
  if ! diff -q "$T/single.dump" "$T/$what.dump" >/dev/null; then
    diff "$T/single.dump" "$T/$what.dump" | head -n 20 >&2
    fail "$what: the merged database differs from the single-process run"
  fi
  [ "$(sqlite3 -readonly "$merged" 'PRAGMA integrity_check')" = ok ] || fail "$what: integrity"
  say "$what: $NCELLS cells, $(wc -l < "$T/$what.dump") rows equal to the single-process run"
}

submit() {  # kvbench slurm ... --submit; sets ARRAY_JOB and MERGE_JOB
  local out
  out=$("$KVBENCH" slurm "$SUITE" --shards "$SHARDS" --cpus-per-task 1 --time 10:00 \
        --partition kvbtest --submit "$@") || fail "kvbench slurm $* failed: $out"
  echo "$out" >&2
  ARRAY_JOB=$(echo "$out" | sed -n 's/^array_job=//p')
  MERGE_JOB=$(echo "$out" | sed -n 's/^merge_job=//p')
  [ -n "$ARRAY_JOB" ] && [ -n "$MERGE_JOB" ] || fail "no job ids in: $out"
}

# --- 1. the reference: one process ----------------------------------------------------------
mkdir -p "$T/single"
(cd "$T/single" && "$KVBENCH" run "$SUITE" --threads 1 --db single.db > run.out 2> run.err) ||
  fail "single-process run failed: $(tail -n 5 "$T/single/run.err")"
NCELLS=$(sqlite3 -readonly "$T/single/single.db" "SELECT count(*) FROM cells WHERE status='complete'")
dump "$T/single/single.db" > "$T/single.dump"
[ "$NCELLS" -gt 0 ] || fail "the single-process run stored no complete cell"
say "single-process run: $NCELLS cells (${SECONDS}s)"
"$KVBENCH" plan "$SUITE" --shards "$SHARDS" >&2 || fail "kvbench plan failed"

# --- 2. job array + dependent merge ---------------------------------------------------------
mkdir -p "$T/work1"
cd "$T/work1"
submit
wait_jobs "$ARRAY_JOB" "$MERGE_JOB"
for i in $(seq 0 $((SHARDS - 1))); do
  st=$(job_field "${ARRAY_JOB}_$i" JobState)
  [ "$st" = COMPLETED ] || fail "array task ${ARRAY_JOB}_$i ended $st"
done
[ "$(job_field "$MERGE_JOB" JobState)" = COMPLETED ] ||
  fail "merge job $MERGE_JOB ended $(job_field "$MERGE_JOB" JobState)"
check_equal "$T/work1/results/runs/$SUITE.db" array-merge
say "job array of $SHARDS + merge: ok (${SECONDS}s)"

# --- 3. kill one array task mid-run, resubmit it --------------------------------------------
# The shard with the most cells is cancelled as soon as it has completed one of them (cells of
# smoke take a fraction of a second, so the poll is tight; a task that wins the race and
# finishes first is retried in a fresh folder, up to 3 times).
victim=$(sqlite3 :memory: "SELECT key FROM json_each('$("$KVBENCH" plan "$SUITE" --shards "$SHARDS" \
         --json | tr -d '\n')', '\$.shard_cells') ORDER BY value DESC, key LIMIT 1")
[ -n "$victim" ] || fail "cannot read the plan"
for attempt in 1 2 3; do
  mkdir -p "$T/work2-$attempt"
  cd "$T/work2-$attempt"
  submit
  shard_db="$PWD/results/runs/$SUITE.shard-$victim-of-$SHARDS.db"
  done_cells=0
  while :; do
    [ "$SECONDS" -lt "$DEADLINE" ] || fail "timed out waiting for shard $victim to start"
    if [ -f "$shard_db" ]; then
      done_cells=$(sqlite3 -readonly "$shard_db" \
        "SELECT count(*) FROM cells WHERE status='complete'" 2>/dev/null || echo 0)
      [ "${done_cells:-0}" -ge 1 ] && break
    fi
    [ -z "$(squeue -h -t PD,R,CF -j "${ARRAY_JOB}_$victim" 2>/dev/null)" ] && break
    sleep 0.05
  done
  scancel "${ARRAY_JOB}_$victim" || fail "scancel ${ARRAY_JOB}_$victim failed"
  wait_jobs "$ARRAY_JOB" "$MERGE_JOB"
  st=$(job_field "${ARRAY_JOB}_$victim" JobState)
  [ "$st" = CANCELLED ] && break
  say "attempt $attempt: task ${ARRAY_JOB}_$victim ended $st before the cancel; again"
  [ "$attempt" = 3 ] && fail "could not cancel a running array task in 3 attempts"
done
say "cancelled array task ${ARRAY_JOB}_$victim mid-run, after ${done_cells:-0} complete cell(s)"
merged="$PWD/results/runs/$SUITE.db"
[ "$(job_field "$MERGE_JOB" JobState)" = FAILED ] ||
  fail "the merge after a cancelled task should fail listing the missing cells; it ended $(job_field "$MERGE_JOB" JobState)"
before=$(sqlite3 -readonly "$merged" "SELECT count(*) FROM cells WHERE status='complete'")
[ "$before" -lt "$NCELLS" ] || fail "the merge after a cancelled task holds every cell"
say "merge job with the cancelled task: $before of $NCELLS cells complete, exit 1 (as expected)"
submit --array "$victim"
wait_jobs "$ARRAY_JOB" "$MERGE_JOB"
[ "$(job_field "${ARRAY_JOB}_$victim" JobState)" = COMPLETED ] ||
  fail "resubmitted task ${ARRAY_JOB}_$victim ended $(job_field "${ARRAY_JOB}_$victim" JobState)"
[ "$(job_field "$MERGE_JOB" JobState)" = COMPLETED ] ||
  fail "merge job $MERGE_JOB ended $(job_field "$MERGE_JOB" JobState)"
log="$PWD/results/slurm/$SUITE-${SHARDS}shards/logs/$SUITE-shard-$victim-job-$ARRAY_JOB.out"
resumed=$(grep -o 'run [0-9]*: [0-9]* ran, [0-9]* already complete' "$log" | head -n 1)
say "resubmitted shard $victim: ${resumed:-?}"
[ -n "$resumed" ] || fail "no run summary in $log"
check_equal "$merged" kill-resubmit
rows=$(sqlite3 -readonly "$shard_db" "SELECT count(*) FROM cells")
distinct=$(sqlite3 -readonly "$shard_db" "SELECT count(DISTINCT config_json) FROM cells")
[ "$rows" = "$distinct" ] || fail "shard $victim database holds a config twice"
say "PASSED: array + merge equal to a single run; cancelled task resubmitted, nothing lost or duplicated"
exit 0
