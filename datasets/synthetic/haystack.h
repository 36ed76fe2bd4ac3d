// Sizing a prompt to a target length in the model's own tokens, and the repeated-noise
// haystack shared by passkey and the RULER-style tasks.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace kvb {

// Largest n in [0, max_n] with token_count(render(n)) <= target (render grows with n), found
// by bisection on the real tokenisation (BOS counted where `count_bos`, as the model will see
// it; RULER counts without). Returns that n and render(n).
// How close the result gets to `target` is the granularity of one step of n: callers make a
// step one sentence or one word, so the prompt lands within ~2% below the target.
// InputError when even render(0) does not fit.
struct FittedText {
  int64_t n = 0;
  std::string text;
};
FittedText fit_to_tokens(const Tokenizer& tokenizer, int64_t target, int64_t max_n,
                         const std::function<std::string(int64_t)>& render, bool count_bos);

// The noise text "The grass is green. The sky is blue. The sun is yellow. Here we go. There and
// back again." cut into its five sentences; noise sentence i is kNoiseSentences[i % 5].
extern const char* const kNoiseSentences[5];

// A text to insert before noise sentence `position` (0..n; n = after the last sentence).
struct Insert {
  int64_t position;
  std::string text;
};

// `n` noise sentences (space-separated, a newline after every fifth, i.e. the classic noise
// block repeated, cut at a sentence boundary), with each insert on a line of its own before
// the sentence at its position. Inserts must be sorted by position; equal positions keep order.
std::string noise_haystack(int64_t n, const std::vector<Insert>& inserts);

// Position of a needle at `depth_percent` (0..100) in a haystack of `n` units.
inline int64_t depth_position(int64_t n, int depth_percent) {
  return n * depth_percent / 100;
}

}  // namespace kvb
