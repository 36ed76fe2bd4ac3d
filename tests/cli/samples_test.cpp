// kvbench samples: a suite's prompts as the runner would feed them, checked on the built-in byte
// tokenizer, whose counts can be told from ASCII text alone: BOS, SentencePiece's leading "▁"
// (a space becomes "▁", one token too), then one token a byte.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "engine/model/llama_model.h"
#include "tests/cli/kvbench_process.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using nlohmann::json;
using test::contains, test::describe, test::kvbench, test::kvbench_all, test::Output,
    test::write_suite;

// random-tiny (byte tokenizer) on passkey, twice: the second group shares contexts.
json byte_suite() {
  return {{"name", "byte_prompts"},
          {"models", {"random-tiny"}},
          {"datasets",
           {{{"name", "passkey"},
             {"params", {{"context_length", 300}, {"samples", 3}, {"max_new_tokens", 6}}}}}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32}},
          {"context_sharing", {"none", "per_sample"}}};
}

TEST(CliSamples, JsonPromptsAreWhatTheByteTokenizerCounts) {
  test::TempDir dir;
  const std::string suite = write_suite(dir, "suite.json", byte_suite());
  const Output r = kvbench({"samples", suite, "--json", "-n", "2"}, dir.path());
  ASSERT_EQ(r.code, 0) << describe(r);
  const json groups = json::parse(r.out);
  // Methods and budgets build the same prompts: one group per context_sharing value.
  ASSERT_EQ(groups.size(), 2u) << r.out;
  EXPECT_EQ(groups[0]["context_sharing"], "none");
  EXPECT_EQ(groups[1]["context_sharing"], "per_sample");
  for (const json& group : groups) {
    EXPECT_EQ(group["samples_total"], 3);
    ASSERT_EQ(group["samples"].size(), 2u);
    for (const json& s : group["samples"]) {
      const std::string text = s["prompt_text"];
      EXPECT_EQ(s["prompt_tokens"], int64_t(text.size()) + 2) << s.dump();
      EXPECT_LE(s["prompt_tokens"].get<int64_t>(), 300);
      EXPECT_EQ(s["max_new_tokens"], 6);
      EXPECT_EQ(s["runner_chat_template"], "none");
      ASSERT_EQ(s["answers"].size(), 1u);
      EXPECT_TRUE(contains(text, "The pass key is " + s["answers"][0].get<std::string>()))
          << text;
    }
  }
  for (const json& s : groups[1]["samples"]) {
    // The context ends where the question begins.
    const std::string text = s["prompt_text"];
    const int64_t context = s["context_tokens"], question = s["question_tokens"];
    EXPECT_EQ(context + question, s["prompt_tokens"].get<int64_t>());
    EXPECT_TRUE(contains(text.substr(size_t(context - 2)), "What is the pass key?")) << text;
  }
  EXPECT_FALSE(groups[0]["samples"][0].contains("context_tokens"));
}

TEST(CliSamples, TextShowsLongPromptsByTheirEndsUnlessFull) {
  test::TempDir dir;
  const std::string suite = write_suite(dir, "suite.json", byte_suite());
  const std::vector<Output> r = kvbench_all(
      {{"samples", suite, "--chars", "40", "--set", "context_sharing=none"},
       {"samples", suite, "--full", "--set", "context_sharing=none"},
       {"samples", suite, "--json", "--set", "context_sharing=none"}},
      dir.path());
  for (const Output& o : r) ASSERT_EQ(o.code, 0) << describe(o);
  const std::string text = json::parse(r[2].out)[0]["samples"][0]["prompt_text"];
  const std::string head = text.substr(0, 40), tail = text.substr(text.size() - 40);
  EXPECT_TRUE(contains(r[0].out, "== passkey ")) << r[0].out;
  EXPECT_TRUE(contains(r[0].out, "3 samples, prompts of ")) << r[0].out;
  EXPECT_TRUE(contains(r[0].out, "-- sample passkey-0: " + std::to_string(text.size() + 2) +
                                     " prompt tokens (BOS included), answer up to 6 tokens"))
      << r[0].out;
  EXPECT_TRUE(contains(r[0].out, head + "\n[... " + std::to_string(text.size() - 80) +
                                     " characters left out (--full shows them) ...]\n" + tail))
      << r[0].out;
  EXPECT_FALSE(contains(r[0].out, text)) << r[0].out;
  EXPECT_TRUE(contains(r[1].out, text)) << r[1].out;
  EXPECT_FALSE(contains(r[1].out, "left out")) << r[1].out;
}

