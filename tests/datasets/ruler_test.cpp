// RULER-style generators: determinism for a seed, prompt length within 2% below the target in
// the model's own tokens, answers present, question placement, resource checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "datasets/ruler/ruler_common.h"
#include "engine/common/error.h"
#include "tests/datasets/dataset_test_util.h"
#include "tests/engine/tokenizer/fixtures.h"

namespace kvb {
namespace {

using test::byte_tokenizer;
using test::error_of;
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

const char* const kNoiseUnit =  // RULER's noise haystack unit (niah.py, variable_tracking.py)
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

// Every sample's prompt fits its budget and contains its answers. The budget, under generator
// ruler (the default): the prompt's tokens without BOS plus the sample's max_new_tokens within
// context_length, as RULER's prepare scripts size it; its size is the task's, whole steps down
// (RulerSizing below tests that). Under kvbench_v1: the prompt's tokens with BOS within
// context_length and within 2% below it, each sample filled on its own.
void expect_fits(const std::string& task, const json& params, const Tokenizer& tokenizer) {
  const int64_t length = params["context_length"];
  const bool ruler = params.value("generator", "ruler") == "ruler";
  for (const Sample& s : make_dataset(task, params)->samples(tokenizer, 7)) {
    const int64_t target = ruler ? length - s.max_new_tokens : length;
    const int64_t n = int64_t(tokenizer.encode(s.prompt, /*add_special=*/!ruler).size());
    EXPECT_LE(n, target) << task << " " << s.id;
    if (!ruler) {
      EXPECT_GE(double(n), 0.98 * double(target)) << task << " " << s.id << " at " << length;
    }
    ASSERT_FALSE(s.answers.empty());
    if (task == "cwe" || task == "fwe") continue;  // their answers are in the text, just often
    for (const std::string& a : s.answers)
      EXPECT_NE(s.prompt.find(a), std::string::npos) << task << ": answer " << a << " not in prompt";
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  out.push_back(text.substr(start));
  return out;
}

bool is_var(const std::string& s, size_t letters) {
  return s.size() == letters &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

// RULER's sizing: the prompt without BOS plus tokens_to_generate fit max_seq_length, so with
// max_new_tokens 50 (fwe's) a 2048-token fwe prompt is at most 1998 byte tokens; kvbench_v1
// fills 2048 with BOS. freq_words_extraction.py's size, traced in Python on the prompt's 365
// tokens around its coded text (a token a byte, and one for the leading word boundary; 6-letter
// words, "..." at rank 1, Zipf counts floor(n/(k^2 zeta(2))), spaces between): from 1998 // 6
// = 333 by 1998 // 32 = 62 while shorter than 1998 tokens: 333 gives 1956, 395 gives 2248, so
// one step back: 333, 314 words, 1956 tokens. With max_new_tokens 500: 258 gives 1576 >= 1548
// at once, so 210: 1334 tokens. Filling each sample on its own would take it to within a word
// of 1998 (or 1548).
TEST(RulerGenerators, PromptsLeaveRoomForTheAnswerAsRulerSizesThem) {
  json p = params_for("", 2048, 1);
  const Sample ruler = make_dataset("fwe", p)->samples(byte_tokenizer(), 3).at(0);
  EXPECT_EQ(ruler.max_new_tokens, 50);
  EXPECT_EQ(byte_tokenizer().encode(ruler.prompt, false).size(), 1956u);
  p["max_new_tokens"] = 500;
  const Sample longer = make_dataset("fwe", p)->samples(byte_tokenizer(), 3).at(0);
  EXPECT_EQ(byte_tokenizer().encode(longer.prompt, false).size(), 1334u);
  p["generator"] = "kvbench_v1";
  const Sample old = make_dataset("fwe", p)->samples(byte_tokenizer(), 3).at(0);
  EXPECT_LE(token_count(byte_tokenizer(), old.prompt), 2048);
  EXPECT_GE(token_count(byte_tokenizer(), old.prompt), 2007);
  for (const std::string task : {"vt", "fwe"}) expect_fits(task, p, byte_tokenizer());
  p["generator"] = "rulers";
  EXPECT_THROW(make_dataset("fwe", p), InputError);
  p["generator"] = "ruler";
  p["max_new_tokens"] = 2048;  // nothing left for the prompt
  EXPECT_THROW(make_dataset("fwe", p), InputError);
}

// Configs stored before the generator field existed were built as kvbench_v1; the field is
// always written, so none of them shares its identity (the results key) with one of today.
TEST(RulerGenerators, TheGeneratorIsPartOfACellsIdentity) {
  const DatasetInfo& info = dataset_registry().get("vt", "test");
  json p = params_for("", 2048, 1);
  EXPECT_EQ(info.normalise_params(p, "params").at("generator"), "ruler");
  p["generator"] = "kvbench_v1";
  EXPECT_EQ(info.normalise_params(p, "params").at("generator"), "kvbench_v1");
}

// niah.py's noise haystack: whole noise units one a line, the needle a line of its own before
// one of them.
TEST(RulerGenerators, NoiseHaystackIsRulersLinesOfWholeUnits) {
  KVB_REQUIRE_SHARED_DATA(data);
  for (uint64_t seed : {1, 2, 3}) {
    const Sample s = make_dataset("niah_single_1", params_for(data, 2048, 1))
                         ->samples(byte_tokenizer(), seed).at(0);
    const std::string intro = "I will quiz you about the number afterwards.\n";
    const size_t from = s.prompt.find(intro) + intro.size();
    const size_t to = s.prompt.find("\nWhat is the special magic number for ");
    ASSERT_LT(from, to);
    const std::vector<std::string> lines = lines_of(s.prompt.substr(from, to - from));
    int noise = 0, needles = 0;
    for (const std::string& line : lines) {
      if (line == kNoiseUnit) ++noise;
      else if (line.rfind("One of the special magic numbers for ", 0) == 0 &&
               line.find(" is: " + s.answers.at(0) + ".") != std::string::npos)
        ++needles;
      else
        ADD_FAILURE() << "not a RULER line: " << line;
    }
    EXPECT_EQ(needles, 1);
    EXPECT_GT(noise, 10);
    EXPECT_EQ(lines.back(), kNoiseUnit);  // inserted before a unit, never after the last
    const double depth = s.meta.at("depth");
    EXPECT_GE(depth, 0.0);
    EXPECT_LT(depth, 1.0);
  }
}

// variable_tracking.py: a worked example with 3-letter names sized to 500 tokens and answered
// after two spaces, then the task: 5-letter names, the later assignments ending in a space,
// each a line of its own among whole noise units.
TEST(RulerGenerators, VtIsRulersExampleAndChain) {
  const Sample s = make_dataset("vt", params_for("", 2048, 1))->samples(byte_tokenizer(), 4).at(0);
  const std::string task_start = "\n\nMemorize and track the chain(s)";
  const size_t split = s.prompt.find(task_start);
  ASSERT_NE(split, std::string::npos);
  const std::string example = s.prompt.substr(0, split);
  const size_t answered = example.find("they are:  ");
  ASSERT_NE(answered, std::string::npos);
  EXPECT_LE(byte_tokenizer().encode(example.substr(0, answered + 10), false).size(), 500u);
  const std::string names = example.substr(answered + 11);
  ASSERT_EQ(names.size(), 19u) << names;
  for (size_t k = 0; k < 5; ++k) EXPECT_TRUE(is_var(names.substr(4 * k, 3), 3)) << names;
  int example_assignments = 0;
  for (const std::string& line : lines_of(example))
    example_assignments += line.rfind("VAR ", 0) == 0;
  EXPECT_EQ(example_assignments, 5);

  const std::string task = s.prompt.substr(split + 2);
  const size_t context_from = task.find("text.\n\n") + 7;
  const size_t context_to = task.find("\nQuestion: ");
  int copies = 0, first = 0, noise = 0;
  for (const std::string& line : lines_of(task.substr(context_from, context_to - context_from))) {
    if (line == kNoiseUnit) {
      ++noise;
    } else if (line.size() == 22 && line.rfind("VAR ", 0) == 0 && line.substr(9, 7) == " = VAR " &&
               is_var(line.substr(4, 5), 5) && is_var(line.substr(16, 5), 5) && line[21] == ' ') {
      ++copies;
    } else if (line == "VAR " + s.answers.at(0) + " = " + s.meta.at("value").get<std::string>()) {
      ++first;
    } else {
      ADD_FAILURE() << "not a RULER line: '" << line << "'";
    }
  }
  EXPECT_EQ(first, 1);
  EXPECT_EQ(copies, 4);
  EXPECT_GT(noise, 5);
}

// The byte-level BPE fixture with llama3's chat markers as special tokens.
const Tokenizer& llama3_marked_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    json t = tokenizer_test::byte_level_tokenizer_json(/*llama3=*/true);
    for (const auto& [id, marker] : {std::pair<int, const char*>{269, "<|start_header_id|>"},
                                     {270, "<|end_header_id|>"}})
      t["added_tokens"].push_back({{"id", id}, {"content", marker}, {"single_word", false},
                                   {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                   {"special", true}});
    return Tokenizer::from_json(t, json::object(), "llama3-marked");
  }();
  return *tokenizer;
}

// RULER's model templates wrap the task's text (prepare.py: model_template.format(task) +
// answer_prefix), vt's worked example inside the user turn, and count in the length.
TEST(RulerGenerators, AChatTemplateWrapsTheUserTurnBeforeTheAnswerPrefix) {
  json p = params_for("", 2048, 1);
  p["chat_template"] = "llama3";
  // llama3's markers are no tokens of the byte tokenizer: the model would read them spelt out.
  for (const char* task : {"fwe", "vt"})  // every task samples through RulerTask::samples
    EXPECT_NE(error_of([&] { make_dataset(task, p)->samples(byte_tokenizer(), 2); })
                  .find("chat_template: llama3's <|start_header_id|> is no token"),
              std::string::npos) << task;
  const Sample fwe = make_dataset("fwe", p)->samples(llama3_marked_tokenizer(), 2).at(0);
  const std::string user = "<|start_header_id|>user<|end_header_id|>\n\n";
  EXPECT_EQ(fwe.prompt.rfind(user + "Read the following coded text", 0), 0u) << fwe.prompt.substr(0, 80);
  const std::string end = "?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n Answer: "
                          "According to the coded text above, the three most frequently appeared "
                          "words are:";
  ASSERT_GE(fwe.prompt.size(), end.size());
  EXPECT_EQ(fwe.prompt.substr(fwe.prompt.size() - end.size()), end);
  EXPECT_EQ(fwe.prompt.substr(fwe.question_offset, 11), "\nQuestion: ");
  expect_fits("fwe", p, llama3_marked_tokenizer());

  p["chat_template"] = "llama2";
  const Sample vt = make_dataset("vt", p)->samples(byte_tokenizer(), 2).at(0);
  EXPECT_EQ(vt.prompt.rfind("[INST] Memorize and track", 0), 0u);
  EXPECT_EQ(vt.prompt.find("[INST]", 1), std::string::npos) << "the example is not a turn of its own";
  EXPECT_NE(vt.prompt.find(" in the text above. [/INST] Answer: According to the chain(s)"),
            std::string::npos);
  expect_fits("vt", p, byte_tokenizer());

  p["chat_template"] = "alpaca";
  EXPECT_THROW(make_dataset("vt", p), InputError);
  const DatasetInfo& info = dataset_registry().get("vt", "test");
  p["chat_template"] = "none";  // RULER's base, as configs before the field meant
  EXPECT_FALSE(info.normalise_params(p, "params").contains("chat_template"));
}

// FNV-1a 64 of each sample's prompt and answers, in order.
uint64_t samples_digest(const std::vector<Sample>& samples, uint64_t h = 1469598103934665603ull) {
  auto feed = [&](const std::string& text) {
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  };
  for (const Sample& s : samples) {
    feed(s.prompt);
    feed(std::string(1, '\0'));
    for (size_t a = 0; a < s.answers.size(); ++a) feed((a ? "\x01" : "") + s.answers[a]);
    feed(std::string(1, '\0'));
  }
  return h;
}

// generator kvbench_v1 is the generator before 2026-11-29, byte for byte: the digests are of
// the samples commit 9f4f980 (its parent) generated, 3 a seed, seeds 0 and 7, at 1024 and 2048
// tokens (cwe: 2048 only), question after, the byte tokenizer.
TEST(RulerGenerators, KvbenchV1IsTheEarlierGeneratorByteForByte) {
  KVB_REQUIRE_SHARED_DATA(data);
  const std::vector<std::pair<std::string, uint64_t>> expected = {
      {"niah_single_1", 0x0e2af4575ae346eeull},   {"niah_single_2", 0x2b827c42ee568af7ull},
      {"niah_single_3", 0x5d120d01506828b1ull},   {"niah_multikey_1", 0xf902188056d24ce6ull},
      {"niah_multikey_2", 0x98d85e935bda9a1aull}, {"niah_multikey_3", 0xdf9c407a37a2b2cdull},
      {"niah_multivalue", 0xbe4295ca3776773full}, {"niah_multiquery", 0xbf872febd9a30c7cull},
      {"vt", 0xcdd0f85ab2a704cbull},              {"cwe", 0x3c31d3e77ea30a4dull},
      {"fwe", 0x6e1a24c09e337f4bull}};
  for (const auto& [task, digest] : expected) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t length : {1024, 2048}) {
      if (task == "cwe" && length == 1024) continue;  // too short for cwe's example
      json p = params_for(data, length, 3);
      p["generator"] = "kvbench_v1";
      for (uint64_t seed : {0, 7}) h = samples_digest(make_dataset(task, p)->samples(byte_tokenizer(), seed), h);
    }
    EXPECT_EQ(h, digest) << task;
  }
}

// Separate questions about one context: under generator ruler every one fits beside its
// answer, though the keys' questions differ in length.
TEST(RulerGenerators, EverySeparateQuestionFitsItsContext) {
  KVB_REQUIRE_SHARED_DATA(data);
  for (const std::string task : {"niah_multikey_1", "niah_multiquery"}) {
    json p = params_for(data, 2048, 3);
    p["queries"] = "separate";
    for (uint64_t seed : {0, 1, 2, 3}) {
      for (const Sample& s : make_dataset(task, p)->samples(byte_tokenizer(), seed)) {
        const int64_t n = int64_t(byte_tokenizer().encode(s.prompt, false).size());
        EXPECT_LE(n + s.max_new_tokens, 2048) << task << " " << s.id << " seed " << seed;
        EXPECT_GE(n + s.max_new_tokens, 2048 * 0.95) << task << " " << s.id;
      }
    }
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

TEST(RulerGenerators, PromptsFitTheirBudgetByteTokenizer) {
  for (const std::string generator : {"ruler", "kvbench_v1"})
    for (int64_t length : {2048, 4096}) {
      json p = params_for("", length);
      p["generator"] = generator;
      expect_fits("vt", p, byte_tokenizer());
      expect_fits("fwe", p, byte_tokenizer());
    }
  expect_fits("niah_multikey_3", params_for("", 8192), byte_tokenizer());
}

TEST(RulerGenerators, PromptsFitTheirBudgetStories260K) {
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  for (const std::string generator : {"ruler", "kvbench_v1"})
    for (int64_t length : {1024, 2048, 4096}) {
      json p = params_for("", length);
      p["generator"] = generator;
      expect_fits("vt", p, *tokenizer);
      expect_fits("fwe", p, *tokenizer);
    }
  expect_fits("niah_multikey_3", params_for("", 4096), *tokenizer);
}

// RULER's binary search (niah.py, variable_tracking.py, common_words_extraction.py): the last
// mid that fits, its lower bound where none does. The non-monotonic case is traced by hand:
// [10, 20]: 15 no, 12 yes, 13 yes, 14 yes, so 14 although 16..20 fit.
TEST(RulerSizing, BinarySearchAsRulers) {
  EXPECT_EQ(ruler_binary_search(500, 3000, [](int64_t n) { return n <= 1234; }), 1234);
  EXPECT_EQ(ruler_binary_search(500, 3000, [](int64_t) { return false; }), 500);
  EXPECT_EQ(ruler_binary_search(500, 3000, [](int64_t) { return true; }), 3000);
  std::vector<int64_t> tried;
  EXPECT_EQ(ruler_binary_search(10, 20, [&](int64_t n) { tried.push_back(n); return n != 15; }), 14);
  EXPECT_EQ(tried, (std::vector<int64_t>{15, 12, 13, 14}));
}

// niah.py sizes a task once and drops whole steps (25 units at >= 4096) from that size for a
// sample that overflows: noise units are identical, so with the byte tokenizer the sizes are
// exact. A sample below the task's size would not fit a step more; filling each sample on its
// own would give sizes a unit or two apart instead. At 8143 tokens the room for the noise
// units (92 bytes each) ends within the spread of the prompts' other text (its key, 10 to 25
// letters, three times), so some samples overflow the probe's size.
TEST(RulerSizing, NoiseSamplesDropWholeStepsFromTheTasksSize) {
  KVB_REQUIRE_SHARED_DATA(data);
  const int64_t length = 8143, step = 25;
  const int64_t unit_bytes = int64_t(std::string(kNoiseUnit).size()) + 1;  // and its newline
  test::StepDrops drops;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<Sample> samples =
        make_dataset("niah_single_1", params_for(data, length, 12))->samples(byte_tokenizer(), seed);
    std::vector<int64_t> sizes;
    for (const Sample& s : samples) {
      int64_t units = 0;
      for (const std::string& line : lines_of(s.prompt)) units += line == kNoiseUnit;
      sizes.push_back(units);
    }
    const std::vector<bool> less = drops.check(samples, sizes, step, "units", seed);
    for (size_t i = 0; i < samples.size(); ++i) {
      const int64_t bytes = int64_t(byte_tokenizer().encode(samples[i].prompt, false).size());
      EXPECT_LE(bytes + 128, length) << samples[i].id;
      if (less[i]) {
        EXPECT_GT(bytes + step * unit_bytes + 128, length) << samples[i].id << " would fit a step more";
      }
    }
  }
  drops.expect_some_dropped();
}

TEST(RulerGenerators, EssayAndWordTasksFit) {
  KVB_REQUIRE_SHARED_DATA(data);
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  for (const std::string task : {"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                 "niah_multivalue", "niah_multiquery"})
    for (int64_t length : {1024, 4096}) expect_fits(task, params_for(data, length, 1), *tokenizer);
  // niah_multikey_2's haystack grows a distractor needle (~25 tokens) at a time: 2% of the 896
  // tokens left at 1024 beside its 128 answer tokens is less than that.
  expect_fits("niah_multikey_2", params_for(data, 4096, 1), *tokenizer);
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

// Essay needles as niah.py places and joins them (generator ruler): at int(S * (depth / 100))
// in floating point, the pieces joined by one space each, an empty one too; kvbench_v1 joins
// with single spaces only.
TEST(RulerEssay, NeedlesGoWhereNiahPyPutsThemJoinedAsItJoins) {
  EXPECT_EQ(ruler_depth_index(150, 82), 122);  // 82 / 100 is a little below 0.82 in binary
  EXPECT_EQ(depth_position(150, 82), 123);     // kvbench_v1's integer arithmetic
  EXPECT_EQ(ruler_depth_index(39, 100), 39);
  EssayWords essay;
  essay.words = {"A", "b.", "C", "d.", "E."};  // sentences "A b." "C d." "E."
  essay.ends_sentence = {false, true, false, true, true};
  const auto at = [&](std::vector<EssayInsert> inserts, bool ruler) {
    return essay_haystack(essay, 5, [&](int64_t sentences) {
      EXPECT_EQ(sentences, 3);
      return inserts;
    }, ruler);
  };
  EXPECT_EQ(at({{0, "N"}}, true), " N A b. C d. E.");
  EXPECT_EQ(at({{0, "N"}}, false), "N A b. C d. E.");
  EXPECT_EQ(at({{3, "N"}}, true), "A b. C d. E. N ");
  EXPECT_EQ(at({{1, "N"}, {1, "M"}}, true), "A b. N  M C d. E.");
  EXPECT_EQ(at({{1, "N"}, {1, "M"}}, false), "A b. N M C d. E.");
  EXPECT_EQ(at({{1, "N"}, {2, "M"}}, true), "A b. N C d. M E.");
  // A trailing fragment is a sentence of its own.
  EXPECT_EQ(essay_haystack(essay, 3, [](int64_t sentences) {
              EXPECT_EQ(sentences, 2);
              return std::vector<EssayInsert>{{2, "N"}};
            }, true),
            "A b. C N ");
}

// niah.py singularises its whole template when one value is asked for, the model template's
// text too: vicuna's system message says "answer" then (generator ruler only).
TEST(RulerGenerators, ASingularQuestionSingularisesTheChatTemplateToo) {
  json p = params_for("", 2048, 1);
  p["chat_template"] = "vicuna";
  const std::string one = make_dataset("niah_multikey_3", p)->samples(byte_tokenizer(), 1)[0].prompt;
  EXPECT_EQ(one.rfind("A chat between a curious user and an artificial intelligence assistant. "
                      "The assistant gives helpful, detailed, and polite answer to the user's "
                      "questions. USER: A special magic uuid is hidden", 0), 0u) << one.substr(0, 300);
  p["generator"] = "kvbench_v1";
  EXPECT_NE(make_dataset("niah_multikey_3", p)->samples(byte_tokenizer(), 1)[0].prompt.find("polite answers"),
            std::string::npos);
}

TEST(RulerGenerators, APluralQuestionKeepsTheChatTemplatesAnswers) {
  KVB_REQUIRE_SHARED_DATA(data);
  json p = params_for(data, 2048, 1);
  p["chat_template"] = "vicuna";
  const std::string many = make_dataset("niah_multivalue", p)->samples(byte_tokenizer(), 1)[0].prompt;
  EXPECT_NE(many.find("polite answers to the user's questions. USER: Some special magic"),
            std::string::npos) << many.substr(0, 300);
}

// variable_tracking.py's steps: 10 noise units at >= 4096 tokens. In stories260K's tokens the
// chain's names (5 random letters, each named twice) differ in length by a few tokens, so at
// 5000 tokens, where the room for the noise ends within that spread, some samples overflow the
// probe's size and hold 10, 20, ... units fewer; the worked example's noise is apart (before
// the task's intro).
TEST(RulerSizing, VtSamplesDropWholeStepsOfTenNoiseUnits) {
  KVB_REQUIRE_STORIES260K(dir);
  const auto tokenizer = Tokenizer::load(dir);
  const std::string intro = "Memorize and track the chain(s) of variable assignment";
  test::StepDrops drops;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const std::vector<Sample> samples =
        make_dataset("vt", params_for("", 5000, 6))->samples(*tokenizer, seed);
    std::vector<int64_t> sizes;
    for (const Sample& s : samples) {
      int64_t units = 0;
      for (const std::string& line : lines_of(s.prompt.substr(s.prompt.rfind(intro))))
        units += line == kNoiseUnit;
      sizes.push_back(units);
    }
    drops.check(samples, sizes, 10, "units", seed);
  }
  drops.expect_some_dropped();
}

// common_words_extraction.py's steps: 10 words. Words differ in length, so samples overflow the
// probe's size now and then; each then holds 10, 20, ... words fewer. Below its 10 common words
// a sample is refused, never cut (RULER retries forever there).
TEST(RulerSizing, CweSamplesDropWholeStepsOfTenWords) {
  KVB_REQUIRE_SHARED_DATA(data);
  const std::string intro = "Below is a numbered list of words.";
  test::StepDrops drops;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const std::vector<Sample> samples =
        make_dataset("cwe", params_for(data, 8192, 6))->samples(byte_tokenizer(), seed);
    std::vector<int64_t> sizes;
    for (const Sample& s : samples) {
      // The task's list: after the solved example's, up to the question.
      const size_t from = s.prompt.rfind(intro), to = s.prompt.rfind("\nQuestion:");
      ASSERT_LT(from, to);
      std::set<std::string> words;
      std::istringstream entries(s.prompt.substr(from + intro.size(), to - from - intro.size()));
      for (std::string token, previous; entries >> token; previous = token)
        if (!previous.empty() && previous.back() == '.' &&
            std::isdigit(static_cast<unsigned char>(previous[0])))
          words.insert(token);
      for (const std::string& a : s.answers) EXPECT_TRUE(words.count(a)) << s.id << ": " << a;
      sizes.push_back(int64_t(words.size()));
    }
    drops.check(samples, sizes, 10, "words", seed);
  }
  drops.expect_some_dropped();
  json p = params_for(data, 1400, 1);  // the example and 10 words x 6 overflow 1400 bytes
  try {
    const Sample s = make_dataset("cwe", p)->samples(byte_tokenizer(), 0).at(0);
    ADD_FAILURE() << "a list short of its 10 common words: " << s.prompt;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is too short"), std::string::npos) << e.what();
  }
}

// Lists too short for what RULER's sizing draws are refused: RULER would switch to its
// english_words.json, and a short prompt would be silently easier. common_words_extraction.py
// probes 4096 words (so 120 words fail at any length), then its binary search tries about
// context_length / tokens-per-word words: at 262144 bytes more than the 4160 that 4200 words
// leave beside the example's 40.
TEST(RulerGenerators, CweRefusesAContextItsWordListsCannotFill) {
  auto lists = [](test::TempDir& dir, int per_file) {
    const char* files[] = {"nounlist.txt", "adjectivelist.txt", "verblist.txt"};
    for (int f = 0; f < 3; ++f) {
      std::string words;
      for (int i = 0; i < per_file; ++i) words += std::string(files[f]).substr(0, 4) + std::to_string(i) + "\n";
      std::ofstream(dir.file(files[f])) << words;
    }
  };
  auto refusal = [](const json& p) {
    try {
      make_dataset("cwe", p)->samples(byte_tokenizer(), 1);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(not refused)");
  };
  test::TempDir small;
  lists(small, 40);
  json p = {{"context_length", 2048}, {"samples", 1}, {"wordlist_dir", small.path()}};
  EXPECT_NE(refusal(p).find("RULER sizes the task on a probe of 4096 words; wordlist_dir's three "
                            "lists hold 120 distinct ones"),
            std::string::npos) << refusal(p);
  p["generator"] = "kvbench_v1";  // filled on its own: 120 words fill 2048 bytes, not 16384
  EXPECT_EQ(make_dataset("cwe", p)->samples(byte_tokenizer(), 1).size(), 1u);
  p["context_length"] = 16384;
  EXPECT_NE(refusal(p).find("it takes more words than the 80 that wordlist_dir's three lists hold "
                            "beside the example's 40"),
            std::string::npos)
      << refusal(p);

  test::TempDir large;
  lists(large, 1400);
  p = {{"context_length", 2048}, {"samples", 1}, {"wordlist_dir", large.path()}};
  EXPECT_EQ(make_dataset("cwe", p)->samples(byte_tokenizer(), 1).size(), 1u);
  p["context_length"] = 262144;
  EXPECT_NE(refusal(p).find("RULER's size search tries"), std::string::npos) << refusal(p);
  EXPECT_NE(refusal(p).find("words, more than the 4160 that wordlist_dir's three lists hold"),
            std::string::npos)
      << refusal(p);
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
