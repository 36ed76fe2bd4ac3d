// The perplexity dataset: consecutive windows of prefix + eval tokens, teacher forced.
#include <gtest/gtest.h>

#include <cmath>

#include <fstream>

#include "engine/common/error.h"
#include "harness/runner/runner.h"
#include "methods/method.h"
#include "tests/datasets/dataset_test_util.h"

namespace kvb {
namespace {

using test::byte_tokenizer;
using test::make_dataset;

TEST(Perplexity, ConsecutiveWindows) {
  test::TempDir tmp;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Line_" + std::to_string(i) + "_of_the_book.\n";
  std::ofstream(tmp.file("book.txt")) << text;
  auto d = make_dataset("perplexity", {{"text_file", tmp.file("book.txt")}, {"prefix_tokens", 30},
                                       {"eval_tokens", 10}, {"samples", 3}});
  EXPECT_TRUE(d->teacher_forced());
  EXPECT_EQ(d->metric_name(), "perplexity");
  const auto s = d->samples(byte_tokenizer(), 0);
  ASSERT_EQ(s.size(), 3u);
  // Windows of 40 tokens from the start of the text: 30 prompt tokens, 10 scored.
  const std::vector<int> ids = byte_tokenizer().encode(text, false);
  auto decode = [&](size_t from, size_t n) {
    return byte_tokenizer().decode(std::vector<int>(ids.begin() + long(from), ids.begin() + long(from + n)));
  };
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].prompt, decode(40 * i, 30));
    EXPECT_EQ(s[i].reference_continuation, decode(40 * i + 30, 10));
    EXPECT_EQ(s[i].prompt_ids, std::vector<int>(ids.begin() + long(40 * i), ids.begin() + long(40 * i + 30)));
    EXPECT_EQ(s[i].continuation_ids,
              std::vector<int>(ids.begin() + long(40 * i + 30), ids.begin() + long(40 * i + 40)));
  }
}

// The runner feeds a window's own tokens: its text, cut inside a character, would not encode
// back to them.
TEST(Perplexity, TheRunnerFeedsTheWindowsTokensNotTheirText) {
  test::TempDir tmp;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "\u00e9t\u00e9 ";  // "été ": two 2-byte characters
  std::ofstream(tmp.file("accents.txt")) << text;
  auto d = make_dataset("perplexity", {{"text_file", tmp.file("accents.txt")}, {"prefix_tokens", 31},
                                       {"eval_tokens", 9}, {"samples", 2}});
  const auto model = LlamaModel::from_reference("random-tiny");
  const auto s = d->samples(*model->tokenizer, 0);
  const std::vector<int> ids = model->tokenizer->encode(text, false);
  ASSERT_EQ(s.size(), 2u);
  // Window 1 starts at token 40, inside the second "é" of a word: its text re-encodes otherwise.
  EXPECT_NE(model->tokenizer->encode(s[1].prompt, false), s[1].prompt_ids);
  std::vector<int> expected = {model->tokenizer->bos_id()};
  expected.insert(expected.end(), ids.begin() + 40, ids.begin() + 71);
  EXPECT_EQ(encode_prompt(*model, s[1]), expected);
  // A run feeds those tokens and scores exactly the window's continuation tokens.
  const DatasetInfo& info = dataset_registry().get("perplexity", "test");
  const Cell cell{.model = "random-tiny",
                  .dataset = {.name = "perplexity",
                              .params = info.normalise_params(
                                  {{"text_file", tmp.file("accents.txt")}, {"prefix_tokens", 31},
                                   {"eval_tokens", 9}, {"samples", 2}},
                                  "test")},
                  .method = {.name = "full", .label = "full",
                             .config = method_registry().get("full", "test").normalise_config(
                                 json::object(), "test")}};
  const CellResult result = run_cell(cell, *model, [](int, int) {});
  for (const SampleRow& row : result.samples) EXPECT_EQ(row.input_length, 32) << row.sample_id;
  int continuations = 0;
  for (const MetricRow& m : result.metrics)
    if (m.name == "continuation_tokens") {
      EXPECT_EQ(m.value, 9.0) << *m.sample_id;
      ++continuations;
    }
  EXPECT_EQ(continuations, 2);
  // The cell's score is the perplexity of its 18 tokens, exp of their mean NLL (the windows
  // are equally long here), not the mean of the two windows' perplexities, which is larger.
  std::vector<double> nll, window_ppl;
  double cell_score = 0, cell_nll = 0;
  for (const MetricRow& m : result.metrics) {
    if (m.sample_id && m.name == "nll") nll.push_back(m.value);
    if (!m.sample_id && m.name == "score") cell_score = m.value;
    if (!m.sample_id && m.name == "nll") cell_nll = m.value;
  }
  for (const SampleRow& row : result.samples) window_ppl.push_back(row.score);
  ASSERT_EQ(nll.size(), 2u);
  ASSERT_NE(nll[0], nll[1]);
  EXPECT_NEAR(cell_nll, (nll[0] + nll[1]) / 2, 1e-12);
  EXPECT_NEAR(cell_score, std::exp((nll[0] + nll[1]) / 2), 1e-9);
  EXPECT_GT((window_ppl[0] + window_ppl[1]) / 2, cell_score);
  // windows "text", kvbench's earlier way, feeds the text encoded again.
  auto as_text = make_dataset("perplexity", {{"text_file", tmp.file("accents.txt")}, {"prefix_tokens", 31},
                                             {"eval_tokens", 9}, {"samples", 2}, {"windows", "text"}});
  const auto t = as_text->samples(*model->tokenizer, 0);
  EXPECT_TRUE(t[1].prompt_ids.empty());
  EXPECT_EQ(t[1].prompt, s[1].prompt);
  EXPECT_EQ(encode_prompt(*model, t[1]), model->tokenizer->encode(t[1].prompt, true));
}

