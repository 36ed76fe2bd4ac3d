// LongBench v1's scores (THUDM/LongBench metrics.py and eval.py), reimplemented from their
// definitions in ../shared/specs/benchmarks.md. Each metric scores one prediction against one
// reference in [0, 1]; longbench_record_score takes the max over a record's answers.
#pragma once
#include <string>
#include <vector>

namespace kvb {

// SQuAD-style normalisation: lower-case, drop ASCII punctuation, articles a/an/the -> " ",
// collapse whitespace (Python str.split() whitespace).
std::string normalize_answer(const std::string& s);

// Token F1 over whitespace tokens of the normalised strings (multiset overlap); 0 when
// nothing overlaps.
double qa_f1_score(const std::string& prediction, const std::string& ground_truth);

// ROUGE-L F of the `rouge` 1.0.1 package (summary level, union LCS over sentences split on
// "."); 0 when either side has no sentence (the package raises, LongBench returns 0).
double rouge_score(const std::string& prediction, const std::string& ground_truth);

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
// Why a dataset cannot be scored yet ("" when it can): the Chinese word-level metrics need
// jieba segmentation.
std::string longbench_unsupported_reason(const std::string& dataset);
// trec, triviaqa, samsum, lsht: only the first line of the prediction is scored.
bool longbench_first_line_only(const std::string& dataset);
// The metric's name ("qa_f1_score", "rouge_score", ...).
std::string longbench_metric_name(const std::string& dataset);
// Max over `answers` of the dataset's metric, in [0, 1] (first-line rule applied). Throws
// InputError for an unknown or unsupported dataset.
double longbench_record_score(const std::string& dataset, const std::string& prediction,
                              const std::vector<std::string>& answers,
                              const std::vector<std::string>& all_classes);
// The per-dataset score from the sum of record scores: round(100 * total / count, 2) in that
// order of operations, with Python's round (half to even on the exact binary value).
double longbench_dataset_score(double total, size_t count);

}  // namespace kvb
