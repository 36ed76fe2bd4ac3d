// context_sharing "per_sample" (issue 24): the context is prefilled and compressed without the
// question, each question read after it. Full attention must not notice; SnapKV's kept set
// must then no longer depend on the question.
#include <gtest/gtest.h>

#include "datasets/dataset.h"
#include "engine/common/error.h"
#include "engine/session.h"
#include "harness/runner/runner.h"
#include "harness/suite/suite.h"
#include "methods/method.h"

namespace kvb {
namespace {

// kvbench-tiny's passkey samples with `keys` pass keys per context.
std::vector<Sample> passkey_samples(const LlamaModel& model, int keys, int samples) {
  const DatasetInfo& info = dataset_registry().get("passkey", "test");
  const json params = info.normalise_params(
      {{"context_length", 512}, {"samples", samples}, {"keys", keys}}, "test");
  return info.create(params)->samples(*model.tokenizer, 0);
}

Cell passkey_cell(const std::string& method, std::optional<int64_t> budget,
                  const std::string& sharing) {
  const DatasetInfo& dataset = dataset_registry().get("passkey", "test");
  const MethodInfo& info = method_registry().get(method, "test");
  return Cell{.model = "kvbench-tiny",
              .dataset = {.name = "passkey",
                          .params = dataset.normalise_params(
                              {{"context_length", 512}, {"samples", 3}, {"keys", 3}}, "test")},
              .method = {.name = method, .label = method,
                         .config = info.normalise_config(json::object(), "test")},
              .budget = budget,
              .context_sharing = sharing};
}

TEST(ContextSharing, SplitPromptIsThePromptCutBeforeTheQuestion) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const std::vector<Sample> samples = passkey_samples(*model, 3, 2);
  ASSERT_EQ(samples.size(), 6u);
  for (const Sample& s : samples) {
    const SplitPrompt split = split_prompt(*model, s);
    std::vector<int> joined = split.context;
    joined.insert(joined.end(), split.question.begin(), split.question.end());
    EXPECT_EQ(joined, encode_prompt(*model, s)) << s.id;
    ASSERT_FALSE(split.question.empty()) << s.id;
    // The question's tokens decode to the question's text (the door it asks about).
    const std::string question = model->tokenizer->decode(split.question);
    EXPECT_NE(question.find("What is the pass key of the"), std::string::npos) << question;
    EXPECT_NE(question.find(s.id.substr(s.id.find('.') + 1) + " door?"), std::string::npos)
        << s.id << ": " << question;
  }
  EXPECT_EQ(split_prompt(*model, samples[0]).context, split_prompt(*model, samples[2]).context);
  EXPECT_NE(split_prompt(*model, samples[0]).context, split_prompt(*model, samples[3]).context);
  Sample unmarked = samples[0];
  unmarked.question_offset = std::string::npos;
  EXPECT_THROW(split_prompt(*model, unmarked), InputError);
}

// Full KV: reading the question after the context (decode path) gives the answers of reading
// it with the context (one prefill), token for token.
TEST(ContextSharing, FullAttentionAnswersTheSameWithAndWithoutSharing) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const auto no_progress = [](int, int) {};
  const CellResult alone = run_cell(passkey_cell("full", std::nullopt, "none"), *model, no_progress);
  const CellResult shared =
      run_cell(passkey_cell("full", std::nullopt, "per_sample"), *model, no_progress);
  ASSERT_EQ(alone.samples.size(), 9u);
  ASSERT_EQ(shared.samples.size(), alone.samples.size());
  for (size_t i = 0; i < alone.samples.size(); ++i) {
    EXPECT_EQ(shared.samples[i].sample_id, alone.samples[i].sample_id);
    EXPECT_EQ(shared.samples[i].prediction, alone.samples[i].prediction)
        << alone.samples[i].sample_id;
    EXPECT_EQ(shared.samples[i].score, alone.samples[i].score);
  }
}

// Resident positions of every (layer, KV head) after a prefill of `ids` with SnapKV at B=64.
std::vector<std::vector<int64_t>> snapkv_kept(const LlamaModel& model,
                                              const std::vector<int>& ids) {
  const MethodInfo& info = method_registry().get("snapkv", "test");
  std::unique_ptr<Method> method = info.create(info.normalise_config(json::object(), "test"));
  Session session(model, *method, SessionOptions{.budget = 64});
  session.prefill(ids);
  std::vector<std::vector<int64_t>> kept;
  for (const LayerKV& layer : session.kv())
    for (int h = 0; h < layer.num_heads(); ++h) kept.push_back(layer.positions(h));
  return kept;
}

// With sharing SnapKV keeps one set for every question of a context (its window is the
// context's end); with the question in the prompt, the question steers what it keeps.
TEST(ContextSharing, SnapKvKeepsOneSetPerContextOnlyWithSharing) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const std::vector<Sample> samples = passkey_samples(*model, 3, 2);
  int differing_without_sharing = 0;
  for (size_t first = 0; first < samples.size(); first += 3) {
    const auto shared = snapkv_kept(*model, split_prompt(*model, samples[first]).context);
    const auto alone = snapkv_kept(*model, encode_prompt(*model, samples[first]));
    for (size_t q = first + 1; q < first + 3; ++q) {
      EXPECT_EQ(snapkv_kept(*model, split_prompt(*model, samples[q]).context), shared)
          << samples[q].id;
      differing_without_sharing += snapkv_kept(*model, encode_prompt(*model, samples[q])) != alone;
    }
  }
  EXPECT_GT(differing_without_sharing, 0) << "the question never changed SnapKV's kept set";
}

TEST(ContextSharing, SuitesDeclareItPerCellAndOnlyForDatasetsThatMarkQuestions) {
  const json suite = {{"name", "s"},
                      {"models", {"random-tiny"}},
                      {"datasets", {{{"name", "passkey"}, {"params", {{"keys", 2}}}}}},
                      {"methods", {"full"}},
                      {"context_sharing", {"none", "per_sample"}}};
  const std::vector<Cell> cells = parse_suite(suite, "s.json").cells();
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_FALSE(cells[0].to_json().contains("context_sharing"));  // keys of old results kept
  EXPECT_EQ(cells[1].to_json()["context_sharing"], "per_sample");
  EXPECT_EQ(sharing_suffix(cells[1].to_json()), " (shared context)");
  EXPECT_EQ(parse_suite(suite, "s.json", {"context_sharing=per_sample"}).cells().size(), 1u);
  json one = suite;
  one["context_sharing"] = "per_sample";
  EXPECT_EQ(parse_suite(one, "s.json").cells().size(), 1u);
  for (const auto& [key, value, message] :
       std::vector<std::tuple<std::string, json, std::string>>{
           {"context_sharing", "always", "s.json: $.context_sharing: \"always\" is not one of"},
           {"datasets", {{{"name", "fwe"}}}, "per_sample needs datasets that mark"}}) {
    json bad = one;
    bad[key] = value;
    try {
      parse_suite(bad, "s.json");
      ADD_FAILURE() << key << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvb
