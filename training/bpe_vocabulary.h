// A small SentencePiece-style BPE tokenizer learnt from a text corpus, written as a Hugging Face
// tokenizer.json that the project's loader reads (engine/tokenizer, the Llama-2 layout:
// "▁" for spaces, byte fallback for anything unseen).
//
// Two restrictions keep the retrieval tasks easy to read for a tiny model and keep a prompt's
// tokens a prefix of the tokens of prompt + answer:
//  - digits are never merged (a 7-digit number is 7 tokens, one per digit);
//  - "▁" never merges with a following digit or capital letter, and a merge never starts a word
//    in its right half, so a prompt ending in a space ends in the "▁" token both alone and
//    followed by its answer ("they are: ABCDE" -> ... ":" "▁" "A" ...).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvb {

// Learns up to `merges` merges from `corpus` (most frequent pair first, ties by the pair's
// text). Returns tokenizer.json. Token ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 the byte fallback
// tokens, then "▁", "\n" and the printable ASCII characters, then one token per merge.
nlohmann::json learn_bpe_tokenizer(const std::vector<std::string>& corpus, int merges);

// tokenizer_config.json for a tokenizer from learn_bpe_tokenizer.
nlohmann::json bpe_tokenizer_config();

}  // namespace kvb
