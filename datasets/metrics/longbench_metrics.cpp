#include "datasets/metrics/longbench_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "harness/common/error.h"
#include "harness/tokenizer/unicode.h"

namespace kvb {
namespace {

std::u32string to_code_points(const std::string& s) {
  std::u32string out;
  for (size_t pos = 0; pos < s.size();) {
    char32_t cp;
    pos += unicode::decode_utf8(s, pos, &cp);
    out.push_back(cp);
  }
  return out;
}

std::string to_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t cp : s) unicode::append_utf8(cp, &out);
  return out;
}

// What Python's str.split() (no argument) splits on.
bool is_py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's \w for str patterns: letters, numbers, underscore.
bool is_py_word(char32_t c) { return c == '_' || unicode::is_letter(c) || unicode::is_number(c); }

// Python str.lower() for ASCII, Latin-1, Greek and Cyrillic capitals (the scripts LongBench's
// English answers contain); other code points are left as they are.
char32_t py_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

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

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

bool is_ascii_punct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
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

// ASCII-digit runs (Python's \d+; LongBench's answers use ASCII digits).
std::vector<std::string> digit_runs(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) { ++i; continue; }
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

double fraction_equal(const std::vector<std::string>& numbers, const std::string& target) {
  if (numbers.empty()) return 0.0;
  const auto right = std::count(numbers.begin(), numbers.end(), target);
  return double(right) / double(numbers.size());
}

// The id after the first `marker` followed by digits in `ground_truth` ("" when none: the
// Python original raises and the record cannot be scored).
std::string paragraph_id(const std::string& ground_truth, const std::string& marker) {
  for (size_t pos = ground_truth.find(marker); pos != std::string::npos;
       pos = ground_truth.find(marker, pos + 1)) {
    size_t j = pos + marker.size();
    size_t k = j;
    while (k < ground_truth.size() && std::isdigit(static_cast<unsigned char>(ground_truth[k]))) ++k;
    if (k > j) return ground_truth.substr(j, k - j);
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
// else to j-1.
void add_recon_lcs(const std::vector<std::string>& x, const std::vector<std::string>& y,
                   std::set<std::string>& out) {
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<int>> t(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j)
      t[i][j] = x[i - 1] == y[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  for (size_t i = n, j = m; i > 0 && j > 0;) {
    if (x[i - 1] == y[j - 1]) {
      out.insert(x[i - 1]);
      --i, --j;
    } else if (t[i - 1][j] > t[i][j - 1]) {
      --i;
    } else {
      --j;
    }
  }
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
  for (char32_t c : to_code_points(s)) {
    c = py_lower(c);
    if (!is_ascii_punct(c)) text.push_back(c);
  }
  return join(py_split(to_utf8(replace_articles(text))), " ");
}

double qa_f1_score(const std::string& prediction, const std::string& ground_truth) {
  const std::vector<std::string> pred = py_split(normalize_answer(prediction));
  const std::vector<std::string> gold = py_split(normalize_answer(ground_truth));
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

double rouge_score(const std::string& prediction, const std::string& ground_truth) {
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
    for (const auto& h : hyp) add_recon_lcs(r, h, lcs_union);
  const double llcs = double(lcs_union.size());
  const double r_lcs = llcs / m, p_lcs = llcs / n;
  return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
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

std::string longbench_unsupported_reason(const std::string& dataset) {
  if (dataset == "multifieldqa_zh" || dataset == "dureader" || dataset == "vcsum")
    return dataset + " needs jieba segmentation, not supported yet";
  return "";
}

bool longbench_first_line_only(const std::string& dataset) {
  return dataset == "trec" || dataset == "triviaqa" || dataset == "samsum" || dataset == "lsht";
}

namespace {

using Metric = double (*)(const std::string&, const std::string&, const std::vector<std::string>&);

template <double (*F)(const std::string&, const std::string&)>
double ignore_classes(const std::string& p, const std::string& g, const std::vector<std::string>&) {
  return F(p, g);
}

Metric metric_for(const std::string& dataset) {
  static const std::map<std::string, Metric> metrics = {
      {"narrativeqa", ignore_classes<qa_f1_score>}, {"qasper", ignore_classes<qa_f1_score>},
      {"multifieldqa_en", ignore_classes<qa_f1_score>}, {"hotpotqa", ignore_classes<qa_f1_score>},
      {"2wikimqa", ignore_classes<qa_f1_score>},    {"musique", ignore_classes<qa_f1_score>},
      {"triviaqa", ignore_classes<qa_f1_score>},    {"gov_report", ignore_classes<rouge_score>},
      {"qmsum", ignore_classes<rouge_score>},       {"multi_news", ignore_classes<rouge_score>},
      {"samsum", ignore_classes<rouge_score>},      {"trec", classification_score},
      {"lsht", classification_score},               {"passage_retrieval_en", ignore_classes<retrieval_score>},
      {"passage_retrieval_zh", ignore_classes<retrieval_zh_score>},
      {"passage_count", ignore_classes<count_score>}, {"lcc", ignore_classes<code_sim_score>},
      {"repobench-p", ignore_classes<code_sim_score>}};
  const std::string why = longbench_unsupported_reason(dataset);
  if (!why.empty()) throw InputError(why);
  const auto it = metrics.find(dataset);
  if (it == metrics.end()) throw InputError("unknown LongBench dataset \"" + dataset + "\"");
  return it->second;
}

}  // namespace

std::string longbench_metric_name(const std::string& dataset) {
  if (dataset == "trec" || dataset == "lsht") return "classification_score";
  if (dataset == "gov_report" || dataset == "qmsum" || dataset == "multi_news" || dataset == "samsum")
    return "rouge_score";
  if (dataset == "passage_retrieval_en") return "retrieval_score";
  if (dataset == "passage_retrieval_zh") return "retrieval_zh_score";
  if (dataset == "passage_count") return "count_score";
  if (dataset == "lcc" || dataset == "repobench-p") return "code_sim_score";
  return "qa_f1_score";
}

double longbench_record_score(const std::string& dataset, const std::string& prediction,
                              const std::vector<std::string>& answers,
                              const std::vector<std::string>& all_classes) {
  const Metric metric = metric_for(dataset);
  const std::string pred =
      longbench_first_line_only(dataset) ? split_lines(lstrip_newlines(prediction))[0] : prediction;
  double best = 0.0;
  for (const std::string& answer : answers) best = std::max(best, metric(pred, answer, all_classes));
  return best;
}

double longbench_dataset_score(double total, size_t count) {
  if (count == 0) return 0.0;
  // printf rounds the exact binary value, ties to even, as Python's round(x, 2) does.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", 100.0 * total / double(count));
  return std::strtod(buf, nullptr);
}

}  // namespace kvb
