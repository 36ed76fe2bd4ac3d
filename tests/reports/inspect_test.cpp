// kvbench inspect: the recorded positions are what the method kept and attended (known answers
// on StreamingLLM and per-query-head SnapKV), the needle's token span, the heatmap's shares, the
// files and the command's errors.
#include "reports/inspect.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/common/json_fields.h"
#include "tests/methods/method_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

std::vector<int> prompt(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 31 + 7) % 250);
  return ids;
}

using test::range;

std::vector<int64_t> join(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// StreamingLLM at B = 16 over a 40-token prompt on random-tiny, `steps` decode steps.
InspectTrace streaming_trace(int steps, const json& config = json::object()) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("streaming_llm", config);
  InspectRequest request;
  request.prompt = prompt(40);
  request.budget = 16;
  request.steps = steps;
  return run_inspect(*model, *method, request);
}

TEST(Inspect, RecordsWhatStreamingLLMKeepsAndAttends) {
  // B = 16, L = 40: prefill keeps sinks 0..3 + the last 11; step t attends the sinks and the
  // 12 most recent positions, the current one (39 + t) included.
  const InspectTrace trace = streaming_trace(3);
  ASSERT_EQ(trace.kept.size(), 4u);
  ASSERT_EQ(trace.attended.size(), 3u);
  EXPECT_EQ(trace.generated.size(), 3u);
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(trace.kept[l][h], join(range(0, 4), range(29, 40)));
      for (int64_t t = 1; t <= 3; ++t)
        EXPECT_EQ(trace.attended[size_t(t - 1)][l][h], join(range(0, 4), range(28 + t, 40 + t)))
            << "layer " << l << " head " << h << " step " << t;
    }
  EXPECT_TRUE(trace.qk.empty());
}

// decode_eviction: false (KVCache-Factory's): the same cut after the prefill, then the cache
// grows: step t attends the kept entries and the t decode tokens.
TEST(Inspect, StreamingLLMWithoutDecodeEvictionKeepsEveryDecodeToken) {
  const InspectTrace trace = streaming_trace(3, {{"decode_eviction", false}});
  ASSERT_EQ(trace.attended.size(), 3u);
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(trace.kept[l][h], join(range(0, 4), range(29, 40)));
      for (int64_t t = 1; t <= 3; ++t)
        EXPECT_EQ(trace.attended[size_t(t - 1)][l][h], join(range(0, 4), range(29, 40 + t)))
            << "layer " << l << " head " << h << " step " << t;
    }
}

TEST(Inspect, RecordsTheUnionOfAPerQueryHeadSelectionAndDumpsQK) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("snapkv", {{"gqa", "per_query_head"}});
  InspectRequest request;
  request.prompt = prompt(120);
  request.budget = 32;
  request.steps = 2;
  request.dump_qk = true;
  const InspectTrace trace = run_inspect(*model, *method, request);
  for (int l = 0; l < 4; ++l)
    for (int h = 0; h < 2; ++h) {
      // The KV head holds the union of its query heads' selections; each step attends all of it
      // (through one query head or the other) plus the decode tokens.
      EXPECT_GE(trace.kept[l][h].size(), 31u);  // 23 scored per query head + the window
      EXPECT_EQ(trace.attended[0][l][h], join(trace.kept[l][h], {120}));
      EXPECT_EQ(trace.attended[1][l][h], join(trace.kept[l][h], {120, 121}));
    }
  EXPECT_EQ(trace.qk.at("layer0.prefill.q").sizes(), (at::IntArrayRef{4, 120, 16}));
  EXPECT_EQ(trace.qk.at("layer3.prefill.k").sizes(), (at::IntArrayRef{2, 120, 16}));
  EXPECT_EQ(trace.qk.at("layer1.decode.q").sizes(), (at::IntArrayRef{2, 4, 16}));
  EXPECT_EQ(trace.qk.at("layer2.decode.k").sizes(), (at::IntArrayRef{2, 2, 16}));
}

