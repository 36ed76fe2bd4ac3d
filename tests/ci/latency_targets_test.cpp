// ci/latency_targets.py: issue 21's decode-step and prefill targets from kvbench result
// databases (the metrics below are made up, chosen to land on both sides of each target).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/store/result_store.h"
#include "tests/ci/script_test_util.h"

namespace kvb {
namespace {

struct LatencyCell {
  std::string method;
  std::optional<int64_t> budget;
  double prompt_tokens, decode_ms, select_ms, prefill_share;
  bool graphs = false;
  std::optional<double> attention_ms, sdpa_ms;  // the cell's attention, its SDPA reference
  double prefill_s = 40.0;
};

// A database of complete cells with the metrics the runner writes for a latency cell.
std::string write_db(const test::TempDir& dir, const std::string& name,
                     const std::vector<LatencyCell>& cells) {
  ResultStore store(dir.file(name));
  const int64_t run = store.begin_run(RunInfo{"latency_gpu", "{}", "kvbench run latency_gpu",
                                              "abc", "Release", "2.11", "cuda", "h", 16});
  for (size_t i = 0; i < cells.size(); ++i) {
    const LatencyCell& c = cells[i];
    const int64_t id = store.claim_cell(run, "{\"cell\":" + std::to_string(i) + "}",
                                        "random-llama3-8b", "passkey", c.method, c.budget, 0)
                           .cell_id;
    std::vector<MetricRow> metrics = {
        {std::nullopt, "prompt_tokens", c.prompt_tokens, "tokens"},
        {std::nullopt, "decode_ms_per_token", c.decode_ms, "ms"},
        {std::nullopt, "decode_host_ms_per_token", c.decode_ms - 1, "ms"},
        {std::nullopt, "select_ms_per_token", c.select_ms, "ms"},
        {std::nullopt, "prefill_s", c.prefill_s, "s"},
        {std::nullopt, "prefill_method_share", c.prefill_share, "ratio"}};
    if (c.graphs) metrics.push_back({std::nullopt, "cuda_graph_steps_share", 0.97, "ratio"});
    if (c.attention_ms)
      metrics.push_back({std::nullopt, "attention_ms_per_token", *c.attention_ms, "ms"});
    if (c.sdpa_ms)
      metrics.push_back({std::nullopt, "sdpa_attention_ms_per_token", *c.sdpa_ms, "ms"});
    store.complete_cell(id, {}, metrics, 1.0);
  }
  return dir.file(name);
}

test::CliRun targets(const std::string& args) {
  return test::run_shell("python3 " KVBENCH_SOURCE_DIR "/ci/latency_targets.py " + args);
}

TEST(LatencyTargets, SharesAgainstEachTargetAcrossDatabases) {
  test::TempDir dir;
  const std::string long_cells = write_db(dir, "128k.db", {
      {"quest", 1024, 131072, 20.0, 1.5, 0.001},
      {"quest", 1024, 131072, 12.0, 1.5, 0.001, true},
      {"clusterkv", 1024, 131072, 18.0, 7.2, 0.35},
      {"pqcache", 256, 131072, 30.0, 15.0, 0.2}});  // another budget: not the target's cell
  const std::string short_cells = write_db(dir, "32k.db", {
      {"full", std::nullopt, 32768, 11.1, 0.08, 0.0, false, 2.58, 2.0},
      {"clusterkv", 1024, 32768, 24.4, 12.9, 0.08},
      {"clusterkv_keys_dtype", 1024, 32768, 20.0, 10.0, 0.05},  // a labelled variant
      // build: overlap: 1% in its hooks' phase, but a prefill 50 s against Full's 40 s
      {"clusterkv:efficiency", 1024, 32768, 20.0, 10.0, 0.01, false, std::nullopt,
       std::nullopt, 50.0}});
  const test::CliRun r = targets(long_cells + " " + short_cells);
  ASSERT_EQ(r.code, 0) << r.output;
  test::expect_output(r, "| quest | 1024 | 131072 | yes | 12.00 | 1.50 | 12.5% | 11.00 | - | - | 40.0 | "
                   "0.1% |");
  test::expect_output(r, "| full | - | 32768 | no | 11.10 | 0.08 | 0.7% | 10.10 | 2.58 | 2.00 | 40.0 | "
                   "0.0% |");
  test::expect_output(r, "- quest, 128k, B = 1024: selection's share of the decode step "
                   "7.5%, met (<= 10%)");
  test::expect_output(r, "- quest, 128k, B = 1024, graphs: selection's share of the "
                   "decode step 12.5%, missed by 2.5 points (<= 10%)");
  test::expect_output(r, "- clusterkv, 128k, B = 1024: selection's share of the decode "
                   "step 40.0%, missed by 30.0 points (<= 10%)");
  test::expect_output(r, "- pqcache, 128k, B = 1024: selection share: no cell");
  test::expect_output(r, "- clusterkv at 131072 tokens: clustering's share of prefill "
                   "35.0%, missed by 25.0 points (<= 10%)");
  test::expect_output(r, "- clusterkv at 32768 tokens: clustering's share of prefill "
                   "8.0%, met (<= 10%)");
  test::expect_output(r, "- clusterkv_keys_dtype at 32768 tokens: clustering's share of prefill "
                   "5.0%, met (<= 10%) (its hooks' phase 5.0%; its prefill beyond Full's 0.0%: "
                   "40.0 s against 40.0 s)");
  test::expect_output(r, "- clusterkv:efficiency at 32768 tokens: clustering's share of prefill "
                   "20.0%, missed by 10.0 points (<= 10%) (its hooks' phase 1.0%; its prefill "
                   "beyond Full's 20.0%: 50.0 s against 40.0 s)");
  // No Full cell at 128k: the hooks' phase alone.
  test::expect_output(r, "- clusterkv at 131072 tokens: clustering's share of prefill "
                   "35.0%, missed by 25.0 points (<= 10%)\n");
  test::expect_output(r, "- full at 32k (random-llama3-8b): 11.10 ms/token, met");
  test::expect_output(r, "- full at 32768 tokens: attention 2.58 ms a token, 1.29x ATen's SDPA on the "
                   "same shapes (2.00 ms)");
}

TEST(LatencyTargets, NoCellsSaySoAndAnUnreadableDatabaseExitsTwo) {
  test::TempDir dir;
  const test::CliRun r = targets(write_db(dir, "empty.db", {}));
  ASSERT_EQ(r.code, 0) << r.output;
  test::expect_output(r, "- clusterkv clustering: no cell");
  test::expect_output(r, "- full at 32k: no cell");

  const test::CliRun missing = targets(dir.file("no-such.db"));
  EXPECT_EQ(missing.code, 2) << missing.output;
  test::expect_output(missing, "latency_targets: cannot read");
  EXPECT_EQ(targets("").code, 2);
}

}  // namespace
}  // namespace kvb
