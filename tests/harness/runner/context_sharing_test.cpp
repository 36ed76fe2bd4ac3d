// context_sharing "per_sample" (issue 24): the context is prefilled and compressed without the
// question, each question read after it. Full attention must not notice; SnapKV's kept set
// must then no longer depend on the question.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "datasets/dataset.h"
#include "datasets/longbench/longbench.h"
#include "engine/common/error.h"
#include "engine/session.h"
#include "harness/runner/runner.h"
#include "harness/suite/suite.h"
#include "methods/method.h"
#include "tests/test_util.h"

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

// A decoded end (LongBench's pred_script quest / clusterkv) is cut as Quest's and ClusterKV's
// pred.py cut it: from the anchor's last occurrence when within the last 100 characters,
// else the last 100 characters (code points, as Python counts them), the two parts encoded
// apart, the end without BOS.
TEST(ContextSharing, ADecodedEndIsCutAsItsReferenceCutsIt) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const Tokenizer& t = *model->tokenizer;
  Sample s;
  s.id = "s";
  s.decoded_chars = 100;
  s.decoded_anchor = "Question:";
  s.prompt = "The door is red. Question: what colour is the door?\nAnswer:";
  SplitPrompt split = split_decoded_end(*model, s);
  EXPECT_EQ(split.context, t.encode("The door is red. ", /*add_special=*/true));
  EXPECT_EQ(split.question,
            t.encode("Question: what colour is the door?\nAnswer:", /*add_special=*/false));
  // The anchor further back than 100 characters: the last 100, each 'é' one character.
  std::string tail;
  for (int i = 0; i < 100; ++i) tail += "\xc3\xa9";
  s.prompt = "Question: the door. " + std::string(30, 'x') + tail;
  split = split_decoded_end(*model, s);
  EXPECT_EQ(split.context, t.encode("Question: the door. " + std::string(30, 'x'), true));
  EXPECT_EQ(split.question, t.encode(tail, false));
  // No anchor: the last 100 characters.
  s.decoded_anchor = "";
  s.prompt = "abc" + tail;
  EXPECT_EQ(split_decoded_end(*model, s).question, t.encode(tail, false));
  // context_sharing per_sample splits it otherwise: a suite asking both is refused.
  const json suite = {
      {"name", "both"},
      {"models", {"kvbench-tiny"}},
      {"datasets", {{{"name", "longbench"},
                     {"params", {{"dataset", "hotpotqa"},
                                 {"data_dir", std::string(KVBENCH_SOURCE_DIR) +
                                                  "/tests/data/longbench/good"},
                                 {"pred_script", "quest"}}}}}},
      {"methods", {"full"}},
      {"context_sharing", {"none", "per_sample"}}};
  try {
    parse_suite(suite, "both.json");
    ADD_FAILURE() << "per_sample beside pred_script accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("otherwise than its pred_script quest"),
              std::string::npos) << e.what();
  }
  // A pred_script that prefills the whole prompt (pqcache's) splits nothing itself.
  json prefilled = suite;
  prefilled["datasets"][0]["params"]["pred_script"] = "pqcache";
  EXPECT_NO_THROW(parse_suite(prefilled, "prefilled.json"));
}

