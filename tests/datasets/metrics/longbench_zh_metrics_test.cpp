// LongBench's Chinese word metrics (multifieldqa_zh: qa_f1_zh_score; dureader, vcsum:
// rouge_zh_score) against an independent Python implementation of LongBench's formulas over
// python3-jieba, in-process, through the longbench dataset and through `kvbench score`.
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "datasets/metrics/longbench_metrics.h"
#include "engine/common/error.h"
#include "tests/datasets/dataset_test_util.h"
#include "tests/datasets/metrics/jieba_test_util.h"

namespace kvb {
namespace {

using json = nlohmann::json;

// LongBench metrics.py's qa_f1_zh_score and rouge_zh_score written out afresh from their
// definitions, ROUGE-L as the `rouge` 1.0.1 package computes it (summary level: sentences
// split on "."; per reference sentence and hypothesis sentence the set of words of the one LCS
// its backtracking reconstructs; union over all pairs; distinct-word counts; F with 1e-8),
// backtracking iteratively. Scores each record as eval.py does (max over answers) and each
// dataset as round(100 * total / n, 2).
const char* kPythonScores = R"PY(
import json, string, sys
from collections import Counter
import jieba
jieba.dt.tmp_dir = sys.argv[3]

CN_PUNCT = "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
EXCLUDE = set(string.punctuation) | set(CN_PUNCT)

def normalize_zh(token):
    kept = "".join(ch for ch in token.lower() if ch not in EXCLUDE)
    return "".join(kept.split())

def f1(pred, gold):
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    p, r = 1.0 * same / len(pred), 1.0 * same / len(gold)
    return (2 * p * r) / (p + r)

def zh_tokens(text):
    return [t for t in (normalize_zh(w) for w in jieba.cut(text, cut_all=False)) if t]

def qa_f1_zh(pred, gold):
    return f1(zh_tokens(pred), zh_tokens(gold))

def lcs_words(x, y):
    t = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i in range(1, len(x) + 1):
        for j in range(1, len(y) + 1):
            t[i][j] = t[i-1][j-1] + 1 if x[i-1] == y[j-1] else max(t[i-1][j], t[i][j-1])
    words, i, j = set(), len(x), len(y)
    while i > 0 and j > 0:
        if x[i-1] == y[j-1]:
            words.add(x[i-1]); i -= 1; j -= 1
        elif t[i-1][j] > t[i][j-1]:
            i -= 1
        else:
            j -= 1
    return words

def rouge_l_f(hyp, ref):
    split = lambda text: [" ".join(s.split()) for s in text.split(".") if len(s) > 0]
    h, r = split(hyp), split(ref)
    if not h or not r:
        return 0.0  # the package raises; LongBench returns 0
    distinct = lambda sents: len(set(w for s in sents for w in s.split(" ")))
    union = set()
    for rs in r:
        for hs in h:
            union |= lcs_words(rs.split(" "), hs.split(" "))
    r_lcs, p_lcs = len(union) / distinct(r), len(union) / distinct(h)
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))

def rouge_zh(pred, gold):
    seg = lambda text: " ".join(jieba.cut(text, cut_all=False))
    return rouge_l_f(seg(pred), seg(gold))

METRIC = {"multifieldqa_zh": qa_f1_zh, "dureader": rouge_zh, "vcsum": rouge_zh}
with open(sys.argv[1], encoding="utf-8") as f:
    data = json.load(f)
out = {"records": {}, "dataset": {}}
for name, records in data.items():
    scores = []
    for rec in records:
        score = 0.
        for answer in rec["answers"]:
            score = max(score, METRIC[name](rec["pred"], answer))
        scores.append(score)
    out["records"][name] = scores
    out["dataset"][name] = round(100 * sum(scores) / len(scores), 2)
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
)PY";

const std::vector<std::string> kZhDatasets = {"multifieldqa_zh", "dureader", "vcsum"};

