// The pre-tokenizer split regexes of GPT-2, Llama 3 and Qwen2 as hand-written scanners
// (std::regex has no \p{L} / \p{N}). Each scanner follows the regex's leftmost-first
// alternation and backtracking exactly, so the pieces equal what a regex engine produces.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace kvb::tok {

enum class SplitRegex {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  kQwen2,   // as kLlama3 with \p{N} (single digits)
};

// The scanner for a tokenizer.json Split pattern, or nullopt when the regex is not one of these.
std::optional<SplitRegex> recognise_split_regex(std::string_view pattern);

// Appends to `out` the consecutive pieces of `text` (behaviour "Isolated": every match is a piece;
// these regexes match every character, so the pieces cover the text).
void split_with_regex(SplitRegex regex, std::string_view text, std::vector<std::string_view>* out);

}  // namespace kvb::tok
