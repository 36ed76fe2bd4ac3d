#include "datasets/synthetic/haystack.h"

#include "harness/common/error.h"

namespace kvb {

std::string fit_to_tokens(const Tokenizer& tokenizer, int64_t target, int64_t max_n,
                          const std::function<std::string(int64_t)>& render) {
  auto fits = [&](int64_t n) {
    return int64_t(tokenizer.encode(render(n), /*add_bos=*/true).size()) <= target;
  };
  if (!fits(0))
    throw InputError("context_length " + std::to_string(target) +
                     " is too short for the task's template and question");
  int64_t lo = 0, hi = max_n;  // invariant: fits(lo)
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid; else hi = mid - 1;
  }
  return render(lo);
}

}  // namespace kvb
