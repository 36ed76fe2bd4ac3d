#include "engine/session.h"
#include "engine/device.h"
#include "methods/method.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cmath>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/test_util.h"

namespace kvb {
namespace {

std::unique_ptr<Method> full_method() {
  return method_registry().get("full", "test").create(json::object());
}

// Largest |a - b| relative to the largest |b|.
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

// The reference ids and text documented in the model's README (an external oracle).
struct Reference {
  std::vector<int> first_ids;
  std::string text;
};

Reference read_reference(const std::string& dir) {
  std::ifstream in(dir + "/README.md");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string readme = buffer.str();
  std::vector<std::string> blocks;
  std::regex block("```\n([\\s\\S]*?)\n```");
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), block);
       it != std::sregex_iterator(); ++it)
    blocks.push_back((*it)[1]);
  Reference ref;
  std::stringstream ids(blocks.at(0));
  for (int id; ids >> id;) ref.first_ids.push_back(id);
  ref.text = blocks.at(1);
  return ref;
}

TEST(Stories260K, GreedyGenerationFromBosMatchesReadme) {
  KVB_REQUIRE_STORIES260K(dir);
  auto model = LlamaModel::load(dir);
  const Reference ref = read_reference(dir);
  ASSERT_EQ(ref.first_ids.size(), 20u);
  auto method = full_method();
  Session session(*model, *method, SessionOptions{});
  // The reference stops at BOS (llama2.c's convention) or after 200 tokens.
  const std::vector<int> ids = session.generate({1}, 200, {1});
  ASSERT_GE(ids.size(), ref.first_ids.size());
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 20), ref.first_ids);
  EXPECT_EQ(model->tokenizer->decode(ids), ref.text);
}

TEST(Stories260K, PrefillAndStepwiseDecodeLogitsAgree) {
  KVB_REQUIRE_STORIES260K(dir);
  auto model = LlamaModel::load(dir);
  const std::vector<int> ids = model->tokenizer->encode("Once upon a time, there was a cat.", true);
  auto method = full_method();
  Session whole(*model, *method, SessionOptions{});
  at::Tensor all = whole.prefill(ids, /*all_logits=*/true);  // [L, V]
  Session stepwise(*model, *method, SessionOptions{});
  at::Tensor step = stepwise.prefill({ids[0]});
  EXPECT_LT(relative_error(step, all[0]), 1e-5);
  for (size_t i = 1; i < ids.size(); ++i) {
    step = stepwise.decode(ids[i]);
    EXPECT_LT(relative_error(step, all[i]), 1e-5) << "position " << i;
  }
}

// The shared indptr is built once per (units, k): a decode step's layers reuse it; a new count
// (the next step) gives the new offsets.
TEST(EqualCountsIndptr, ReusedForTheSameShapeRebuiltForAnother) {
  EqualCountsIndptr shared;
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor first = shared.get(3, 10, longs);
  EXPECT_TRUE(first.equal(at::tensor(std::vector<int64_t>{0, 10, 20, 30})));
  EXPECT_TRUE(shared.get(3, 10, longs).is_same(first));
  EXPECT_TRUE(shared.get(3, 11, longs).equal(at::tensor(std::vector<int64_t>{0, 11, 22, 33})));
  EXPECT_TRUE(shared.get(2, 0, longs).equal(at::zeros({3}, longs)));
  // A retrieval method's rows of one decode step: every layer's selection shares one indptr.
  const at::Tensor rows = at::arange(12).view({3, 4});  // [units, k]
  const Selection a = Selection::from_rows(rows, false, &shared);
  EXPECT_TRUE(a.indptr.equal(at::tensor(std::vector<int64_t>{0, 4, 8, 12})));
  EXPECT_TRUE(Selection::from_rows(rows + 1, false, &shared).indptr.is_same(a.indptr));
  EXPECT_TRUE(Selection::from_rows(rows, false).indptr.equal(a.indptr));  // built anew, no cache
}

