#include "datasets/synthetic/haystack.h"

#include "engine/common/error.h"

namespace kvb {

FittedText fit_to_tokens(const Tokenizer& tokenizer, int64_t target, int64_t max_n,
                         const std::function<std::string(int64_t)>& render, bool count_bos) {
  auto fits = [&](int64_t n) {
    return int64_t(tokenizer.encode(render(n), /*add_special=*/count_bos).size()) <= target;
  };
  if (!fits(0))
    throw InputError("context_length " + std::to_string(target) +
                     " is too short for the task's template and question");
  int64_t lo = 0, hi = max_n;  // invariant: fits(lo)
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid; else hi = mid - 1;
  }
  return {lo, render(lo)};
}

const char* const kNoiseSentences[5] = {"The grass is green.", "The sky is blue.",
                                         "The sun is yellow.", "Here we go.",
                                         "There and back again."};

std::string noise_haystack(int64_t n, const std::vector<Insert>& inserts) {
  std::string out;
  size_t next = 0;
  auto emit_inserts = [&](int64_t position) {
    for (; next < inserts.size() && inserts[next].position <= position; ++next) {
      if (!out.empty() && out.back() != '\n') out += '\n';  // an insert is a line of its own
      out += inserts[next].text;
      out += '\n';
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    emit_inserts(i);
    if (!out.empty() && out.back() != '\n') out += ' ';
    out += kNoiseSentences[i % 5];
    if (i % 5 == 4) out += '\n';
  }
  emit_inserts(n);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace kvb
