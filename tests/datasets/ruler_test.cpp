// RULER-style generators: determinism for a seed, prompt length within 2% below the target in
// the model's own tokens, answers present, question placement, resource checks.
#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "tests/datasets/dataset_test_util.h"

namespace kvb {
namespace {

using test::byte_tokenizer;
using test::make_dataset;
using test::token_count;

json params_for(const std::string& data, int64_t length, int samples = 2) {
  json p = {{"context_length", length}, {"samples", samples}};
  if (!data.empty()) {
    p["haystack_file"] = data + "/haystack/PaulGrahamEssays.json";
    p["wordlist_dir"] = data + "/wordlists";
  }
  return p;
}

// Every sample's prompt is within [0.98 * target, target] tokens and contains its answers.
void expect_fits(const std::string& task, const json& params, const Tokenizer& tokenizer) {
  const int64_t target = params["context_length"];
  for (const Sample& s : make_dataset(task, params)->samples(tokenizer, 7)) {
    const int64_t n = token_count(tokenizer, s.prompt);
    EXPECT_LE(n, target) << task << " " << s.id;
    EXPECT_GE(double(n), 0.98 * double(target)) << task << " " << s.id << " at " << target;
    ASSERT_FALSE(s.answers.empty());
    if (task == "cwe" || task == "fwe") continue;  // their answers are in the text, just often
    for (const std::string& a : s.answers)
      EXPECT_NE(s.prompt.find(a), std::string::npos) << task << ": answer " << a << " not in prompt";
  }
}

TEST(RulerGenerators, SameSeedSameBytesOtherSeedOtherBytes) {
  for (const std::string task : {"niah_multikey_3", "vt", "fwe"}) {
    auto d = make_dataset(task, params_for("", 2048));
    const auto a = d->samples(byte_tokenizer(), 1), b = d->samples(byte_tokenizer(), 1);
    const auto c = d->samples(byte_tokenizer(), 2);
    ASSERT_EQ(a.size(), 2u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].prompt, b[i].prompt) << task;
      EXPECT_EQ(a[i].answers, b[i].answers) << task;
      EXPECT_NE(a[i].prompt, c[i].prompt) << task;
    }
    EXPECT_NE(a[0].prompt, a[1].prompt) << task << ": two samples of one seed are equal";
  }
}

// fwe's question and answer prefix as RULER's constants.py words them ("above" included).
TEST(RulerGenerators, FweAsksAboutTheAboveCodedText) {
  const Sample s = make_dataset("fwe", params_for("", 2048))->samples(byte_tokenizer(), 1).at(0);
  EXPECT_NE(s.prompt.find("\nQuestion: Do not provide any explanation. Please ignore the dots "
                          "'....'. What are the three most frequently appeared words in the above "
                          "coded text? Answer: According to the coded text above, the three most "
                          "frequently appeared words are:"),
            std::string::npos)
      << s.prompt.substr(s.prompt.size() - 300);
}

TEST(RulerGenerators, LengthWithinTwoPercentByteTokenizer) {
  for (int64_t length : {2048, 4096}) {
    expect_fits("vt", params_for("", length), byte_tokenizer());
    expect_fits("fwe", params_for("", length), byte_tokenizer());
  }
  // One distractor needle with uuids is ~115 bytes: 2% needs >= 6k tokens.
  expect_fits("niah_multikey_3", params_for("", 8192), byte_tokenizer());
}

TEST(RulerGenerators, LengthWithinTwoPercentStories260K) {
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  for (int64_t length : {1024, 2048, 4096}) {
    expect_fits("vt", params_for("", length), *tokenizer);
    expect_fits("fwe", params_for("", length), *tokenizer);
  }
  expect_fits("niah_multikey_3", params_for("", 4096), *tokenizer);
}

TEST(RulerGenerators, EssayAndWordTasksFit) {
  KVB_REQUIRE_SHARED_DATA(data);
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  for (const std::string task : {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                 "niah_multikey_2", "niah_multivalue", "niah_multiquery"})
    for (int64_t length : {1024, 4096}) expect_fits(task, params_for(data, length, 1), *tokenizer);
  // cwe's example plus 10 words x 30 alone take ~3k tokens of stories260K's small vocabulary.
  expect_fits("cwe", params_for(data, 8192, 1), *tokenizer);
  expect_fits("niah_single_2", params_for(data, 4096, 1), byte_tokenizer());
}

TEST(RulerGenerators, WordTaskDeterminism) {
  KVB_REQUIRE_SHARED_DATA(data);
  for (const std::string task : {"niah_multivalue", "cwe"}) {
    auto d = make_dataset(task, params_for(data, task == "cwe" ? 16384 : 2048, 1));
    EXPECT_EQ(d->samples(byte_tokenizer(), 3)[0].prompt, d->samples(byte_tokenizer(), 3)[0].prompt);
    EXPECT_NE(d->samples(byte_tokenizer(), 3)[0].prompt, d->samples(byte_tokenizer(), 4)[0].prompt);
  }
  auto mv = make_dataset("niah_multivalue", params_for(data, 2048, 1))->samples(byte_tokenizer(), 3);
  EXPECT_EQ(mv[0].answers.size(), 4u);
  EXPECT_NE(mv[0].prompt.find("What are all the special magic numbers for "), std::string::npos);
  auto cwe = make_dataset("cwe", params_for(data, 16384, 1))->samples(byte_tokenizer(), 3);
  EXPECT_EQ(cwe[0].answers.size(), 10u);
}