TEST(Session, RandomModelPrefillAndDecodeAgree) {
  auto model = LlamaModel::from_reference("random-tiny");
  std::vector<int> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(3 + (i * 37) % 250);
  auto method = full_method();
  Session whole(*model, *method, SessionOptions{});
  at::Tensor all = whole.prefill(ids, true);
  Session stepwise(*model, *method, SessionOptions{});
  stepwise.prefill(std::vector<int>(ids.begin(), ids.begin() + 10));
  for (size_t i = 10; i < ids.size(); ++i)
    EXPECT_LT(relative_error(stepwise.decode(ids[i]), all[i]), 1e-5) << "position " << i;
}

TEST(Session, ChunkedPrefillEqualsOneChunk) {
  auto model = LlamaModel::from_reference("random-tiny");
  std::vector<int> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(3 + (i * 11) % 250);
  auto method = full_method();
  SessionOptions one_chunk;
  SessionOptions tiny_chunks;
  tiny_chunks.prefill_score_bytes = 1;  // forces chunks of a single query
  Session a(*model, *method, one_chunk), b(*model, *method, tiny_chunks);
  EXPECT_LT(relative_error(b.prefill(ids, true), a.prefill(ids, true)), 1e-5);
}

// A method whose set-up (begin) takes 0.4 s: InfiniGen's calibration on its text stands there.
class SlowSetUp : public Method {
 public:
  void begin(const MethodContext& context) override {
    Method::begin(context);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
};

// Method::begin is timed as the method's set-up, apart from the prompt's prefill: a tiny
// model's prefill of 8 tokens takes milliseconds, not the 0.4 s of the set-up.
TEST(Session, MethodSetUpIsTimedApartFromThePrefill) {
  auto model = LlamaModel::from_reference("random-tiny");
  SlowSetUp method;
  Session session(*model, method, SessionOptions{});
  session.prefill({3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_GE(session.timings().method_setup_s, 0.4);
  EXPECT_LT(session.timings().prefill_s, 0.4);
}

// min_new: the first tokens are never stop ids (their logits masked), as transformers' min_length.
TEST(Session, MinNewTokensMaskTheStopIdsAtFirst) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = full_method();
  const std::vector<int> prompt = {1, 40, 41, 42, 43};
  Session probe(*model, *method, SessionOptions{});
  const at::Tensor logits = probe.prefill(prompt);
  const int greedy = argmax_token(logits);
  at::Tensor masked = logits.clone().reshape({-1});
  masked[greedy] = -INFINITY;
  const int second = argmax_token(masked);
  Session stops(*model, *method, SessionOptions{});
  EXPECT_TRUE(stops.generate_from(stops.prefill(prompt), 3, {greedy}).empty());
  Session kept(*model, *method, SessionOptions{});
  const std::vector<int> out = kept.generate_from(kept.prefill(prompt), 3, {greedy}, 1);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], second);
}

// unchecked: the first tokens are not compared with the stop ids, nor masked: a stop id
// there is kept and generated on (Quest's decode loop).
TEST(Session, UncheckedTokensKeepAStopIdAndGoOn) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = full_method();
  const std::vector<int> prompt = {1, 40, 41, 42, 43};
  Session probe(*model, *method, SessionOptions{});
  const int greedy = argmax_token(probe.prefill(prompt));
  Session unchecked(*model, *method, SessionOptions{});
  const std::vector<int> out =
      unchecked.generate_from(unchecked.prefill(prompt), 3, {greedy}, /*min_new=*/0, /*unchecked=*/1);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], greedy);  // the stop id itself, kept
  Session unstopped(*model, *method, SessionOptions{});
  const std::vector<int> free_run = unstopped.generate(prompt, 3, {});
  // Past the first token the stop id ends it again, wherever the free run emits it.
  const auto again = std::find(free_run.begin() + 1, free_run.end(), greedy);
  EXPECT_EQ(out, std::vector<int>(free_run.begin(), again));
}

TEST(Session, RejectsTokensOutsideTheVocabulary) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = full_method();
  Session s(*model, *method, SessionOptions{});
  EXPECT_THROW(s.prefill({1, 5000}), InputError);
  EXPECT_THROW(s.prefill({}), InputError);
}

