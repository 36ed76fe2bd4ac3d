#include "datasets/metrics/ruler_metrics.h"

#include <algorithm>

#include "datasets/metrics/py_unicode.h"
#include "engine/tokenizer/unicode.h"

namespace kvb {
namespace {

// Python's str.lower(), which RULER's metrics apply to both sides (Unicode, not ASCII only:
// "İ", "Σ" and the Kelvin sign fold too).
std::string python_lower(const std::string& text) {
  return unicode::to_utf8(py_lower(unicode::to_code_points(text)));
}

bool contains_ci(const std::string& lowered_prediction, const std::string& reference) {
  return lowered_prediction.find(python_lower(reference)) != std::string::npos;
}

}  // namespace

size_t references_found(const std::string& prediction, const std::vector<std::string>& references) {
  const std::string pred = python_lower(prediction);
  return size_t(std::count_if(references.begin(), references.end(),
                              [&](const std::string& r) { return contains_ci(pred, r); }));
}

double string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0.0;
  return 100.0 * double(references_found(prediction, references)) / double(references.size());
}

double string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  const std::string pred = python_lower(prediction);
  for (const std::string& r : references)
    if (contains_ci(pred, r)) return 100.0;
  return 0.0;
}

}  // namespace kvb