TEST(CliSamples, FiltersThatMatchNothingNameWhatTheSuiteHas) {
  test::TempDir dir;
  const std::string suite = write_suite(dir, "suite.json", byte_suite());
  const std::vector<Output> r =
      kvbench_all({{"samples", suite, "--dataset", "niah_single_1"},
                   {"samples", suite, "--model", "kvbench-tiny"},
                   {"samples", suite, "--seed", "7"},
                   {"samples", suite, "--dataset", "passkey", "--model", "random-tiny", "-n", "0"}},
                  dir.path());
  EXPECT_EQ(r[0].code, 2) << describe(r[0]);
  EXPECT_TRUE(contains(r[0].err, "--dataset: 'niah_single_1' is in none of the suite's cells "
                                 "(it has: passkey)")) << r[0].err;
  EXPECT_EQ(r[1].code, 2) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].err, "(it has: random-tiny)")) << r[1].err;
  EXPECT_EQ(r[2].code, 2) << describe(r[2]);
  EXPECT_TRUE(contains(r[2].err, "--seed: '7'")) << r[2].err;
  EXPECT_EQ(r[3].code, 0) << describe(r[3]);
  EXPECT_FALSE(contains(r[3].out, "-- sample")) << r[3].out;  // -n 0: the summaries only
}

// A dataset's error names the group it came from.
TEST(CliSamples, ADatasetsErrorNamesItsGroup) {
  test::TempDir dir;
  json suite = byte_suite();
  suite["datasets"] = {{{"name", "multi_turn"}, {"params", {{"context_length", 200}}}}};
  const Output r = kvbench({"samples", write_suite(dir, "suite.json", suite)}, dir.path());
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "kvbench: error: multi_turn {\"context_length\":200,")) << r.err;
  EXPECT_TRUE(contains(r.err, "· model random-tiny · seed 0: context_length 200 is too short"))
      << r.err;
}

// The filters keep only the groups they name.
TEST(CliSamples, FiltersKeepTheGroupsTheyName) {
  test::TempDir dir;
  json suite = byte_suite();
  suite["context_sharing"] = {"none"};
  suite["seeds"] = {0, 1};
  suite["datasets"].push_back(
      {{"name", "multi_turn"}, {"params", {{"context_length", 2000}, {"samples", 1}, {"questions", 2}}}});
  const std::string path = write_suite(dir, "suite.json", suite);
  const std::vector<Output> r = kvbench_all(
      {{"samples", path, "-n", "0"}, {"samples", path, "-n", "0", "--dataset", "passkey", "--seed", "1"},
       {"samples", path, "-n", "0", "--dataset", "multi_turn"}},
      dir.path());
  for (const Output& o : r) ASSERT_EQ(o.code, 0) << describe(o);
  EXPECT_EQ(test::lines_with(r[0].out, "== "), 4u) << r[0].out;
  EXPECT_EQ(test::lines_with(r[1].out, "== "), 1u) << r[1].out;
  EXPECT_EQ(test::lines_with(r[1].out, "== passkey "), 1u) << r[1].out;
  EXPECT_TRUE(contains(r[1].out, "seed 1:")) << r[1].out;
  EXPECT_EQ(test::lines_with(r[2].out, "== multi_turn "), 2u) << r[2].out;
  EXPECT_EQ(test::lines_with(r[2].out, "== "), 2u) << r[2].out;
}

