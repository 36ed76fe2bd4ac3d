// ci/gpu_test.sh step 14 on a stand-in project with a stand-in ncu that logs its arguments and
// answers an import with a raw page: each selection benchmark is run under ncu at its one size
// with its own kernels named, and each page is summarised (ci/ncu_summary.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/ci/script_test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

TEST(GpuTestNcu, ProfilesEachSelectionBenchmarkAtOneSizeWithItsKernels) {
  test::TempDir dir;
  test::write_gpu_test_stand_in(dir, "exit 0\n", {"ncu_summary.py"});
  std::ofstream(dir.file("build-gpu/kvbench_bench")) << "#!/bin/sh\nexit 0\n";
  std::ofstream(dir.file("raw.csv"))
      << "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n"
      << "\"0\",\"kvb::cuda::(anonymous namespace)::top_pages_kernel(const float *)\",\"16500\"\n";
  // Profiling runs log their arguments and write the report; imports print the raw page.
  std::ofstream(dir.file("ncu"))
      << "#!/bin/bash\n"
      << "case \" $* \" in\n"
      << "  *' --import '*' raw '*) cat " << dir.file("raw.csv") << " ;;\n"
      << "  *' --import '*) echo source ;;\n"
      << "  *) echo \"$*\" >> " << dir.file("ncu.log") << "\n"
      << "     while (($#)); do [ \"$1\" = --export ] && touch \"$2\"; shift; done ;;\n"
      << "esac\n";
  fs::permissions(dir.file("ncu"), fs::perms::owner_all);
  fs::permissions(dir.file("build-gpu/kvbench_bench"), fs::perms::owner_all);

  const test::CliRun r = test::run_shell("cd " + dir.file(".") + " && NCU=" + dir.file("ncu") +
                                         " bash ci/gpu_test.sh --only 14 < /dev/null");
  EXPECT_EQ(r.code, 0) << r.output;
  std::vector<std::string> runs;  // one line a profiling run
  std::ifstream log(dir.file("ncu.log"));
  for (std::string line; std::getline(log, line);) runs.push_back(line + " ");
  EXPECT_EQ(runs.size(), 7u);
  for (const auto& [filter, kernels] : std::vector<std::pair<std::string, std::string>>{
           {"gpu_quest_scores/131072", "quest_vector_kernel"},
           {"gpu_quest_select/8192/0", "top_pages_kernel"},
           {"gpu_quest_select/2048/0", "top_pages_kernel"},
           {"gpu_pq_select/131072/0", "pq_select_kernel|pq_slice_counts_kernel"},
           {"gpu_pq_select/32768/0", "pq_select_kernel|pq_slice_counts_kernel"},
           {"gpu_cluster_rows/131072", "cluster_rows_kernel"},
           {"gpu_cluster_rows/32768", "cluster_rows_kernel"}}) {
    EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [&](const std::string& run) {
      return run.find("--kernel-name regex:" + kernels + " ") != std::string::npos &&
             run.find("--benchmark_filter=" + filter + " ") != std::string::npos;
    })) << filter << " with " << kernels;
    std::string csv = "build-gpu/ncu-" + filter + ".csv:";
    std::replace(csv.begin() + 10, csv.end(), '/', '-');
    EXPECT_NE(r.output.find(csv + "\n  top_pages_kernel | 16.5 us"), std::string::npos)
        << csv << "\nin:\n" << r.output;
  }
  EXPECT_NE(r.output.find("gpu_test: PASS: ncu selection kernels"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kvb