// On the CPU no device is waited for: no synchronisation is counted, and the host's time in the
// decode steps is the steps' own (read right after their clock).
TEST(Session, DecodeOnTheCpuCountsNoDeviceSyncs) {
  {
    const DeviceSyncCounter syncs(at::kCPU);
    EXPECT_FALSE(syncs.counting());
    EXPECT_EQ(at::ones({4}).sum().item<float>(), 4.f);
    EXPECT_EQ(syncs.count(), 0);
  }
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = full_method();
  Session s(*model, *method, SessionOptions{});
  s.prefill({3, 5, 7, 9});
  for (int token : {11, 13, 15}) s.decode(token);
  const SessionTimings& t = s.timings();
  EXPECT_EQ(t.decode_steps, 3);
  EXPECT_FALSE(t.syncs_counted);
  EXPECT_EQ(t.decode_syncs, 0);
  EXPECT_GT(t.decode_s, 0.0);
  EXPECT_GE(t.decode_host_s, t.decode_s);
  EXPECT_LT(t.decode_host_s, t.decode_s + 0.05);
  // The host's share of the phases: within the steps' host time, each read beside its clock.
  double attention = 0;
  for (double layer : t.attention_s) attention += layer;
  EXPECT_GT(t.attention_host_s, 0.0);
  EXPECT_GT(t.select_host_s, 0.0);
  EXPECT_LE(t.select_host_s + t.attention_host_s, t.decode_host_s);
  EXPECT_GE(t.attention_host_s, attention);
  EXPECT_LT(t.attention_host_s, attention + 0.05);
  EXPECT_GE(t.select_host_s, t.select_s);
  EXPECT_LT(t.select_host_s, t.select_s + 0.05);
  EXPECT_EQ(t.prefill_attention_kernel, -1);  // the CPU's explicit chunked attention
}

// Steps tallied on the device (counts only it knows) and on the host (counts the selection
// carried) add up as one tally.
TEST(Session, AttendedTallyMergesDeviceAndHostSteps) {
  AttendedTally tally;
  tally.reset(/*layers=*/2, /*kv_heads=*/2, at::kCPU);
  tally.add(0, at::tensor({5, 9}, at::kLong), 1);
  tally.add(0, std::vector<int64_t>{3, 11}, 1);
  tally.add(1, std::vector<int64_t>{4, 4}, 1);
  tally.step();
  tally.step();
  const AttendedCounts a = tally.read();
  EXPECT_EQ(a.steps, 2);
  EXPECT_EQ(a.sum, (std::vector<double>{8, 20, 4, 4}));
  EXPECT_EQ(a.min, (std::vector<int64_t>{3, 9, 4, 4}));
  EXPECT_EQ(a.max, (std::vector<int64_t>{5, 11, 4, 4}));
}

