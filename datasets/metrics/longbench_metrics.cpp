#include "datasets/metrics/longbench_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "datasets/metrics/py_unicode.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/tokenizer/unicode.h"

namespace kvb {
namespace {

using unicode::to_code_points;
using unicode::to_utf8;

// What Python's str.split() (no argument) splits on.
bool is_py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's \w for str patterns: letters, numbers, underscore.
bool is_py_word(char32_t c) { return c == '_' || unicode::is_letter(c) || unicode::is_number(c); }

std::vector<std::string> py_split(const std::string& s) {
  std::vector<std::string> out;
  std::u32string word;
  for (char32_t c : to_code_points(s)) {
    if (is_py_space(c)) {
      if (!word.empty()) out.push_back(to_utf8(word));
      word.clear();
    } else {
      word.push_back(c);
    }
  }
  if (!word.empty()) out.push_back(to_utf8(word));
  return out;
}

bool is_ascii_punct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

// normalize_zh_answer's cn_punctuation, as LongBench lists it (full-width forms, CJK
// brackets, dashes, quotes, ellipsis, "."; note that it has U+300B but not U+300A).
bool is_cn_punct(char32_t c) {
  static const std::u32string list =
      U"\uFF01\uFF1F\uFF61\u3002\uFF02\uFF03\uFF04\uFF05\uFF06\uFF07\uFF08\uFF09\uFF0A\uFF0B"
      U"\uFF0C\uFF0D\uFF0F\uFF1A\uFF1B\uFF1C\uFF1D\uFF1E\uFF20\uFF3B\uFF3C\uFF3D\uFF3E\uFF3F"
      U"\uFF40\uFF5B\uFF5C\uFF5D\uFF5E\uFF5F\uFF60\uFF62\uFF63\uFF64\u3001\u3003\u300B\u300C"
      U"\u300D\u300E\u300F\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019\u301A\u301B\u301C"
      U"\u301D\u301E\u301F\u3030\u303E\u303F\u2013\u2014\u2018\u2019\u201B\u201C\u201D\u201E"
      U"\u201F\u2026\u2027\uFE4F.";
  return list.find(c) != std::u32string::npos;
}

// LongBench's f1_score: multiset overlap of two token lists; 0 when nothing overlaps.
double token_f1(const std::vector<std::string>& pred, const std::vector<std::string>& gold) {
  std::map<std::string, int> gold_counts;
  for (const std::string& t : gold) ++gold_counts[t];
  int same = 0;
  for (const std::string& t : pred) {
    auto it = gold_counts.find(t);
    if (it != gold_counts.end() && it->second > 0) --it->second, ++same;
  }
  if (same == 0) return 0.0;
  const double precision = double(same) / double(pred.size());
  const double recall = double(same) / double(gold.size());
  return 2 * precision * recall / (precision + recall);
}

// The jieba tokens of `text`, each normalize_zh_answer-ed, the empty ones dropped.
std::vector<std::string> zh_answer_tokens(const std::string& text, const JiebaSegmenter& jieba) {
  std::vector<std::string> out;
  for (const std::string& token : jieba.cut(text)) {
    std::string normalized = normalize_zh_answer(token);
    if (!normalized.empty()) out.push_back(std::move(normalized));
  }
  return out;
}

// re.sub(r'\b(a|an|the)\b', ' ', s): a match is a whole run of word characters.
std::u32string replace_articles(const std::u32string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    if (!is_py_word(s[i])) {
      out.push_back(s[i++]);
      continue;
    }
    size_t j = i;
    while (j < s.size() && is_py_word(s[j])) ++j;
    const std::u32string run = s.substr(i, j - i);
    if (run == U"a" || run == U"an" || run == U"the") out.push_back(' ');
    else out += run;
    i = j;
  }
  return out;
}

// The runs of decimal digits, Python's re.findall(r"\d+", s) on a str: any Unicode digit
// (Nd), so "12\u0663" is one run and equals no ASCII number.
std::vector<std::string> digit_runs(const std::string& s) {
  std::vector<std::string> out;
  std::u32string run;
  for (char32_t c : to_code_points(s)) {
    if (py_is_decimal(c)) {
      run.push_back(c);
    } else if (!run.empty()) {
      out.push_back(to_utf8(run));
      run.clear();
    }
  }
  if (!run.empty()) out.push_back(to_utf8(run));
  return out;
}

double fraction_equal(const std::vector<std::string>& numbers, const std::string& target) {
  if (numbers.empty()) return 0.0;
  const auto right = std::count(numbers.begin(), numbers.end(), target);
  return double(right) / double(numbers.size());
}

// The digits after the first `marker` followed by a \d+ run in `ground_truth` (Python's
// re.findall(marker + r"(\d+)", ground_truth)[0]; "" when none: the Python original raises
// and the record cannot be scored).
std::string paragraph_id(const std::string& ground_truth, const std::string& marker) {
  for (size_t pos = ground_truth.find(marker); pos != std::string::npos;
       pos = ground_truth.find(marker, pos + 1)) {
    std::u32string id;
    for (char32_t c : to_code_points(ground_truth.substr(pos + marker.size()))) {
      if (!py_is_decimal(c)) break;
      id.push_back(c);
    }
    if (!id.empty()) return to_utf8(id);
  }
  return "";
}

std::string lstrip_newlines(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == '\n') ++i;
  return s.substr(i);
}

