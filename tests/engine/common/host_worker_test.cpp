// engine/common/host_worker.h: jobs run in the order posted, off the posting thread; wait()
// returns once all have run and rethrows a job's error; destruction runs what is still queued.
#include "engine/common/host_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kvb {
namespace {

TEST(HostWorker, RunsJobsInOrderOnAnotherThread) {
  HostWorker worker;
  std::vector<int> order;  // written by the worker only, read after wait()
  std::thread::id ran_on;
  for (int i = 0; i < 100; ++i)
    worker.post([&order, &ran_on, i] {
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // later jobs queue up
      order.push_back(i);
      ran_on = std::this_thread::get_id();
    });
  worker.wait();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[size_t(i)], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(HostWorker, WaitRethrowsAJobsErrorOnceAndTheLaterJobsStillRun) {
  HostWorker worker;
  std::atomic<int> after{0};
  worker.post([] { throw std::runtime_error("job failed"); });
  worker.post([&after] { ++after; });
  EXPECT_THROW(worker.wait(), std::runtime_error);
  EXPECT_EQ(after.load(), 1);
  EXPECT_NO_THROW(worker.wait());  // reported once
  worker.post([&after] { ++after; });
  worker.wait();
  EXPECT_EQ(after.load(), 2);
}

TEST(HostWorker, DestructionRunsTheJobsStillQueued) {
  std::atomic<int> ran{0};
  {
    HostWorker worker;
    for (int i = 0; i < 10; ++i)
      worker.post([&ran] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++ran;
      });
  }
  EXPECT_EQ(ran.load(), 10);
  HostWorker unused;  // never posted to: no thread to join
}

}  // namespace
}  // namespace kvb
