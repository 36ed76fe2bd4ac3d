#include "datasets/metrics/scbench_metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "datasets/metrics/longbench_metrics.h"
#include "datasets/metrics/ruler_metrics.h"

namespace kvb {
namespace {

// Python's str.strip(): ASCII whitespace off both ends.
std::string strip(const std::string& s) {
  const char* space = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
  return s;
}

bool in_label(const std::string& text, const std::vector<std::string>& label) {
  return std::find(label.begin(), label.end(), text) != label.end();
}

}  // namespace

double scbench_contains_score(const std::string& prediction, const std::string& label) {
  return prediction.find(label) != std::string::npos ? 100.0 : 0.0;
}

double scbench_vt_score(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0.0;
  const double share = double(references_found(prediction, references)) / double(references.size());
  return python_round_2(share) * 100.0;  // compute_scores.py's string_match_all: round(share, 2)
}

double scbench_qa_score(const std::string& prediction, const std::vector<std::string>& references) {
  const std::string pred = ascii_upper(strip(prediction));
  for (const std::string& r : references)
    if (pred.find(ascii_upper(r)) != std::string::npos) return 100.0;
  return 0.0;
}

double scbench_choice_score(const std::string& prediction, const std::vector<std::string>& label) {
  std::string p = strip(prediction);
  if (p.empty()) return 0.0;
  if (p[0] >= 'A' && p[0] <= 'D') return in_label(std::string(1, p[0]), label) ? 100.0 : 0.0;
  if (in_label(p, label)) return 100.0;
  for (char& c : p)
    if (std::string("\n\"'.,?!{}").find(c) != std::string::npos) c = ' ';
  for (size_t at; (at = p.find("  ")) != std::string::npos;) p.erase(at, 1);
  for (const std::string prefix : {"answer is:", "answer:", "answer is", "option is"}) {
    const size_t at = p.find(prefix);
    if (at == std::string::npos) continue;
    const size_t rest = at + prefix.size() + 1;  // past the prefix and one character
    if (rest >= p.size()) return 0.0;
    for (const std::string& l : label)
      if (p.compare(rest, l.size(), l) == 0) return 100.0;
    return 0.0;
  }
  std::istringstream words(p);
  for (std::string w; words >> w;)
    if (std::string("ABCD").find(w) != std::string::npos) return in_label(w, label) ? 100.0 : 0.0;
  return 0.0;
}

}  // namespace kvb