// A decoded end's sample reads its context and its end encoded apart: its input length (and the
// cell's prompt_tokens) counts those tokens, not the whole prompt's encoding.
TEST(ContextSharing, ADecodedEndsInputLengthIsTheTokensRead) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const DatasetInfo& dataset = dataset_registry().get("longbench", "test");
  const json params = dataset.normalise_params(
      {{"dataset", "hotpotqa"},
       {"data_dir", std::string(KVBENCH_SOURCE_DIR) + "/tests/data/longbench/good"},
       {"pred_script", "quest"}},
      "test");
  const MethodInfo& full = method_registry().get("full", "test");
  const Cell cell{.model = "kvbench-tiny",
                  .dataset = {.name = "longbench", .params = params},
                  .method = {.name = "full", .label = "full",
                             .config = full.normalise_config(json::object(), "test")},
                  .max_new_tokens = 1};
  const std::vector<Sample> samples = dataset.create(params)->samples(*model->tokenizer, 0);
  const CellResult result = run_cell(cell, *model, [](int, int) {});
  ASSERT_EQ(result.samples.size(), samples.size());
  ASSERT_FALSE(samples.empty());
  double total = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const SplitPrompt split = split_decoded_end(*model, samples[i]);
    const int64_t read = int64_t(split.context.size() + split.question.size());
    EXPECT_EQ(result.samples[i].input_length, read) << samples[i].id;
    EXPECT_NE(read, int64_t(encode_prompt(*model, samples[i]).size())) << samples[i].id;
    total += double(read);
  }
  for (const MetricRow& m : result.metrics)
    if (m.name == "prompt_tokens" && !m.sample_id) {
      EXPECT_DOUBLE_EQ(m.value, total / double(samples.size()));
    }
}

// Full KV: reading the question after the context (decode path) gives the answers of reading
// it with the context (one prefill), token for token.
// In bf16 too: the prefill's scores, softmax and P.V are fp32 as the decode kernel's (a bf16
// product rounded them, and 3 of 8 stories260K answers differed).
TEST(ContextSharing, FullAttentionAnswersTheSameWithAndWithoutSharing) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = LlamaModel::from_reference("kvbench-tiny", LoadOptions{.dtype = dtype});
    const auto no_progress = [](int, int) {};
    Cell alone_cell = passkey_cell("full", std::nullopt, "none");
    Cell shared_cell = passkey_cell("full", std::nullopt, "per_sample");
    alone_cell.dtype = shared_cell.dtype = dtype == at::kFloat ? "f32" : "bf16";
    const CellResult alone = run_cell(alone_cell, *model, no_progress);
    const CellResult shared = run_cell(shared_cell, *model, no_progress);
    ASSERT_EQ(alone.samples.size(), 9u);
    ASSERT_EQ(shared.samples.size(), alone.samples.size());
    for (size_t i = 0; i < alone.samples.size(); ++i) {
      EXPECT_EQ(shared.samples[i].sample_id, alone.samples[i].sample_id);
      EXPECT_EQ(shared.samples[i].prediction, alone.samples[i].prediction)
          << at::toString(dtype) << " " << alone.samples[i].sample_id;
      EXPECT_EQ(shared.samples[i].score, alone.samples[i].score);
    }
    // The same entries held either way: the same blocks (the pools' capacity may differ, the
    // decoded question having grown them by a quarter).
    const auto cell_value = [](const CellResult& r, const std::string& name) {
      for (const MetricRow& m : r.metrics)
        if (!m.sample_id && m.name == name) return m.value;
      ADD_FAILURE() << "no " << name;
      return 0.0;
    };
    EXPECT_EQ(cell_value(shared, "kv_used_bytes"), cell_value(alone, "kv_used_bytes"));
    EXPECT_GT(cell_value(alone, "kv_used_bytes"), 0.0);
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

// The samples of dataset `name` with `params` for kvbench-tiny's tokenizer.
std::vector<Sample> samples_of(const LlamaModel& model, const std::string& name, json params) {
  const DatasetInfo& info = dataset_registry().get(name, "test");
  return info.create(info.normalise_params(params, "test"))->samples(*model.tokenizer, 0);
}

// RULER asks after its context (question_position: after): the question's tokens are what
// follows the context; asked before it, the question is part of the context and unmarked.
TEST(ContextSharing, RulerMarksItsQuestionWhenItFollowsTheContext) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  for (const char* task : {"fwe", "vt"}) {
    const json params = {{"context_length", 1024}, {"samples", 2}};
    for (const Sample& s : samples_of(*model, task, params)) {
      const std::string question = model->tokenizer->decode(split_prompt(*model, s).question);
      EXPECT_NE(question.find("Answer"), std::string::npos) << task << ": " << question;
      EXPECT_LT(question.size(), 300u) << task << ": " << question;
    }
    json before = params;
    before["question_position"] = "before";
    for (const Sample& s : samples_of(*model, task, before))
      EXPECT_EQ(s.question_offset, std::string::npos) << task;
  }
}