struct Record {
  std::string pred;
  std::vector<std::string> answers;
};

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// A prediction near `answer`: characters dropped, pieces inserted, ASCII case flipped.
std::string perturb(const std::string& answer, test::TestRng& rng,
                    const std::vector<std::string>& words) {
  std::string out;
  for (std::string c : code_points(answer)) {
    if (rng.chance(0.15)) continue;
    if (rng.chance(0.06)) out += test::random_piece(rng, words);
    if (c.size() == 1 && std::isalpha(static_cast<unsigned char>(c[0])) && rng.chance(0.5))
      c[0] = char(c[0] ^ 0x20);
    out += c;
  }
  return out;
}

std::vector<Record> make_records(test::TestRng& rng, const std::vector<std::string>& words) {
  std::vector<Record> out;
  for (int i = 0; i < 150; ++i) {
    Record r;
    for (size_t n = 1 + rng.below(3); n > 0; --n) r.answers.push_back(test::random_text(rng, words, 30));
    const size_t kind = rng.below(10);
    if (kind == 0) r.pred = "";
    else if (kind == 1) r.pred = r.answers[0];
    else if (kind == 2) r.pred = test::random_text(rng, words, 30);  // unrelated
    else if (kind == 3) r.pred = "。。，！ ...";                        // punctuation only
    else r.pred = perturb(r.answers[rng.below(r.answers.size())], rng, words);
    out.push_back(std::move(r));
  }
  return out;
}