// What `samples` counts is what `run` feeds: each sample's input_length in the database, with
// a chat template the dataset applies and with the context shared.
TEST(CliSamples, PromptTokensAreTheRunsInputLengths) {
  test::TempDir dir;
  const json suite = {
      {"name", "longbench_prompts"},
      {"models", {"random-tiny"}},
      {"datasets", {{{"name", "longbench"},
                     {"params", {{"dataset", "hotpotqa"},
                                 {"data_dir", std::string(KVBENCH_SOURCE_DIR) + "/tests/data/longbench/good"},
                                 // llama2: random-tiny's tokenizer holds no llama3 marker
                                 {"chat_template", "llama2"}}}}}},
      {"methods", {"full"}},
      {"max_new_tokens", 2},
      {"context_sharing", {"none", "per_sample"}}};
  const std::string path = write_suite(dir, "suite.json", suite);
  const std::vector<Output> r = kvbench_all(
      {{"samples", path, "--json", "-n", "10"}, {"run", path, "--db", dir.file("r.db")}}, dir.path());
  for (const Output& o : r) ASSERT_EQ(o.code, 0) << describe(o);
  std::map<std::string, int64_t> shown;  // "<context_sharing> <id>" -> prompt_tokens
  for (const json& group : json::parse(r[0].out))
    for (const json& s : group["samples"]) {
      EXPECT_EQ(s["prompt_text"].get<std::string>().rfind("[INST] ", 0), 0u);
      shown[group["context_sharing"].get<std::string>() + " " + s["id"].get<std::string>()] =
          s["prompt_tokens"];
    }
  std::map<std::string, int64_t> stored;
  for (const auto& row : test::sql_rows(dir.file("r.db"),
                                        "SELECT coalesce(json_extract(c.config_json, "
                                        "'$.context_sharing'), 'none'), s.sample_id, "
                                        "s.input_length FROM samples s JOIN cells c ON c.id = "
                                        "s.cell_id"))
    stored[row[0] + " " + row[1]] = std::stoll(row[2]);
  EXPECT_EQ(shown.size(), 6u);
  EXPECT_EQ(shown, stored);
}

// Each sample's stop rule: LongBench samsum under THUDM's pred.py stops at the tokenizer's
// eos_token ("</s>", id 2 in stories260K's tokenizer.json) and "\n" (its byte token <0x0A>, id
// 13), neither in the first token (min_length); under Quest's the same (its pred.py asserts on
// samsum; kvbench runs it as THUDM's), the first token not compared with them either.
TEST(CliSamples, EachSampleShowsWhatItsAnswerStopsAt) {
  KVB_REQUIRE_STORIES260K(model);
  test::TempDir dir;
  auto samsum = [](const std::string& script) {
    return json{{"name", "longbench"},
                {"params", {{"dataset", "samsum"},
                            {"data_dir", std::string(KVBENCH_SOURCE_DIR) + "/tests/data/longbench/good"},
                            {"pred_script", script}}}};
  };
  const json suite = {{"name", "stops"},
                      {"models", {model}},
                      {"datasets", {samsum("longbench"), samsum("quest")}},
                      {"methods", {"full"}},
                      {"max_new_tokens", 2}};
  const std::string path = write_suite(dir, "suite.json", suite);
  const std::vector<Output> r =
      kvbench_all({{"samples", path}, {"samples", path, "--json"}}, dir.path());
  for (const Output& o : r) ASSERT_EQ(o.code, 0) << describe(o);
  const std::string stops = "stops at: the tokenizer's eos_token alone and \"\\n\" (ids 2 "
                            "\"</s>\", 13 \"\\n\"); suppressed in the first 1 generated token(s)";
  EXPECT_TRUE(contains(r[0].out, stops + "\n")) << r[0].out;
  EXPECT_TRUE(contains(r[0].out, stops + "; the first 1 generated token(s) not compared with them "
                                         "(generated on)\n"))
      << r[0].out;
  const json groups = json::parse(r[1].out);
  ASSERT_EQ(groups.size(), 2u) << r[1].out;
  const json thudm = groups[0]["samples"][0], quest = groups[1]["samples"][0];
  for (const json& s : {thudm, quest}) {
    EXPECT_EQ(s["stop_ids"], json::array({2, 13})) << s.dump();
    EXPECT_EQ(s["stops_at_eos_token_only"], true);
    EXPECT_EQ(s["min_new_tokens"], 1);
  }
  EXPECT_EQ(thudm["unchecked_new_tokens"], 0);
  EXPECT_EQ(quest["unchecked_new_tokens"], 1);
}

// `kvbench samples` reads tokenizers only: the 8B model's weights (14 GB) are never made.
TEST(LoadOptions, WithoutWeightsGivesTheTokenizerAlone) {
  LoadOptions options;
  options.weights = false;
  const auto model = LlamaModel::from_reference("random-llama3-8b", options);
  EXPECT_FALSE(model->embed.defined());
  EXPECT_TRUE(model->layers.empty());
  EXPECT_EQ(model->config.num_hidden_layers, 32);
  EXPECT_EQ(model->tokenizer->encode("ab", /*add_special=*/true).size(), 4u);  // BOS, "▁", a, b
}

}  // namespace
}  // namespace kvb
