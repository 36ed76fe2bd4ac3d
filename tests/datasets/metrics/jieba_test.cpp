// kvbench's jieba segmentation against python3-jieba itself (`jieba.cut(s, cut_all=False)`),
// token for token, on generated sentences; its error messages.
#include "datasets/metrics/jieba.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "engine/common/error.h"
#include "tests/datasets/metrics/jieba_test_util.h"

namespace kvb {
namespace {

using json = nlohmann::json;

// Reads a JSON list of strings, writes the JSON list of their token lists. jieba's cache goes
// to the test's temp dir instead of /tmp/jieba.cache.
const char* kPythonCut = R"(
import json, sys
import jieba
jieba.dt.tmp_dir = sys.argv[3]
with open(sys.argv[1], encoding="utf-8") as f:
    sentences = json.load(f)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump([list(jieba.cut(s, cut_all=False)) for s in sentences], f)
)";

std::string escaped(const std::vector<std::string>& tokens) { return json(tokens).dump(); }

TEST(JiebaCut, IdenticalToPythonJiebaOnGeneratedSentences) {
  KVB_REQUIRE_PYTHON_JIEBA();
  const std::vector<std::string> words = test::jieba_dict_words();
  ASSERT_GT(words.size(), 300000u);
  test::TestRng rng(20240601);
  std::vector<std::string> sentences;
  for (int i = 0; i < 4000; ++i) sentences.push_back(test::random_text(rng, words, 40));
  sentences.push_back("");
  sentences.push_back("我来到北京清华大学");

  test::TempDir tmp;
  std::ofstream(tmp.file("sentences.json")) << json(sentences).dump();
  const std::string failure = test::run_python(
      tmp, kPythonCut, {tmp.file("sentences.json"), tmp.file("tokens.json"), tmp.path()});
  ASSERT_EQ(failure, "");
  const json expected = json::parse(test::read_text_file(tmp.file("tokens.json")));
  ASSERT_EQ(expected.size(), sentences.size());

  const auto start = std::chrono::steady_clock::now();
  const JiebaSegmenter& jieba = jieba_segmenter();
  size_t mismatches = 0, tokens = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const std::vector<std::string> got = jieba.cut(sentences[i]);
    const auto want = expected[i].get<std::vector<std::string>>();
    tokens += want.size();
    if (got == want) continue;
    if (++mismatches <= 5)
      ADD_FAILURE() << "sentence " << i << " " << json(sentences[i]).dump() << "\n  python: "
                    << escaped(want) << "\n  kvbench: " << escaped(got);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(mismatches, 0u) << "of " << sentences.size() << " sentences";
  EXPECT_GT(tokens, 80000u);  // the sentences are not trivially short
  std::cout << "[ jieba    ] " << sentences.size() << " sentences, " << tokens
            << " tokens identical to python3-jieba; load + cut " << seconds << " s\n";
}

TEST(JiebaCut, KnownSegmentations) {
  KVB_REQUIRE_JIEBA_DICT();
  const JiebaSegmenter& jieba = jieba_segmenter();
  using V = std::vector<std::string>;
  // jieba's README examples: dictionary words, and 杭研 found by the HMM.
  EXPECT_EQ(jieba.cut("我来到北京清华大学"), (V{"我", "来到", "北京", "清华大学"}));
  EXPECT_EQ(jieba.cut("他来到了网易杭研大厦"), (V{"他", "来到", "了", "网易", "杭研", "大厦"}));
  // Alphanumerics stay whole ("3.5%" by finalseg's re_skip), dictionary words with ASCII
  // (C++, c#, AT&T) too; "\r\n" is one token, other whitespace and full-width forms one per
  // character.
  EXPECT_EQ(jieba.cut("iPhone13的价格是3.5%\r\n  ＡＢ！"),
            (V{"iPhone13", "的", "价格", "是", "3.5%", "\r\n", " ", " ", "Ａ", "Ｂ", "！"}));
  EXPECT_EQ(jieba.cut("C++和c#都是AT&T时代的 e.g. 3.14.15"),
            (V{"C++", "和", "c#", "都", "是", "AT&T", "时代", "的", " ", "e", ".", "g", ".", " ",
               "3.14", ".", "15"}));
  EXPECT_EQ(jieba.cut(""), V{});
  EXPECT_EQ(jieba.frequency("清华大学"), 922);
  EXPECT_EQ(jieba.frequency("清华大"), 0);  // a prefix only
}

TEST(JiebaCut, MissingDictionaryIsOneLineNamingTheFixes) {
  try {
    JiebaSegmenter("/nonexistent/jieba/dict.txt");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent/jieba/dict.txt"), std::string::npos) << what;
    EXPECT_NE(what.find("apt-get install python3-jieba"), std::string::npos) << what;
    EXPECT_NE(what.find("--jieba-dict"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // Failures are not cached: the same path fails again the same way.
  EXPECT_THROW(jieba_segmenter("/nonexistent/jieba/dict.txt"), InputError);
  EXPECT_THROW(jieba_segmenter("/nonexistent/jieba/dict.txt"), InputError);
}

TEST(JiebaCut, MalformedDictionaryNamesTheLine) {
  test::TempDir tmp;
  std::ofstream(tmp.file("dict.txt")) << "北京 10 ns\n清华 many n\n";
  try {
    JiebaSegmenter(tmp.file("dict.txt"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dict.txt:2"), std::string::npos) << e.what();
  }
}

TEST(JiebaCut, OwnDictionaryWithDebiansModel) {
  KVB_REQUIRE_JIEBA_DICT();
  // A dictionary without finalseg/ beside it takes the HMM model of Debian's python3-jieba.
  test::TempDir tmp;
  std::ofstream(tmp.file("dict.txt")) << "北京 10 ns\n北京大学 20 nt\n大学 5 n\n";
  const JiebaSegmenter jieba(tmp.file("dict.txt"));
  EXPECT_EQ(jieba.cut("北京大学"), std::vector<std::string>{"北京大学"});
  EXPECT_EQ(jieba.frequency("北京大"), 0);
  EXPECT_EQ(jieba.cut("北京大学生").size(), 2u);  // "北京大学" + "生"
}

}  // namespace
}  // namespace kvb