std::string two_decimals(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

TEST(LongBenchZhMetrics, EqualAnIndependentPythonImplementationInProcessAndThroughTheCli) {
  KVB_REQUIRE_PYTHON_JIEBA();
  const std::vector<std::string> words = test::jieba_dict_words();
  test::TestRng rng(7);
  std::map<std::string, std::vector<Record>> data;
  json input = json::object();
  for (const std::string& name : kZhDatasets) {
    data[name] = make_records(rng, words);
    for (const Record& r : data[name]) input[name].push_back({{"pred", r.pred}, {"answers", r.answers}});
  }
  test::TempDir tmp;
  std::ofstream(tmp.file("records.json")) << input.dump();
  ASSERT_EQ(test::run_python(tmp, kPythonScores,
                             {tmp.file("records.json"), tmp.file("scores.json"), tmp.path()}),
            "");
  const json expected = json::parse(test::read_text_file(tmp.file("scores.json")));

  for (const std::string& name : kZhDatasets) {
    const auto want = expected["records"][name].get<std::vector<double>>();
    double total = 0;
    int nonzero = 0, partial = 0;
    for (size_t i = 0; i < data[name].size(); ++i) {
      const Record& r = data[name][i];
      const double got = longbench_record_score(name, r.pred, r.answers, {});
      EXPECT_DOUBLE_EQ(got, want[i]) << name << " record " << i << " pred " << json(r.pred).dump()
                                     << " answers " << json(r.answers).dump();
      total += got;
      nonzero += got > 0;
      partial += got > 0 && got < 0.99;
    }
    EXPECT_GT(partial, 50) << name << ": the records should mostly score in (0, 1)";
    EXPECT_GT(nonzero, 80) << name;  // 3 in 10 predictions are empty, unrelated or punctuation
    std::cout << "[ zh score ] " << name << ": " << data[name].size() << " records (" << partial
              << " partial) equal the Python reference\n";
    const double dataset_score = expected["dataset"][name].get<double>();
    EXPECT_EQ(longbench_dataset_score(total, data[name].size()), dataset_score) << name;

    // The same records as a LongBench pred/ file, through `kvbench score`.
    const std::string file = tmp.file(name + ".jsonl");
    {
      std::ofstream out(file);
      for (const Record& r : data[name])
        out << json{{"pred", r.pred}, {"answers", r.answers}, {"all_classes", nullptr}, {"length", 1000}}.dump()
            << "\n";
    }
    const test::CliRun run = test::run_kvbench("score --dataset " + name + " " + file);
    EXPECT_EQ(run.code, 0) << run.output;
    const std::string metric = name == "multifieldqa_zh" ? "qa_f1_zh_score" : "rouge_zh_score";
    EXPECT_NE(run.output.find(name + " " + two_decimals(dataset_score) + " (" + metric + ", 150 records)"),
              std::string::npos)
        << run.output << " expected " << two_decimals(dataset_score);
  }
}

TEST(LongBenchZhMetrics, HandWorkedScores) {
  KVB_REQUIRE_JIEBA_DICT();
  const JiebaSegmenter& jieba = jieba_segmenter();
  // Tokens [北京大学] on both sides once "。" normalises away: F1 = 1.
  EXPECT_EQ(qa_f1_zh_score("北京大学。", "北京大学", jieba), 1.0);
  // pred [我, 来到, 北京], gold [北京]: P = 1/3, R = 1, F = 0.5.
  EXPECT_DOUBLE_EQ(qa_f1_zh_score("我来到北京", "北京", jieba), 0.5);
  EXPECT_EQ(qa_f1_zh_score("，。", "北京", jieba), 0.0);
  // "我 来到 北京" vs "北京": m = 1, n = 3, LCS {北京}: R = 1, P = 1/3.
  EXPECT_DOUBLE_EQ(rouge_zh_score("我来到北京", "北京", jieba),
                   2.0 * ((1.0 / 3.0) / (1.0 / 3.0 + 1.0 + 1e-8)));
  EXPECT_EQ(rouge_zh_score("", "北京", jieba), 0.0);
  EXPECT_EQ(longbench_record_score("vcsum", "", {"北京"}, {}), 0.0);
}

TEST(LongBenchZhMetrics, NormalizeZhAnswer) {
  // Python's lower() (full-width letters too), ASCII and LongBench's Chinese punctuation and
  // all whitespace removed; LongBench's list has "》" but not "《".
  EXPECT_EQ(normalize_zh_answer("ＡＢ，c D《》\u3000「x」"), "ａｂcd《x");
  EXPECT_EQ(normalize_zh_answer("İⅢ"), "i\u0307ⅲ");
  EXPECT_EQ(normalize_zh_answer("…—“”"), "");
}

TEST(LongBenchZhMetrics, TheDatasetScoresThroughTheLoader) {
  KVB_REQUIRE_JIEBA_DICT();
  test::TempDir tmp;
  std::ofstream(tmp.file("vcsum.jsonl"))
      << json{{"input", ""}, {"context", "会议讨论了预算。"}, {"answers", {"会议讨论了明年的预算"}},
              {"length", 8}, {"all_classes", nullptr}, {"_id", "v0"}}.dump()
      << "\n";
  auto d = test::make_dataset("longbench", {{"dataset", "vcsum"}, {"data_dir", tmp.path()}});
  EXPECT_EQ(d->metric_name(), "rouge_zh_score");
  const auto samples = d->samples(test::byte_tokenizer(), 0);
  ASSERT_EQ(samples.size(), 1u);
  const std::string pred = "会议讨论了预算";
  EXPECT_EQ(d->score(samples[0], pred), 100.0 * rouge_zh_score(pred, samples[0].answers[0], jieba_segmenter()));
  EXPECT_GT(d->score(samples[0], pred), 50.0);
  // An explicit dictionary is part of the config; a missing one is named.
  auto own = test::make_dataset("longbench", {{"dataset", "vcsum"}, {"data_dir", tmp.path()},
                                              {"jieba_dict", kDebianJiebaDict}});
  EXPECT_EQ(own->score(samples[0], pred), d->score(samples[0], pred));
  try {
    test::make_dataset("longbench", {{"dataset", "dureader"}, {"data_dir", tmp.path()},
                                     {"jieba_dict", tmp.file("none.txt")}});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("jieba_dict"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(tmp.file("none.txt")), std::string::npos) << e.what();
  }
}

TEST(ScoreCommandZh, MissingJiebaDictionaryExitsTwoNamingIt) {
  test::TempDir tmp;
  std::ofstream(tmp.file("vcsum.jsonl")) << R"({"pred": "a", "answers": ["a"], "all_classes": null})" "\n";
  const test::CliRun r =
      test::run_kvbench("score --dataset vcsum --jieba-dict " + tmp.file("none.txt") + " " + tmp.file("vcsum.jsonl"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--jieba-dict"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(tmp.file("none.txt")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("apt-get install python3-jieba"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kvb
