// kvbench run --workers: which GPU each worker sees. (The processes themselves: CliWorkers.*.)
#include "harness/scaleout/workers.h"

#include <gtest/gtest.h>

#include "engine/common/error.h"

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

}  // namespace
}  // namespace kvb
