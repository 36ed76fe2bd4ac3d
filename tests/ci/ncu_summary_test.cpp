// ci/ncu_summary.py: ci/gpu_test.sh step 14's summary of Nsight Compute's raw pages. The pages
// below are written by hand in the layout ncu's `--csv --page raw` gives (a header of column
// names, a row of units, a row per profiled launch); the numbers are made up.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/ci/script_test_util.h"

namespace kvb {
namespace {

test::CliRun summary(const std::string& args) {
  return test::run_shell("python3 " KVBENCH_SOURCE_DIR "/ci/ncu_summary.py " + args);
}

TEST(NcuSummary, NamesEachLaunchWithItsTimeShapeAndLargestStalls) {
  test::TempDir dir;
  std::ofstream(dir.file("raw.csv"))
      << "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"launch__grid_size\","
         "\"launch__block_size\",\"sm__warps_active.avg.pct_of_peak_sustained_active\","
         "\"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio\","
         "\"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio\","
         "\"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio\"\n"
      << "\"\",\"\",\"usecond\",\"\",\"\",\"%\",\"inst\",\"inst\",\"inst\"\n"
      << "\"0\",\"void kvb::cuda::(anonymous namespace)::quest_vector_kernel<__nv_bfloat16, "
         "16>(const void *, int)\",\"1,234.5\",\"1024\",\"256\",\"61.3\",\"1\",\"3\",\"0\"\n"
      << "\"1\",\"kvb::cuda::(anonymous namespace)::top_pages_kernel(const float *, long)\","
         "\"16.5\",\"8\",\"1024\",\"48.2\",\"6.5\",\"2.5\",\"1\"\n";
  const test::CliRun r = summary(dir.file("raw.csv"));
  EXPECT_EQ(r.code, 0) << r.output;
  test::expect_output(r, "quest_vector_kernel | 1234.5 us | grid 1024 | block 256 | regs - | occupancy % 61.3");
  test::expect_output(r, "stalls: long_scoreboard 75%, barrier 25%\n");  // no 0% reason listed
  test::expect_output(r, "top_pages_kernel | 16.5 us | grid 8 | block 1024");
  // "selected" counts a warp issuing, not stalled: left out.
  test::expect_output(r, "stalls: barrier 72%, long_scoreboard 28%\n");
}

TEST(NcuSummary, FailsOnAPageWithoutLaunches) {
  test::TempDir dir;
  std::ofstream(dir.file("empty.csv")) << "==PROF== Disconnected from process 42\n";
  const test::CliRun r = summary(dir.file("empty.csv"));
  EXPECT_EQ(r.code, 1) << r.output;
  test::expect_output(r, "no kernel launch in this file");
  EXPECT_EQ(summary("").code, 2);
}

}  // namespace
}  // namespace kvb
