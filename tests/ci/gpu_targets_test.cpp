// ci/gpu_targets.py: issue 21's kernel targets from a kvbench_bench JSON file, ratios taken
// from the medians of one run (the times below are made up, chosen to land on both sides of
// each target).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/ci/script_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::contains;

// One aggregate entry as Google Benchmark 1.7 writes it (--benchmark_report_aggregates_only).
std::string entry(const std::string& run, const std::string& aggregate, double us,
                  const std::string& extra = "") {
  return "{\"name\": \"" + run + "_" + aggregate + "\", \"run_name\": \"" + run +
         "\", \"run_type\": \"aggregate\", \"aggregate_name\": \"" + aggregate +
         "\", \"real_time\": " + std::to_string(us) + ", \"time_unit\": \"us\"" + extra + "}";
}

// Each run's median, after a stddev entry that must not be read as a time or a choice.
std::string run(const std::string& name, double median_us, const std::string& extra = "") {
  const std::string stddev_extra = extra.empty() ? "" : ", \"chosen\": 0";
  return entry(name + "/manual_time", "stddev", 1.0, stddev_extra) + ",\n" +
         entry(name + "/manual_time", "median", median_us, extra);
}

// A run without repetitions: no aggregates, the run itself.
std::string single(const std::string& name, double us, bool error = false) {
  return "{\"name\": \"" + name + "/manual_time\", \"run_name\": \"" + name +
         "/manual_time\", \"run_type\": \"iteration\", \"real_time\": " + std::to_string(us) +
         ", \"time_unit\": \"ms\"" + (error ? ", \"error_occurred\": true" : "") + "}";
}

std::string write_report(const test::TempDir& dir, const std::vector<std::string>& runs) {
  std::string text = "{\"context\": {}, \"benchmarks\": [\n";
  for (size_t i = 0; i < runs.size(); ++i) text += (i ? ",\n" : "") + runs[i];
  text += "\n]}\n";
  std::ofstream(dir.file("bench.json")) << text;
  return dir.file("bench.json");
}

test::CliRun targets(const std::string& file) {
  return test::run_shell("python3 " KVBENCH_SOURCE_DIR "/ci/gpu_targets.py " + file);
}

TEST(GpuTargets, RatiosOfTheMediansAgainstEachTarget) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      run("BM_gpu_decode_all/32768", 60), run("BM_gpu_sdpa/32768", 50),
      run("BM_gpu_decode_all/131072", 250), run("BM_gpu_sdpa/131072", 183),
      run("BM_gpu_decode_sparse/32768/1024", 20), run("BM_gpu_decode_sparse/131072/1024", 20),
      run("BM_gpu_decode_splits/32768/33", 70), run("BM_gpu_decode_splits/32768/49", 60, ", \"chosen\": 49"),
      run("BM_gpu_decode_splits/32768/66", 58, ", \"chosen\": 49")}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 32k | 1.20x (60.0 / 50.0 us) | <= 1.25x | met |"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 128k | 1.37x (250.0 / 183.0 us) | <= 1.25x | MISSED |"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "| dense / sparse B=1024, 32k | 3.00x (60.0 / 20.0 us) | >= 4x | MISSED |"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "| dense / sparse B=1024, 128k | 12.50x (250.0 / 20.0 us) | >= 10x | met |"))
      << r.output;
  // 60 us against the fastest 58: within 5%.
  EXPECT_TRUE(contains(r.output, "chosen 49, fastest 66 (33: 70.0, 49: 60.0, 66: 58.0 us) | within 5% | met |"))
      << r.output;
}

// The dense call on each pass-1 kernel, each with its split count and against SDPA; a kernel
// not run says absent, and without SDPA no ratio is given.
TEST(GpuTargets, EachDecodeKernelIsComparedWithSdpa) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      run("BM_gpu_sdpa/32768", 40), run("BM_gpu_decode_kernel/32768/0", 44, ", \"chosen\": 33"),
      run("BM_gpu_decode_kernel/32768/1", 64, ", \"chosen\": 49"),
      run("BM_gpu_decode_kernel/131072/1", 200)}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| 32k | 44.0 us (33 splits), 1.10x SDPA | 64.0 us (49 splits), "
                                 "1.60x SDPA |"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "| 128k | absent | 200.0 us |")) << r.output;
}