std::vector<std::string> split_lines(const std::string& s) {  // Python s.split('\n')
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(s.substr(start, nl - start));
  out.push_back(s.substr(start));
  return out;
}

// ---- rouge 1.0.1 ----

// hyp.split(".") keeping non-empty pieces, each with whitespace collapsed.
std::vector<std::string> rouge_sentences(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string piece = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!piece.empty()) out.push_back(join(py_split(piece), " "));  // may become ""
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::vector<std::string> split_on_space(const std::string& s) {  // Python s.split(" ")
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t sp; (sp = s.find(' ', start)) != std::string::npos; start = sp + 1)
    out.push_back(s.substr(start, sp - start));
  out.push_back(s.substr(start));
  return out;
}

// The words of the one LCS of x (reference) and y (hypothesis) that rouge's backtracking
// reconstructs: on a match take the word, else step to i-1 when table[i-1][j] > table[i][j-1],
// else to j-1. Returns the walk's steps (rouge recurses once a step).
size_t add_recon_lcs(const std::vector<std::string>& x, const std::vector<std::string>& y,
                     std::set<std::string>& out) {
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<int>> t(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j)
      t[i][j] = x[i - 1] == y[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  size_t steps = 0;
  for (size_t i = n, j = m; i > 0 && j > 0; ++steps) {
    if (x[i - 1] == y[j - 1]) {
      out.insert(x[i - 1]);
      --i, --j;
    } else if (t[i - 1][j] > t[i][j - 1]) {
      --i;
    } else {
      --j;
    }
  }
  return steps;
}

std::set<std::string> distinct_words(const std::vector<std::vector<std::string>>& sentences) {
  std::set<std::string> out;
  for (const auto& s : sentences) out.insert(s.begin(), s.end());
  return out;
}

// ---- difflib ----

// SequenceMatcher(None, a, b) with autojunk: the longest-match search and the recursive
// matching blocks, counting matched elements.
class Matcher {
 public:
  Matcher(std::u32string a, std::u32string b) : a_(std::move(a)), b_(std::move(b)) {
    for (size_t j = 0; j < b_.size(); ++j) b2j_[b_[j]].push_back(int(j));
    // "Popular" elements (more than 1% + 1 of a b of >= 200 elements) are not indexed: they
    // never start a match, though a match may still extend over them.
    if (b_.size() >= 200) {
      const size_t ntest = b_.size() / 100 + 1;
      for (auto it = b2j_.begin(); it != b2j_.end();)
        it = it->second.size() > ntest ? b2j_.erase(it) : std::next(it);
    }
  }

  int64_t matched() const {
    int64_t total = 0;
    std::vector<std::array<int, 4>> todo = {{0, int(a_.size()), 0, int(b_.size())}};
    while (!todo.empty()) {
      const auto [alo, ahi, blo, bhi] = todo.back();
      todo.pop_back();
      const auto [i, j, k] = longest_match(alo, ahi, blo, bhi);
      if (k == 0) continue;
      total += k;
      if (alo < i && blo < j) todo.push_back({alo, i, blo, j});
      if (i + k < ahi && j + k < bhi) todo.push_back({i + k, ahi, j + k, bhi});
    }
    return total;
  }

 private:
  struct Match { int i, j, k; };

  // The longest a[i:i+k] == b[j:j+k] in the ranges, earliest i then earliest j on ties;
  // then widened over equal neighbours (which may be popular elements).
  Match longest_match(int alo, int ahi, int blo, int bhi) const {
    Match best{alo, blo, 0};
    std::unordered_map<int, int> run;  // j -> length of the match ending at (i-1, j)
    for (int i = alo; i < ahi; ++i) {
      std::unordered_map<int, int> next;
      const auto it = b2j_.find(a_[size_t(i)]);
      if (it != b2j_.end()) {
        for (int j : it->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          const auto prev = run.find(j - 1);
          const int k = next[j] = (prev == run.end() ? 0 : prev->second) + 1;
          if (k > best.k) best = {i - k + 1, j - k + 1, k};
        }
      }
      run.swap(next);
    }
    while (best.i > alo && best.j > blo && a_[size_t(best.i - 1)] == b_[size_t(best.j - 1)])
      --best.i, --best.j, ++best.k;
    while (best.i + best.k < ahi && best.j + best.k < bhi &&
           a_[size_t(best.i + best.k)] == b_[size_t(best.j + best.k)])
      ++best.k;
    return best;
  }

  std::u32string a_, b_;
  std::unordered_map<char32_t, std::vector<int>> b2j_;
};

}  // namespace

