// `kvbench run --workers N`: N processes of kvbench on one machine and one database, each
// claiming the next free cell (the store's claims), supervised by the process that started
// them: one progress display, a worker killed by a signal replaced once (not while a stop is
// requested: StopSignals).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "harness/runner/progress.h"

namespace kvb {

// One worker process: its arguments after the executable's name, and the one GPU it may see
// (its CUDA_VISIBLE_DEVICES; empty: this process's environment unchanged). Seeing one GPU, a
// worker runs its cells on "cuda:0", so their keys do not depend on which GPU ran them.
struct WorkerLaunch {
  std::vector<std::string> args;
  std::string visible_gpu;
};

// The GPU of each of `workers` workers as CUDA_VISIBLE_DEVICES names it: the i-th of `devices`
// ("0,2,3"; empty: 0 .. workers-1), mapped through `visible` (this process's
// CUDA_VISIBLE_DEVICES, null when unset: the i-th GPU it lists). InputError naming --devices
// when the counts differ or an entry is not a GPU number listed.
std::vector<std::string> worker_gpus(int workers, const std::string& devices,
                                     const char* visible);

struct WorkersOutcome {
  // The largest exit code of the workers that finished (128+N: signal N), those that ended by
  // a stop this process was asked for (StopSignals) left out: they are counted in `stopped`.
  int exit_code = 0;
  int replaced = 0;  // workers killed by a signal and started again
  int stopped = 0;   // workers that ended by the stop
};

// Runs each launch as a process of `executable` and waits for them all. Their stdout is
// discarded (the supervisor prints the table once); their stderr is read line by line:
// progress events go to `progress`, other lines to `log` as "worker i: <line>". A worker
// killed by a signal is started again once, and its claimed cell is then taken over and redone
// (the same host, its pid gone); one that exits is not.
WorkersOutcome supervise_workers(const std::string& executable,
                                 const std::vector<WorkerLaunch>& launches, Progress& progress,
                                 std::ostream& log);

}  // namespace kvb
