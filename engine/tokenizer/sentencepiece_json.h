// tokenizer.json documents in the Llama-2 SentencePiece layout, for tokenizers kvbench makes
// itself (the built-in byte tokenizer, the BPE `kvbench train-tiny` learns): "▁" stands for a
// space, unseen characters fall back to byte tokens, <unk> = 0, <s> = 1, </s> = 2.
#pragma once
#include <nlohmann/json.hpp>

namespace kvb {

// The vocabulary's first 259 entries: <unk>, <s>, </s> and the byte tokens <0x00>..<0xFF>.
nlohmann::json byte_fallback_vocab();

// The whole tokenizer.json for `vocab` (token -> id, starting with byte_fallback_vocab()) and
// `merges` (an array of "left right" strings, highest priority first).
nlohmann::json sentencepiece_tokenizer_json(nlohmann::json vocab, nlohmann::json merges);

}  // namespace kvb