std::string normalize_answer(const std::string& s) {
  std::u32string text;
  for (char32_t c : py_lower(to_code_points(s)))
    if (!is_ascii_punct(c)) text.push_back(c);
  return join(py_split(to_utf8(replace_articles(text))), " ");
}

std::string normalize_zh_answer(const std::string& s) {
  std::u32string text;
  for (char32_t c : py_lower(to_code_points(s)))
    if (!is_ascii_punct(c) && !is_cn_punct(c) && !is_py_space(c)) text.push_back(c);
  return to_utf8(text);
}

double qa_f1_score(const std::string& prediction, const std::string& ground_truth) {
  return token_f1(py_split(normalize_answer(prediction)), py_split(normalize_answer(ground_truth)));
}

double qa_f1_zh_score(const std::string& prediction, const std::string& ground_truth,
                      const JiebaSegmenter& jieba) {
  return token_f1(zh_answer_tokens(prediction, jieba), zh_answer_tokens(ground_truth, jieba));
}

namespace {

// rouge_score, whose walks may take `walk_limit` steps (fewer: the frames of its callers).
double rouge_l(const std::string& prediction, const std::string& ground_truth, size_t walk_limit) {
  std::vector<std::vector<std::string>> hyp, ref;
  for (const std::string& s : rouge_sentences(prediction)) hyp.push_back(split_on_space(s));
  for (const std::string& s : rouge_sentences(ground_truth)) ref.push_back(split_on_space(s));
  if (hyp.empty() || ref.empty()) return 0.0;  // rouge raises "Hypothesis is empty."
  const double m = double(distinct_words(ref).size());
  const double n = double(distinct_words(hyp).size());
  // The union, as a set of words, of one reconstructed LCS per (reference, hypothesis)
  // sentence pair: not the textbook LCS F1.
  std::set<std::string> lcs_union;
  for (const auto& r : ref)
    for (const auto& h : hyp)
      if (add_recon_lcs(r, h, lcs_union) > walk_limit) return 0.0;  // RecursionError, caught
  const double llcs = double(lcs_union.size());
  const double r_lcs = llcs / m, p_lcs = llcs / n;
  return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
}

}  // namespace

double rouge_score(const std::string& prediction, const std::string& ground_truth) {
  return rouge_l(prediction, ground_truth, kRougeWalkLimit);
}

double rouge_zh_score(const std::string& prediction, const std::string& ground_truth,
                      const JiebaSegmenter& jieba) {
  return rouge_l(join(jieba.cut(prediction), " "), join(jieba.cut(ground_truth), " "),
                 kRougeWalkLimit - 1);
}

double classification_score(const std::string& prediction, const std::string& ground_truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matches;
  for (const std::string& c : all_classes)
    if (prediction.find(c) != std::string::npos) matches.push_back(c);
  // LongBench removes from the list it is iterating over; Python's list iterator then skips
  // the element that slides into the current index. Reproduced with an index that always
  // advances, and remove() deleting the first equal element.
  for (size_t i = 0; i < matches.size(); ++i) {
    const std::string term = matches[i];
    if (ground_truth.find(term) != std::string::npos && term != ground_truth)
      matches.erase(std::find(matches.begin(), matches.end(), term));
  }
  if (std::find(matches.begin(), matches.end(), ground_truth) == matches.end()) return 0.0;
  return 1.0 / double(matches.size());
}