// Per-query-head counts: a KV head's count is its query heads' mean, summed exactly (3 and 4
// are 3.5 at each step, not 4), its min and max rounded half up; device and host alike.
TEST(Session, AttendedTallySumsTheQueryHeadsMeanExactly) {
  AttendedTally tally;
  tally.reset(/*layers=*/1, /*kv_heads=*/2, at::kCPU);
  tally.add(0, at::tensor({3, 4, 8, 8}, at::kLong), 2);
  tally.add(0, std::vector<int64_t>{3, 4, 6, 8}, 2);
  const AttendedCounts a = tally.read();
  EXPECT_EQ(a.sum, (std::vector<double>{7, 15}));
  EXPECT_EQ(a.min, (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(a.max, (std::vector<int64_t>{4, 8}));
}

// A per-query-head selection: each even query head attends the B keys it weighs most, each
// odd one the B it weighs least (q.k ranks them as the softmax does).
class TopAndBottomPerQueryHead : public Method {
 public:
  Selection select(int, const at::Tensor& q, const LayerKV& kv) override {
    const int64_t Hkv = kv.num_heads(), g = q.size(0) / Hkv;
    std::vector<std::vector<int64_t>> lists;
    for (int64_t j = 0; j < q.size(0); ++j) {
      const at::Tensor scores = at::matmul(kv.keys(int(j / g)).to(at::kFloat), q[j].to(at::kFloat));
      const at::Tensor picked = std::get<1>(scores.topk(context_.budget, 0, /*largest=*/j % 2 == 0));
      const at::Tensor sorted = std::get<0>(picked.sort()).contiguous();
      lists.emplace_back(sorted.data_ptr<int64_t>(), sorted.data_ptr<int64_t>() + sorted.numel());
    }
    return Selection::from_lists(lists, /*per_query_head=*/true, q.device());
  }
};

// Recall scores a per-query-head selection per query head, against that head's own top-B:
// (1 + 0) / 2 at every layer. Scoring the group's union against the group's summed top-B would
// credit the odd heads with the even heads' keys.
TEST(Session, RecallOfAPerQueryHeadSelectionIsEachHeadsOwn) {
  auto model = LlamaModel::from_reference("random-tiny");
  ASSERT_EQ(model->config.num_attention_heads / model->config.num_key_value_heads, 2);
  TopAndBottomPerQueryHead method;
  Session session(*model, method, SessionOptions{.budget = 8, .track_fidelity = true});
  std::vector<int> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 200);
  session.prefill(prompt);
  const auto begin = std::chrono::steady_clock::now();
  for (int t = 0; t < 3; ++t) session.decode(5 + t);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // The measurement's time is its own, not the decode steps': the two add up to at most the
  // steps' wall time (counted twice, they would not).
  const SessionTimings& timings = session.timings();
  EXPECT_GT(timings.fidelity_s, 0.0);
  EXPECT_GT(timings.decode_s, 0.0);
  EXPECT_LE(timings.decode_s + timings.fidelity_s, wall);
  const FidelityCounts& f = session.fidelity();
  for (size_t l = 0; l < f.count.size(); ++l) {
    ASSERT_GT(f.count[l], 0);
    EXPECT_NEAR(f.recall_sum[l] / double(f.count[l]), 0.5, 1e-12) << "layer " << l;
  }
}

// Oracle top-k attends the true top-B keys by definition: its recall is exactly 1 in bf16 too
// (the reference scores and Oracle's both in fp32, ties to the earliest entry), and in f32.
TEST(Session, OracleRecallIsOneInEveryDtype) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = LlamaModel::from_reference("random-tiny", LoadOptions{.dtype = dtype});
    const MethodInfo& info = method_registry().get("oracle_topk", "test");
    std::unique_ptr<Method> oracle = info.create(info.normalise_config(json::object(), "test"));
    Session session(*model, *oracle, SessionOptions{.budget = 8, .track_fidelity = true});
    std::vector<int> prompt;
    for (int i = 0; i < 60; ++i) prompt.push_back(3 + (i * 37) % 200);
    session.prefill(prompt);
    for (int t = 0; t < 4; ++t) session.decode(5 + t);
    const FidelityCounts& f = session.fidelity();
    for (size_t l = 0; l < f.count.size(); ++l) {
      ASSERT_GT(f.count[l], 0);
      EXPECT_EQ(f.recall_sum[l], double(f.count[l])) << at::toString(dtype) << " layer " << l;
    }
  }
}

TEST(Rope, Llama3ScalingKeepsHighFrequenciesAndSlowsLowOnes) {
  ModelConfig c = random_tiny_config();
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 8192;
  at::Tensor scaled = rope_inverse_frequencies(c);
  c.rope_scaling.type = "none";
  at::Tensor plain = rope_inverse_frequencies(c);
  ASSERT_EQ(scaled.numel(), 64);
  // Channel 0: wavelength 2*pi < 8192/4, unchanged. Channel 63: wavelength far above 8192,
  // divided by the factor.
  EXPECT_FLOAT_EQ(scaled[0].item<float>(), 1.0f);
  EXPECT_NEAR(scaled[63].item<float>() / plain[63].item<float>(), 1.0 / 8.0, 1e-6);
  // A channel inside the ramp lies strictly between the two.
  for (int i = 0; i < 64; ++i) {
    const double wavelen = 2 * M_PI / plain[i].item<double>();
    if (wavelen > 2048 && wavelen < 8192) {
      EXPECT_LT(scaled[i].item<float>(), plain[i].item<float>());
      EXPECT_GT(scaled[i].item<float>(), plain[i].item<float>() / 8);
    }
  }
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 2.0;
  EXPECT_NEAR(rope_inverse_frequencies(c)[5].item<float>(), plain[5].item<float>() / 2, 1e-9);
}

}  // namespace
}  // namespace kvb
