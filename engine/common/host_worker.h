// One background thread that runs host-side jobs in the order they were posted: bookkeeping
// that a result needs but a decode step should not wait for (PQCache's simulated LFU cache).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace kvb {

class HostWorker {
 public:
  HostWorker() = default;
  // Runs the jobs still queued, then joins (an error they throw is dropped here: call wait()).
  ~HostWorker();
  HostWorker(const HostWorker&) = delete;
  HostWorker& operator=(const HostWorker&) = delete;

  // Queues `job` behind the earlier ones; the thread starts with the first job.
  void post(std::function<void()> job);
  // Blocks until every job posted has run; rethrows the first exception a job threw since the
  // last wait() (the jobs after it still ran).
  void wait();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable work_;  // a job was posted, or the worker is stopping
  std::condition_variable idle_;  // the queue emptied and no job runs
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace kvb