double retrieval_score(const std::string& prediction, const std::string& ground_truth) {
  const std::string id = paragraph_id(ground_truth, "Paragraph ");
  return id.empty() ? 0.0 : fraction_equal(digit_runs(prediction), id);
}

double retrieval_zh_score(const std::string& prediction, const std::string& ground_truth) {
  const std::string id = paragraph_id(ground_truth, "段落");
  return id.empty() ? 0.0 : fraction_equal(digit_runs(prediction), id);
}

double count_score(const std::string& prediction, const std::string& ground_truth) {
  return fraction_equal(digit_runs(prediction), ground_truth);
}

double sequence_matcher_ratio(const std::string& a, const std::string& b) {
  std::u32string ca = to_code_points(a), cb = to_code_points(b);
  const size_t total = ca.size() + cb.size();
  if (total == 0) return 1.0;
  const int64_t matched = Matcher(std::move(ca), std::move(cb)).matched();
  return 2.0 * double(matched) / double(total);
}

int fuzz_ratio(const std::string& a, const std::string& b) {
  if (a == b) return 100;  // fuzzywuzzy checks equality before emptiness
  if (a.empty() || b.empty()) return 0;
  return int(std::nearbyint(100.0 * sequence_matcher_ratio(a, b)));  // ties to even
}

double code_sim_score(const std::string& prediction, const std::string& ground_truth) {
  std::string line;
  for (const std::string& l : split_lines(lstrip_newlines(prediction))) {
    if (l.find('`') == std::string::npos && l.find('#') == std::string::npos &&
        l.find("//") == std::string::npos) {
      line = l;
      break;
    }
  }
  return fuzz_ratio(line, ground_truth) / 100.0;
}

const std::vector<std::string>& longbench_datasets() {
  static const std::vector<std::string> names = {
      "narrativeqa", "qasper",     "multifieldqa_en", "multifieldqa_zh", "hotpotqa",
      "2wikimqa",    "musique",    "dureader",        "gov_report",      "qmsum",
      "multi_news",  "vcsum",      "trec",            "triviaqa",        "samsum",
      "lsht",        "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc",
      "repobench-p"};
  return names;
}

const std::vector<std::string>& longbench_e_datasets() {
  static const std::vector<std::string> names = {
      "qasper",   "multifieldqa_en", "hotpotqa", "2wikimqa",      "gov_report",
      "multi_news", "trec",          "triviaqa", "samsum",        "passage_count",
      "passage_retrieval_en", "lcc", "repobench-p"};
  return names;
}

std::string longbench_task_of(const std::string& name) {
  const auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  if (listed(longbench_datasets(), name)) return name;
  if (ends_with(name, "_e") && listed(longbench_e_datasets(), name.substr(0, name.size() - 2)))
    return name.substr(0, name.size() - 2);
  return "";
}

bool longbench_needs_jieba(const std::string& dataset) {
  return dataset == "multifieldqa_zh" || dataset == "dureader" || dataset == "vcsum";
}

bool longbench_first_line_only(const std::string& dataset) {
  return dataset == "trec" || dataset == "triviaqa" || dataset == "samsum" || dataset == "lsht";
}

