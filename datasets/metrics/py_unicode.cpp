#include "datasets/metrics/py_unicode.h"

namespace kvb {
namespace {

constexpr char32_t kCapitalSigma = 0x03A3, kSmallSigma = 0x03C3, kFinalSigma = 0x03C2;

// The first code point from `i` walking by `step` that is not case-ignorable, or `end`.
size_t skip_case_ignorable(const std::u32string& text, size_t i, std::ptrdiff_t step,
                           size_t end) {
  while (i != end && py_is_case_ignorable(text[i])) i += size_t(step);
  return i;
}

// CPython's handle_capital_sigma: cased, case-ignorables, sigma, not (case-ignorables, cased).
bool is_final_sigma(const std::u32string& text, size_t at) {
  constexpr size_t kNone = size_t(-1);
  const size_t before = at == 0 ? kNone : skip_case_ignorable(text, at - 1, -1, kNone);
  if (before == kNone || !py_is_cased(text[before])) return false;
  const size_t after = skip_case_ignorable(text, at + 1, 1, text.size());
  return after == text.size() || !py_is_cased(text[after]);
}

}  // namespace

std::u32string py_lower(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == kCapitalSigma)
      out.push_back(is_final_sigma(text, i) ? kFinalSigma : kSmallSigma);
    else
      append_py_lower(text[i], &out);
  }
  return out;
}

}  // namespace kvb