TEST(Perplexity, Errors) {
  EXPECT_THROW(make_dataset("perplexity", json::object()), InputError);
  try {
    make_dataset("perplexity", {{"text_file", "/no/such/book.txt"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("text_file"), std::string::npos);
  }
  test::TempDir tmp;
  std::ofstream(tmp.file("short.txt")) << "too short";
  auto d = make_dataset("perplexity", {{"text_file", tmp.file("short.txt")}});
  EXPECT_THROW(d->samples(byte_tokenizer(), 0), InputError);
}

// A JSON file's text is one of its fields; read raw, its quotes and escapes would be scored.
TEST(Perplexity, JsonFileIsReadThroughItsTextField) {
  test::TempDir tmp;
  std::string text;
  for (int i = 0; i < 20; ++i) text += "Essay line " + std::to_string(i) + ",\n\"quoted\".\n";
  std::ofstream(tmp.file("essays.json")) << json{{"text", text}, {"other", 1}}.dump();
  const std::string refused = [&] {
    try {
      make_dataset("perplexity", {{"text_file", tmp.file("essays.json")}});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  EXPECT_NE(refused.find("text_field"), std::string::npos) << refused;
  EXPECT_NE(refused.find("is JSON"), std::string::npos) << refused;

  auto d = make_dataset("perplexity", {{"text_file", tmp.file("essays.json")},
                                       {"text_field", "text"}, {"prefix_tokens", 30},
                                       {"eval_tokens", 10}});
  const auto s = d->samples(byte_tokenizer(), 0);
  ASSERT_EQ(s.size(), 1u);
  const std::vector<int> ids = byte_tokenizer().encode(text, false);
  EXPECT_EQ(s[0].prompt + s[0].reference_continuation,
            byte_tokenizer().decode(std::vector<int>(ids.begin(), ids.begin() + 40)));
  EXPECT_EQ(s[0].prompt.rfind("Essay line 0,\n\"quoted\"", 0), 0u) << s[0].prompt;

  // Found when the suite loads, not when its cell runs: a field that is no string or absent, a
  // JSON Lines file (not one object), a file that is not JSON, a .JSON read as bytes.
  std::ofstream(tmp.file("lines.jsonl")) << json{{"text", "a"}}.dump() << "\n"
                                         << json{{"text", "b"}}.dump() << "\n";
  std::ofstream(tmp.file("plain.txt")) << "plain words";
  std::ofstream(tmp.file("UPPER.JSON")) << json{{"text", text}}.dump();
  const std::vector<std::pair<json, std::string>> refusals = {
      {{{"text_file", tmp.file("essays.json")}, {"text_field", "other"}},
       "is not a JSON object with a string field \"other\""},
      {{{"text_file", tmp.file("essays.json")}, {"text_field", "missing"}},
       "is not a JSON object with a string field \"missing\""},
      {{{"text_file", tmp.file("lines.jsonl")}, {"text_field", "text"}},
       "text_field reads one JSON object"},
      {{{"text_file", tmp.file("plain.txt")}, {"text_field", "text"}},
       "text_field reads one JSON object"},
      {{{"text_file", tmp.file("UPPER.JSON")}}, "is JSON"}};
  for (const auto& [params, message] : refusals) {
    try {
      make_dataset("perplexity", params);
      ADD_FAILURE() << params.dump() << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("text_field: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvb
