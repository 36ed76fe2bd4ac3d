#include "datasets/metrics/ruler_metrics.h"

#include <algorithm>

namespace kvb {
namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

bool contains_ci(const std::string& lowered_prediction, const std::string& reference) {
  return lowered_prediction.find(ascii_lower(reference)) != std::string::npos;
}

}  // namespace

double string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0.0;
  const std::string pred = ascii_lower(prediction);
  const auto found = std::count_if(references.begin(), references.end(),
                                   [&](const std::string& r) { return contains_ci(pred, r); });
  return 100.0 * double(found) / double(references.size());
}

double string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  const std::string pred = ascii_lower(prediction);
  for (const std::string& r : references)
    if (contains_ci(pred, r)) return 100.0;
  return 0.0;
}

}  // namespace kvb