// RULER's tasks with several keys can ask each key on its own about one context.
TEST(ContextSharing, RulerAsksEachKeySeparatelyAboutOneContext) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "skipped: " << test::shared_absent("${SHARED} (word lists)");
  auto model = LlamaModel::from_reference("kvbench-tiny");
  json params = {{"context_length", 1024}, {"samples", 2},
                 {"wordlist_dir", shared + "/data/wordlists"},
                 {"haystack_file", shared + "/data/haystack/PaulGrahamEssays.json"}};
  const std::vector<Sample> joint = samples_of(*model, "niah_multiquery", params);
  params["queries"] = "separate";
  const std::vector<Sample> separate = samples_of(*model, "niah_multiquery", params);
  ASSERT_EQ(joint.size(), 2u);
  ASSERT_EQ(separate.size(), 8u);
  for (size_t i = 0; i < separate.size(); ++i) {
    const Sample& s = separate[i];
    EXPECT_EQ(s.id, "niah_multiquery-" + std::to_string(i / 4) + ".q" + std::to_string(i % 4 + 1));
    EXPECT_EQ(s.context_id, "niah_multiquery-" + std::to_string(i / 4));
    ASSERT_EQ(s.answers.size(), 1u);
    // The needle of the key asked holds the answer.
    const std::string key = s.meta["queries"][0];
    EXPECT_NE(s.prompt.find("for " + key + " is: " + s.answers[0] + "."), std::string::npos);
    EXPECT_NE(s.prompt.substr(s.question_offset).find("for " + key + " mentioned"),
              std::string::npos);
    // Every key of the joint question is asked once, and every answer is one of the joint's.
    const auto& all = joint[i / 4].answers;
    EXPECT_NE(std::find(all.begin(), all.end(), s.answers[0]), all.end());
    EXPECT_EQ(split_prompt(*model, s).context, split_prompt(*model, separate[i / 4 * 4]).context);
  }
  params["question_position"] = "before";
  EXPECT_THROW(samples_of(*model, "niah_multiquery", params), InputError);
  json single = {{"context_length", 1024}, {"queries", "separate"},
                 {"wordlist_dir", shared + "/data/wordlists"}};
  EXPECT_THROW(samples_of(*model, "niah_single_1", single), InputError);  // one key: no such param
}

// LongBench: the template's text after {context}, the record's input in it, is the question.
TEST(ContextSharing, LongBenchMarksTheTextAfterItsContext) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const std::string data = std::string(KVBENCH_SOURCE_DIR) + "/tests/data/longbench/good";
  const std::vector<Sample> samples = samples_of(
      *model, "longbench", {{"dataset", "hotpotqa"}, {"data_dir", data}, {"chat_template", "none"}});
  ASSERT_FALSE(samples.empty());
  const std::vector<LongBenchRecord> records = read_longbench_jsonl(data + "/hotpotqa.jsonl");
  for (size_t i = 0; i < samples.size(); ++i) {
    ASSERT_NE(samples[i].question_offset, std::string::npos) << samples[i].id;
    const std::string tail = samples[i].prompt.substr(samples[i].question_offset);
    EXPECT_EQ(tail, longbench_question_tail(longbench_task("hotpotqa").prompt, records[i].input));
    EXPECT_NE(tail.find(records[i].input), std::string::npos) << tail;
    EXPECT_EQ(samples[i].prompt.find(records[i].context) + records[i].context.size(),
              samples[i].question_offset);
  }
  EXPECT_TRUE(samples[0].context_id.empty());  // every record its own context
  EXPECT_EQ(longbench_question_tail("Q: {input}\n{context}", "x"), "");
  EXPECT_EQ(longbench_question_tail("{context} then {input}?", "x"), " then x?");
}