// The same ratios from the counter with_host_us (each call as called, the host's launches
// included), beside the targets and not judged; its stddev entry is not read.
TEST(GpuTargets, TheCallsAsCalledAreComparedBesideTheTargets) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      entry("BM_gpu_decode_all/32768/manual_time", "stddev", 1.0, ", \"with_host_us\": 1.0"),
      run("BM_gpu_decode_all/32768", 60, ", \"with_host_us\": 72.0"),
      run("BM_gpu_sdpa/32768", 50, ", \"with_host_us\": 64.0"),
      run("BM_gpu_decode_sparse/32768/1024", 12, ", \"with_host_us\": 24.0")}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 32k | 1.12x (72.0 / 64.0 us) |")) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense / sparse B=1024, 32k | 3.00x (72.0 / 24.0 us) |")) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 128k | absent |")) << r.output;
  // The targets still judge the device times: 60 / 12 = 5x.
  EXPECT_TRUE(contains(r.output, "| dense / sparse B=1024, 32k | 5.00x (60.0 / 12.0 us) | >= 4x | met |"))
      << r.output;
}

// The selection pieces: one layer's call and one per sparse layer of the 8B shape (30 for Quest
// and ClusterKV, 32 for PQCache), the assignment of one Lloyd step, one layer's clustering with
// its Lloyd steps.
TEST(GpuTargets, SelectionPiecesPerLayerAndPerStep) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      run("BM_gpu_quest_scores/131072", 20), run("BM_gpu_quest_select/8192/0", 50),
      run("BM_gpu_cosine_assign/32768", 200), run("BM_gpu_pq_select/131072/0", 40),
      run("BM_gpu_kmeans/32768/iterations:3", 40000, ", \"steps\": 17")}));
  ASSERT_EQ(r.code, 0) << r.output;
  for (const std::string line :
       {"| Quest page scores, 128k | 20.0 us | 0.60 ms (30) |",
        "| Quest selection (kernel), 8192 pages (128k) | 50.0 us | 1.50 ms (30) |",
        "| Quest selection (ATen's sorts), 8192 pages (128k) | absent | - |",
        "| PQ scores, 32k | absent | - |",
        "| PQCache selection by code combination (kernel), 128k | 40.0 us | 1.28 ms (32) |",
        "| PQCache selection, scores + softmax + sum + top-k, 128k | absent | - |",
        "| ClusterKV assignment (one Lloyd step), 32k | 200.0 us | - |",
        "| ClusterKV assignment (one Lloyd step), 128k | absent | - |",
        "| ClusterKV prefill clustering of one layer, 32k | 40.0 ms (17 Lloyd steps) | 1.20 s (30) |"})
    EXPECT_TRUE(contains(r.output, line)) << line << " missing from:\n" << r.output;
}

TEST(GpuTargets, PrefillAttentionUnderEachKernel) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      run("BM_gpu_prefill_attention/32768/0", 80000, ", \"choice\": 2"),
      run("BM_gpu_prefill_attention/32768/1", 27487.8, ", \"choice\": 1")}));
  ASSERT_EQ(r.code, 0) << r.output;
  // 2 * 32 * 32768^2 * 128 FLOPs: 8.796e12; in 80 ms, 110 TFLOP/s; in 27.49 ms, 320.
  for (const std::string line :
       {"| prefill attention, one layer at 32k (ATen picks: memory-efficient) |",
        "| ATen's choice | 80.0 ms | 2.56 s | 110 |", "| flash alone | 27.5 ms | 0.88 s | 320 |",
        "| memory-efficient alone | absent | - | - |", "| cuDNN alone | absent | - | - |"})
    EXPECT_TRUE(contains(r.output, line)) << line << " missing from:\n" << r.output;
}

TEST(GpuTargets, SingleRunsCountAndFailedOrZeroTimesDoNot) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {
      single("BM_gpu_decode_all/32768", 0.06), single("BM_gpu_sdpa/32768", 0.05),
      single("BM_gpu_decode_all/131072", 0.25), single("BM_gpu_sdpa/131072", 0.1, /*error=*/true),
      single("BM_gpu_decode_sparse/32768/1024", 0)}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 32k | 1.20x (60.0 / 50.0 us) | <= 1.25x | met |"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 128k | absent |")) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense / sparse B=1024, 32k | absent |")) << r.output;
}

TEST(GpuTargets, AbsentBenchmarksSaySoAndAnUnreadableFileExitsTwo) {
  test::TempDir dir;
  const test::CliRun r = targets(write_report(dir, {run("BM_gpu_decode_all/32768", 60)}));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "| dense decode / SDPA, 32k | absent | <= 1.25x | - |")) << r.output;
  EXPECT_TRUE(contains(r.output, "| split count at 32k: the glue's vs the fastest tried | absent |"))
      << r.output;

  const test::CliRun missing = targets(dir.file("no-such.json"));
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "gpu_targets: cannot read")) << missing.output;
}

}  // namespace
}  // namespace kvb