TEST(RulerGenerators, QuestionAfterOrBeforeTheContext) {
  json p = params_for("", 2048, 1);
  const Sample after = make_dataset("niah_multikey_3", p)->samples(byte_tokenizer(), 5)[0];
  p["question_position"] = "before";
  const Sample before = make_dataset("niah_multikey_3", p)->samples(byte_tokenizer(), 5)[0];
  const std::string question = "What is the special magic uuid for ";
  const std::string needle_of_answer = "is: " + after.answers[0] + ".";
  // After: RULER's layout, ending with the singular answer prefix.
  EXPECT_GT(after.prompt.find(question), after.prompt.find(needle_of_answer));
  EXPECT_NE(after.prompt.find("mentioned in the provided text is", after.prompt.size() - 40),
            std::string::npos);
  // Before: the question precedes every needle and nothing after the context names the key.
  EXPECT_LT(before.prompt.find(question), before.prompt.find("One of the special magic"));
  EXPECT_EQ(before.prompt.substr(before.prompt.size() - 8), "\nAnswer:");
  EXPECT_LE(token_count(byte_tokenizer(), before.prompt), 2048);
  EXPECT_EQ(before.meta["question_position"], "before");
}

TEST(RulerGenerators, VariableTrackingAnswersAreTheChain) {
  const Sample s = make_dataset("vt", params_for("", 2048, 1))->samples(byte_tokenizer(), 9)[0];
  ASSERT_EQ(s.answers.size(), 5u);
  const std::string value = s.meta["value"];
  EXPECT_NE(s.prompt.find("VAR " + s.answers[0] + " = " + value), std::string::npos);
  for (size_t i = 1; i < 5; ++i)
    EXPECT_NE(s.prompt.find("VAR " + s.answers[i] + " = VAR " + s.answers[i - 1]), std::string::npos);
  EXPECT_EQ(s.max_new_tokens, 30);
}

TEST(RulerGenerators, MissingResourcesAreInputErrorsNamingTheField) {
  auto message = [](const std::string& task, const json& params) {
    try {
      make_dataset(task, params);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("niah_single_2", {{"wordlist_dir", "/"}}).find("haystack_file"), std::string::npos);
  EXPECT_NE(message("niah_single_1", json::object()).find("wordlist_dir"), std::string::npos);
  EXPECT_NE(message("cwe", json::object()).find("wordlist_dir"), std::string::npos);
  EXPECT_NE(message("niah_single_2", {{"wordlist_dir", "/"}, {"haystack_file", "/no/such.json"}})
                .find("/no/such.json"),
            std::string::npos);
  EXPECT_NE(message("vt", {{"question_position", "middle"}}).find("question_position"), std::string::npos);
  EXPECT_NE(message("fwe", {{"bogus", 1}}).find("bogus"), std::string::npos);
  EXPECT_EQ(message("vt", json::object()), "no error");
}

TEST(RulerGenerators, ScoringIsStringMatchAll) {
  auto d = make_dataset("vt", params_for("", 2048, 1));
  Sample s;
  s.answers = {"AAAAA", "BBBBB", "CCCCC", "DDDDD"};
  EXPECT_EQ(d->score(s, "aaaaa BBBBB"), 50.0);
  EXPECT_EQ(d->metric_name(), "string_match_all");
}

TEST(Passkey, LengthWithinTwoPercentAtSentenceGranularity) {
  for (int64_t length : {1024, 2048}) {
    for (const Sample& s : make_dataset("passkey", {{"context_length", length}, {"samples", 3}})
                               ->samples(byte_tokenizer(), 0)) {
      const int64_t n = token_count(byte_tokenizer(), s.prompt);
      EXPECT_LE(n, length);
      EXPECT_GE(double(n), 0.98 * double(length)) << s.id;
      EXPECT_NE(s.prompt.find("The pass key is " + s.answers[0]), std::string::npos);
    }
  }
}

TEST(Passkey, LengthWithinTwoPercentStories260K) {
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  for (int64_t length : {512, 1024})
    for (const Sample& s : make_dataset("passkey", {{"context_length", length}, {"samples", 3}})
                               ->samples(*tokenizer, 0)) {
      const int64_t n = token_count(*tokenizer, s.prompt);
      EXPECT_LE(n, length);
      EXPECT_GE(double(n), 0.98 * double(length)) << s.id;
    }
}

}  // namespace
}  // namespace kvb
