// LongBench v1's scores (THUDM/LongBench metrics.py and eval.py), reimplemented from their
// definitions in ../shared/specs/benchmarks.md. Each metric scores one prediction against one
// reference in [0, 1]; longbench_record_score takes the max over a record's answers.
#pragma once
#include <string>
#include <vector>

#include "datasets/metrics/jieba.h"

namespace kvb {

// Python's round(x, 2): printf rounds the exact binary value, ties to even, as Python does
// (round(0.125, 2) is 0.12, round(0.625, 2) 0.62).
double python_round_2(double x);

// SQuAD-style normalisation: lower-case, drop ASCII punctuation, articles a/an/the -> " ",
// collapse whitespace (Python str.split() whitespace).
std::string normalize_answer(const std::string& s);

// Token F1 over whitespace tokens of the normalised strings (multiset overlap); 0 when
// nothing overlaps.
double qa_f1_score(const std::string& prediction, const std::string& ground_truth);

// LongBench's Chinese normalisation of one token: Python's lower(), then ASCII and the listed
// Chinese punctuation removed, then all whitespace removed.
std::string normalize_zh_answer(const std::string& s);

// Token F1 over the jieba tokens of both sides, each normalize_zh_answer-ed, empty ones
// dropped (multiset overlap); 0 when nothing overlaps.
double qa_f1_zh_score(const std::string& prediction, const std::string& ground_truth,
                      const JiebaSegmenter& jieba);

// ROUGE-L F of the `rouge` 1.0.1 package (summary level, union LCS over sentences split on
// "."); 0 when either side has no sentence (the package raises, LongBench returns 0), and 0
// where the package's recursive LCS walk would pass Python's recursion limit, as under
// LongBench's eval.py (`kRougeWalkLimit`).
double rouge_score(const std::string& prediction, const std::string& ground_truth);
// The longest LCS walk (steps of rouge's recursive `_recon`) that eval.py's rouge_score
// survives: Python's limit of 1000 frames less those below it. Measured with LongBench's
// eval.py and metrics.py, rouge 1.0.1, CPython 3.11: 990 steps score, 991 give 0; through
// rouge_zh_score one frame more, so one step less.
constexpr size_t kRougeWalkLimit = 990;
// rouge_score of both sides' jieba tokens joined by spaces.
double rouge_zh_score(const std::string& prediction, const std::string& ground_truth,
                      const JiebaSegmenter& jieba);

// LongBench's classification score, with its list-removal quirk (see the .cpp).
double classification_score(const std::string& prediction, const std::string& ground_truth,
                            const std::vector<std::string>& all_classes);

// Fraction of the numbers in `prediction` equal to the paragraph id in `ground_truth`
// ("Paragraph N"; "段落N" for the Chinese variant). 0 without numbers.
double retrieval_score(const std::string& prediction, const std::string& ground_truth);
double retrieval_zh_score(const std::string& prediction, const std::string& ground_truth);
// Fraction of the numbers in `prediction` equal to `ground_truth`.
double count_score(const std::string& prediction, const std::string& ground_truth);

// Python difflib.SequenceMatcher(None, a, b).ratio() over Unicode code points, autojunk on.
double sequence_matcher_ratio(const std::string& a, const std::string& b);
// fuzzywuzzy fuzz.ratio: 100 when equal, 0 when either is empty, else
// round-half-even(100 * sequence_matcher_ratio).
int fuzz_ratio(const std::string& a, const std::string& b);
// First line (after stripping leading newlines) free of "`", "#" and "//", fuzz_ratio / 100.
double code_sim_score(const std::string& prediction, const std::string& ground_truth);

// The 21 LongBench v1 dataset names, in LongBench's order.
const std::vector<std::string>& longbench_datasets();
// The 13 of them LongBench-E has, in its order: their `<name>_e.jsonl` records spread evenly
// over lengths and are scored in three length ranges (eval.py --e).
const std::vector<std::string>& longbench_e_datasets();
// The task a data file name stands for ("qasper_e" -> "qasper", "qasper" -> "qasper"); ""
// for a name that is neither a LongBench dataset nor a LongBench-E one.
std::string longbench_task_of(const std::string& name);
// multifieldqa_zh, dureader, vcsum: the metric segments with jieba (so needs its dictionary).
bool longbench_needs_jieba(const std::string& dataset);
// trec, triviaqa, samsum, lsht: only the first line of the prediction is scored.
bool longbench_first_line_only(const std::string& dataset);
// The metric's name ("qa_f1_score", "rouge_score", ...).
std::string longbench_metric_name(const std::string& dataset);
// Max over `answers` of the dataset's metric, in [0, 1] (first-line rule applied). The
// Chinese word metrics segment with jieba_segmenter(jieba_dict) ("" = Debian's dictionary).
// Throws InputError for an unknown dataset or a missing or malformed jieba dictionary.
double longbench_record_score(const std::string& dataset, const std::string& prediction,
                              const std::vector<std::string>& answers,
                              const std::vector<std::string>& all_classes,
                              const std::string& jieba_dict = "");
// The per-dataset score from the sum of record scores: round(100 * total / count, 2) in that
// order of operations, with Python's round (half to even on the exact binary value).
double longbench_dataset_score(double total, size_t count);
// scorer_e's score of one length range from its records' scores in [0, 1], in order (not
// empty): round(100 * np.mean(scores), 2) as numpy computes it, its pairwise sum and its own
// rounding (rint(x * 100) / 100) included; either can move the last digit from a sum in order
// rounded as Python does (tests: DatasetScore.LengthRangesAsNumpy).
double longbench_e_range_score(const std::vector<double>& scores);
// eval.py --e's scorer_e over records with these `lengths` (words; characters in Chinese) and
// `scores` in [0, 1], in order: the ranges "0-4k" (< 4000), "4-8k" (< 8000) and "8k+", in that
// order, each with its record count and, where it has records, longbench_e_range_score of
// theirs (records 0: no score, eval.py's NaN).
struct LengthRangeScore {
  std::string range;
  size_t records = 0;
  double score = 0;
};
std::vector<LengthRangeScore> longbench_e_scores(const std::vector<double>& lengths,
                                                 const std::vector<double>& scores);

}  // namespace kvb
