// kvbench run --workers: which GPU each worker sees. (The processes themselves: CliWorkers.*.)
#include "harness/scaleout/workers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "engine/common/error.h"
#include "harness/runner/stop_signals.h"

namespace kvb {
namespace {

using Gpus = std::vector<std::string>;

TEST(WorkerGpus, OnePerWorkerMappedThroughCudaVisibleDevices) {
  EXPECT_EQ(worker_gpus(3, "", nullptr), (Gpus{"0", "1", "2"}));
  EXPECT_EQ(worker_gpus(3, "0,2,3", nullptr), (Gpus{"0", "2", "3"}));
  // With CUDA_VISIBLE_DEVICES=4,5,6,7 this process's GPU 1 is the machine's GPU 5.
  EXPECT_EQ(worker_gpus(2, "", "4,5,6,7"), (Gpus{"4", "5"}));
  EXPECT_EQ(worker_gpus(2, "1,3", "4,5,6,7"), (Gpus{"5", "7"}));
}

TEST(WorkerGpus, RefusesWhatDoesNotName1GpuPerWorker) {
  for (const auto& [devices, visible] :
       std::vector<std::pair<std::string, const char*>>{
           {"0,1", nullptr}, {"0,x,2", nullptr}, {"0,,2", nullptr}, {"0,1,4", "4,5,6"}}) {
    try {
      worker_gpus(3, devices, visible);
      ADD_FAILURE() << devices << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--devices: ", 0), 0u) << e.what();
    }
  }
}

// Workers run by /bin/sh: `script` is what each runs.
std::vector<WorkerLaunch> shell_workers(const std::vector<std::string>& scripts) {
  std::vector<WorkerLaunch> launches;
  for (const std::string& script : scripts) launches.push_back({.args = {"-c", script}});
  return launches;
}

TEST(SuperviseWorkers, AFailedWorkersExitCodeIsTheOutcome) {
  std::ostringstream display, log;
  Progress progress(display, 1, Progress::Style::lines, 2);
  const WorkersOutcome outcome =
      supervise_workers("/bin/sh", shell_workers({"exit 0", "exit 3"}), progress, log);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.stopped, 0);
  EXPECT_NE(log.str().find("worker 1: exit 3"), std::string::npos) << log.str();
}

// A stop asked of the supervisor reaches its workers (SIGUSR1), even one not yet running its
// executable (the signal held back across the fork, then the default action); those that end
// by it are not failures: a run whose cells were all done by then is complete.
TEST(SuperviseWorkers, WorkersEndedByTheStopAreNotFailures) {
  const StopSignals stop;
  ASSERT_EQ(raise(SIGUSR1), 0);  // the supervisor's own stop, as `kill -USR1 <supervisor>`
  ASSERT_EQ(StopSignals::requested(), SIGUSR1);
  std::ostringstream display, log;
  Progress progress(display, 1, Progress::Style::lines, 3);
  const auto begin = std::chrono::steady_clock::now();
  const WorkersOutcome outcome = supervise_workers(
      "/bin/sh", shell_workers({"exec sleep 30", "exec sleep 30", "exec sleep 30"}), progress, log);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(20));  // not slept
  EXPECT_EQ(outcome.stopped, 3);
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.replaced, 0);  // not started again while stopping
  EXPECT_EQ(log.str().find("exit 138"), std::string::npos) << log.str();
}

// The stop sent to a run's process group reaches a worker twice: the group's SIGTERM and its
// supervisor's SIGUSR1, the latter handled first where both are pending (lower number). That
// was taken as a second request and ended the worker at once, its cell left claimed; a real
// second request (the group's signal again) still ends it.
TEST(StopSignalsTest, TheSupervisorsPassOnAndTheGroupsSignalAreOneRequest) {
  for (const bool again : {false, true}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const StopSignals stop;
      raise(SIGUSR1);
      raise(SIGTERM);
      if (again) raise(SIGTERM);
      _exit(StopSignals::requested() == SIGTERM ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    if (again) {  // ended at once: by the signal, or 128 + it (raised inside its handler)
      EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
                  (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM))
          << status;
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
  }
}

}  // namespace
}  // namespace kvb
