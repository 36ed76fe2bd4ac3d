// Sizing a prompt to a target length in the model's own tokens.
#pragma once
#include <functional>
#include <string>

#include "harness/tokenizer/tokenizer.h"

namespace kvb {

// Largest n in [0, max_n] with token_count(render(n)) <= target (render grows with n), found
// by bisection on the real tokenisation. Returns the rendered text for that n.
std::string fit_to_tokens(const Tokenizer& tokenizer, int64_t target, int64_t max_n,
                          const std::function<std::string(int64_t)>& render);

}  // namespace kvb
