// kvbench score --dataset NAME FILE.jsonl, through the binary.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

TEST(ScoreCommand, PrintsTheDatasetScore) {
  test::TempDir tmp;
  std::ofstream(tmp.file("hotpotqa.jsonl"))
      << R"({"pred": "Tartu", "answers": ["Tartu"], "all_classes": null, "length": 10})" "\n"
      << R"({"pred": "London", "answers": ["Paris", "Lyon"], "all_classes": null, "length": 12})" "\n"
      << R"({"pred": "the city of Paris", "answers": ["Paris"], "all_classes": null, "length": 9})" "\n";
  // Scores 1, 0 and F1([city, of, paris], [paris]) = 0.5: round(100 * 1.5 / 3, 2) = 50.
  const test::CliRun r = test::run_kvbench("score --dataset hotpotqa " + tmp.file("hotpotqa.jsonl"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("hotpotqa 50.00"), std::string::npos) << r.output;
}

TEST(ScoreCommand, ClassificationUsesAllClasses) {
  test::TempDir tmp;
  std::ofstream(tmp.file("trec.jsonl"))
      << R"({"pred": "City\nCountry", "answers": ["City"], "all_classes": ["City", "Country"], "length": 1})" "\n";
  const test::CliRun r = test::run_kvbench("score --dataset trec " + tmp.file("trec.jsonl"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("trec 100.00"), std::string::npos) << r.output;
}

TEST(ScoreCommand, BadLinesExitTwoWithTheLineNumber) {
  test::TempDir tmp;
  std::ofstream(tmp.file("bad.jsonl"))
      << R"({"pred": "a", "answers": ["a"], "all_classes": null, "length": 1})" "\n"
      << R"({"pred": "a", "all_classes": null})" "\n";
  test::CliRun r = test::run_kvbench("score --dataset hotpotqa " + tmp.file("bad.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:2"), std::string::npos) << r.output;
  std::ofstream(tmp.file("broken.jsonl")) << "{not json\n";
  r = test::run_kvbench("score --dataset hotpotqa " + tmp.file("broken.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("broken.jsonl:1"), std::string::npos) << r.output;
  r = test::run_kvbench("score --dataset dureader --jieba-dict /nonexistent/dict.txt " + tmp.file("broken.jsonl"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("jieba"), std::string::npos) << r.output;
  r = test::run_kvbench("score --dataset hotpotqa " + tmp.file("missing.jsonl"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("missing.jsonl"), std::string::npos) << r.output;
}

// eval.py scores every record with the last line's all_classes.
TEST(ScoreCommand, EveryRecordIsScoredWithTheLastLinesClasses) {
  test::TempDir tmp;
  std::ofstream(tmp.file("trec.jsonl"))
      << R"({"pred": "City Country", "answers": ["City"], "all_classes": ["City"], "length": 1})" "\n"
      << R"({"pred": "City", "answers": ["City"], "all_classes": ["City", "Country"], "length": 1})" "\n";
  // With both classes the first prediction names two of them: 1/2; the second 1: 75.00.
  const test::CliRun r = test::run_kvbench("score --dataset trec " + tmp.file("trec.jsonl"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("trec 75.00 (classification_score, 2 records)"), std::string::npos)
      << r.output;
}

// --e: eval.py --e's three length ranges; an empty one is NaN there.
TEST(ScoreCommand, LongBenchEScoresEachLengthRange) {
  test::TempDir tmp;
  std::ofstream(tmp.file("hotpotqa.jsonl"))
      << R"({"pred": "Tartu", "answers": ["Tartu"], "all_classes": null, "length": 3999})" "\n"
      << R"({"pred": "London", "answers": ["Paris"], "all_classes": null, "length": 4000})" "\n"
      << R"({"pred": "the city of Paris", "answers": ["Paris"], "all_classes": null, "length": 7999})" "\n";
  test::CliRun r = test::run_kvbench("score --e --dataset hotpotqa " + tmp.file("hotpotqa.jsonl"));
  EXPECT_EQ(r.code, 0) << r.output;
  // 0-4k: 1; 4-8k: mean(0, F1 0.5) = 25; 8k+: none.
  EXPECT_NE(r.output.find("hotpotqa 0-4k 100.00 (1 records), 4-8k 25.00 (2 records), 8k+ nan "
                          "(no records), LongBench-E, qa_f1_score, 3 records"),
            std::string::npos) << r.output;

  std::ofstream(tmp.file("no_length.jsonl"))
      << R"({"pred": "Tartu", "answers": ["Tartu"], "all_classes": null, "length": 10})" "\n"
      << R"({"pred": "Tartu", "answers": ["Tartu"], "all_classes": null})" "\n";
  r = test::run_kvbench("score --e --dataset hotpotqa " + tmp.file("no_length.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("no_length.jsonl:2: missing numeric field \"length\""), std::string::npos)
      << r.output;
  r = test::run_kvbench("score --dataset hotpotqa_e " + tmp.file("hotpotqa.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--dataset hotpotqa --e"), std::string::npos) << r.output;
  r = test::run_kvbench("score --e --dataset narrativeqa " + tmp.file("hotpotqa.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown LongBench-E dataset \"narrativeqa\""), std::string::npos) << r.output;
}

// eval.py --e's round(100 * np.mean(scores), 2) as numpy computes it: 17 exact lines, two
// partial (fuzz ratios 67 and 30) and 21 misses give 44.92 (numpy 1.24; a sum in order
// rounded as Python does gives 44.93). A length of 4500.0 is a number like any other.
TEST(ScoreCommand, LongBenchERangesRoundAsNumpyDoes) {
  test::TempDir tmp;
  std::ofstream out(tmp.file("lcc.jsonl"));
  const auto line = [&](const char* pred, const char* answer, const char* length) {
    out << "{\"pred\": \"" << pred << "\", \"answers\": [\"" << answer
        << "\"], \"all_classes\": null, \"length\": " << length << "}\n";
  };
  for (int i = 0; i < 17; ++i) line("x", "x", "100");
  line("a", "ab", "100");
  line("abc", "abcdefghijklmnopq", "100");
  for (int i = 0; i < 21; ++i) line("zzz", "yyy", "100");
  line("x", "x", "4500.0");
  out.close();
  const test::CliRun r = test::run_kvbench("score --e --dataset lcc " + tmp.file("lcc.jsonl"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("lcc 0-4k 44.92 (40 records), 4-8k 100.00 (1 records), 8k+ nan"),
            std::string::npos) << r.output;
}

}  // namespace
}  // namespace kvb