TEST(Inspect, FindsTheNeedlesTokenSpan) {
  auto model = LlamaModel::from_reference("random-tiny");  // bytes: one token per character
  const std::vector<int> ids = model->tokenizer->encode("the key is 15694, remember it", true);
  const std::optional<TokenSpan> span = find_token_span(*model->tokenizer, ids, "15694");
  ASSERT_TRUE(span.has_value());
  const int64_t bos = int64_t(ids.size()) - 29;  // tokens before the text (BOS)
  EXPECT_EQ(span->first, bos + 11);
  EXPECT_EQ(span->last, bos + 15);
  EXPECT_FALSE(find_token_span(*model->tokenizer, ids, "99999").has_value());
  EXPECT_FALSE(find_token_span(*model->tokenizer, ids, "").has_value());
}

TEST(Inspect, SharesAverageStepsAndBins) {
  InspectTrace t;
  t.layers = 1;
  t.kv_heads = 2;
  t.prompt_length = 5;
  // Two steps; head 0 attends 0, 1 then 1, 4 (and a decode position 5, off the axis).
  t.attended = {{{{0, 1}, {}}}, {{{1, 4, 5}, {3}}}};
  const std::vector<std::vector<double>> share = attended_share(t, 2);  // bins {0,1} {2,3} {4}
  ASSERT_EQ(share.size(), 2u);
  EXPECT_EQ(share[0], (std::vector<double>{0.75, 0.0, 0.5}));
  EXPECT_EQ(share[1], (std::vector<double>{0.0, 0.25, 0.0}));
}

TEST(Inspect, WritesTheJsonAndTheHeatmap) {
  const InspectTrace trace = streaming_trace(2);
  test::TempDir dir;
  const json about = {{"model", "random-tiny"}, {"method", "streaming_llm"}, {"budget", 16}};
  const std::vector<std::string> files =
      write_inspect(trace, about, TokenSpan{10, 12}, dir.file("out"), "/usr/bin/gnuplot");
  const json j = read_json_file(dir.file("out/attended.json"));
  EXPECT_EQ(j["method"], "streaming_llm");
  EXPECT_EQ(j["needle"], (json{{"first", 10}, {"last", 12}}));
  EXPECT_EQ(j["steps"][1]["position"], 41);
  EXPECT_EQ(j["steps"][1]["attended"][3][1], json(join(range(0, 4), range(30, 42))));
  EXPECT_EQ(j["kept_after_prefill"][0][0], json(join(range(0, 4), range(29, 40))));
  std::ifstream script(dir.file("out/attended.gp"));
  const std::string gp((std::istreambuf_iterator<char>(script)), std::istreambuf_iterator<char>());
  EXPECT_NE(gp.find("set object 1 rect from 10, graph 0 to 13"), std::string::npos) << gp;
  if (!std::filesystem::exists("/usr/bin/gnuplot"))
    GTEST_SKIP() << "skipped: /usr/bin/gnuplot absent, attended.png not rendered";
  EXPECT_GT(std::filesystem::file_size(dir.file("out/attended.png")), 0u);
}

TEST(InspectCli, RunsOneDatasetSampleAndRejectsBadInput) {
  test::TempDir dir;
  const std::string out = dir.file("i");
  test::CliRun r = test::run_kvbench(
      "inspect --model random-tiny --method snapkv:kvcache-factory --budget 32 --dataset passkey "
      "--dataset-params '{\"context_length\": 400, \"samples\": 1}' --steps 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const json j = read_json_file(out + "/attended.json");
  EXPECT_EQ(j["method"], "snapkv");
  EXPECT_EQ(j["preset"], "kvcache-factory");
  EXPECT_EQ(j["config"]["gqa"], "per_query_head");
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_FALSE(j["needle"].is_null()) << "the pass key's span in the prompt";
  r = test::run_kvbench("inspect --model random-tiny --method snapkv --budget 32 --prompt hi "
                        "--tokens 1,2 --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("exactly one of --prompt, --tokens, --dataset"), std::string::npos);
  r = test::run_kvbench("inspect --model random-tiny --method snapkv --prompt hi --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--budget"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kvb