namespace {

// What a metric may need besides the prediction and the reference.
struct MetricContext {
  const std::vector<std::string>& all_classes;
  const std::string& jieba_dict;
};

using Metric = double (*)(const std::string&, const std::string&, const MetricContext&);

template <double (*F)(const std::string&, const std::string&)>
double plain(const std::string& p, const std::string& g, const MetricContext&) {
  return F(p, g);
}

double with_classes(const std::string& p, const std::string& g, const MetricContext& c) {
  return classification_score(p, g, c.all_classes);
}

template <double (*F)(const std::string&, const std::string&, const JiebaSegmenter&)>
double with_jieba(const std::string& p, const std::string& g, const MetricContext& c) {
  return F(p, g, jieba_segmenter(c.jieba_dict));
}

Metric metric_for(const std::string& dataset) {
  static const std::map<std::string, Metric> metrics = {
      {"narrativeqa", plain<qa_f1_score>},       {"qasper", plain<qa_f1_score>},
      {"multifieldqa_en", plain<qa_f1_score>},   {"multifieldqa_zh", with_jieba<qa_f1_zh_score>},
      {"hotpotqa", plain<qa_f1_score>},          {"2wikimqa", plain<qa_f1_score>},
      {"musique", plain<qa_f1_score>},           {"dureader", with_jieba<rouge_zh_score>},
      {"gov_report", plain<rouge_score>},        {"qmsum", plain<rouge_score>},
      {"multi_news", plain<rouge_score>},        {"vcsum", with_jieba<rouge_zh_score>},
      {"trec", with_classes},                    {"triviaqa", plain<qa_f1_score>},
      {"samsum", plain<rouge_score>},            {"lsht", with_classes},
      {"passage_retrieval_en", plain<retrieval_score>}, {"passage_count", plain<count_score>},
      {"passage_retrieval_zh", plain<retrieval_zh_score>}, {"lcc", plain<code_sim_score>},
      {"repobench-p", plain<code_sim_score>}};
  const auto it = metrics.find(dataset);
  if (it == metrics.end()) throw InputError("unknown LongBench dataset \"" + dataset + "\"");
  return it->second;
}

}  // namespace

std::string longbench_metric_name(const std::string& dataset) {
  if (dataset == "trec" || dataset == "lsht") return "classification_score";
  if (dataset == "gov_report" || dataset == "qmsum" || dataset == "multi_news" || dataset == "samsum")
    return "rouge_score";
  if (dataset == "multifieldqa_zh") return "qa_f1_zh_score";
  if (dataset == "dureader" || dataset == "vcsum") return "rouge_zh_score";
  if (dataset == "passage_retrieval_en") return "retrieval_score";
  if (dataset == "passage_retrieval_zh") return "retrieval_zh_score";
  if (dataset == "passage_count") return "count_score";
  if (dataset == "lcc" || dataset == "repobench-p") return "code_sim_score";
  return "qa_f1_score";
}

double longbench_record_score(const std::string& dataset, const std::string& prediction,
                              const std::vector<std::string>& answers,
                              const std::vector<std::string>& all_classes,
                              const std::string& jieba_dict) {
  const Metric metric = metric_for(dataset);
  const std::string pred =
      longbench_first_line_only(dataset) ? split_lines(lstrip_newlines(prediction))[0] : prediction;
  double best = 0.0;
  const MetricContext context{all_classes, jieba_dict};
  for (const std::string& answer : answers) best = std::max(best, metric(pred, answer, context));
  return best;
}

double python_round_2(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", x);
  return std::strtod(buf, nullptr);
}

namespace {

// np.add.reduce over a contiguous float64 array: numpy's pairwise summation (8 running sums up
// to 128 items, halves at a multiple of 8 above).
double numpy_pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double sum = 0.;
    for (size_t i = 0; i < n; ++i) sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    std::copy(a, a + 8, r);
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += a[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return numpy_pairwise_sum(a, half) + numpy_pairwise_sum(a + half, n - half);
}

}  // namespace

double longbench_e_range_score(const std::vector<double>& scores) {
  const double mean = numpy_pairwise_sum(scores.data(), scores.size()) / double(scores.size());
  // Python's round() on a numpy float is numpy's: rint(x * 100) / 100, ties to even on the
  // product, not on the exact value as Python's own round.
  return std::nearbyint(100.0 * mean * 100.0) / 100.0;
}

std::vector<LengthRangeScore> longbench_e_scores(const std::vector<double>& lengths,
                                                 const std::vector<double>& scores) {
  std::vector<LengthRangeScore> out = {{"0-4k"}, {"4-8k"}, {"8k+"}};
  std::vector<std::vector<double>> of_range(out.size());
  for (size_t i = 0; i < lengths.size(); ++i)
    of_range[lengths[i] < 4000 ? 0 : lengths[i] < 8000 ? 1 : 2].push_back(scores[i]);
  for (size_t r = 0; r < out.size(); ++r) {
    out[r].records = of_range[r].size();
    if (!of_range[r].empty()) out[r].score = longbench_e_range_score(of_range[r]);
  }
  return out;
}

double longbench_dataset_score(double total, size_t count) {
  return count == 0 ? 0.0 : python_round_2(100.0 * total / double(count));
}

}  // namespace kvb