// multi_turn: one conversation per sample, its follow-up turns asking the other doors.
TEST(MultiTurn, EachTurnAsksItsOwnDoorAfterThePreviousAnswer) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const std::vector<Sample> samples =
      samples_of(*model, "multi_turn", {{"context_length", 512}, {"samples", 2}, {"questions", 3}});
  ASSERT_EQ(samples.size(), 2u);
  for (const Sample& s : samples) {
    ASSERT_EQ(s.follow_ups.size(), 2u);
    EXPECT_NE(s.prompt.find("The pass key of the red door is " + s.answers[0]), std::string::npos);
    EXPECT_NE(s.prompt.substr(s.question_offset).find("red door?"), std::string::npos);
    const char* doors[] = {"blue", "green"};
    for (size_t k = 0; k < 2; ++k) {
      const Sample::Turn& t = s.follow_ups[k];
      EXPECT_EQ(t.text, std::string("\n\nWhat is the pass key of the ") + doors[k] +
                            " door? The pass key of the " + doors[k] + " door is");
      ASSERT_EQ(t.answers.size(), 1u);
      EXPECT_NE(s.prompt.find("The pass key of the " + std::string(doors[k]) + " door is " +
                              t.answers[0]), std::string::npos);
    }
  }
}

// The runner answers every turn of a conversation as a row of its own, the cell's score is
// their mean, and Full answers each turn the same with the context shared.
TEST(MultiTurn, EveryTurnIsARowAndFullIgnoresSharing) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  const auto no_progress = [](int, int) {};
  Cell cell = passkey_cell("full", std::nullopt, "none");
  cell.dataset = {.name = "multi_turn",
                  .params = dataset_registry().get("multi_turn", "test").normalise_params(
                      {{"context_length", 512}, {"samples", 2}, {"questions", 3}}, "test")};
  const CellResult alone = run_cell(cell, *model, no_progress);
  cell.context_sharing = "per_sample";
  const CellResult shared = run_cell(cell, *model, no_progress);
  ASSERT_EQ(alone.samples.size(), 6u);
  EXPECT_EQ(alone.samples[1].sample_id, "multi_turn-0.turn2");
  EXPECT_EQ(alone.samples[2].sample_id, "multi_turn-0.turn3");
  double sum = 0;
  for (const SampleRow& r : alone.samples) sum += r.score;
  const auto metric = [](const CellResult& r, const std::string& name) {
    for (const MetricRow& m : r.metrics)
      if (!m.sample_id && m.name == name) return m.value;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(metric(alone, "score"), sum / 6);
  EXPECT_EQ(metric(alone, "questions"), 6);
  EXPECT_EQ(metric(alone, "samples"), 2);
  ASSERT_EQ(shared.samples.size(), alone.samples.size());
  for (size_t i = 0; i < alone.samples.size(); ++i)
    EXPECT_EQ(shared.samples[i].prediction, alone.samples[i].prediction)
        << alone.samples[i].sample_id;
}

// LongBench records that repeat a context are questions about one context.
TEST(ContextSharing, LongBenchGroupsRecordsThatRepeatAContext) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  test::TempDir dir;
  std::ofstream(dir.file("hotpotqa.jsonl"))
      << R"({"_id": "a", "input": "Who?", "context": "Passage one.", "answers": ["x"]})" "\n"
      << R"({"_id": "b", "input": "Where?", "context": "Passage two.", "answers": ["y"]})" "\n"
      << R"({"_id": "c", "input": "When?", "context": "Passage one.", "answers": ["z"]})" "\n";
  const std::vector<Sample> samples =
      samples_of(*model, "longbench",
                 {{"dataset", "hotpotqa"}, {"data_dir", dir.path()}, {"chat_template", "none"}});
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].context_id, "context-of-a");
  EXPECT_EQ(samples[2].context_id, "context-of-a");
  EXPECT_TRUE(samples[1].context_id.empty());
  EXPECT_EQ(split_prompt(*model, samples[0]).context, split_prompt(*model, samples[2]).context);
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
           {"datasets", {{{"name", "perplexity"}, {"params", {{"text_file", std::string(KVBENCH_SOURCE_DIR) + "/README.md"}}}}},
            "per_sample needs datasets that mark"}}) {
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
