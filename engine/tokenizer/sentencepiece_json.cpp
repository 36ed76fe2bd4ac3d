#include "engine/tokenizer/sentencepiece_json.h"

#include <cstdio>

namespace kvb {
namespace {

const char* const kSpace = "\u2581";

nlohmann::json special_token(int id, const char* content) {
  return {{"id", id},        {"content", content}, {"special", true}, {"single_word", false},
          {"lstrip", false}, {"rstrip", false},    {"normalized", false}};
}

}  // namespace

nlohmann::json byte_fallback_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  return vocab;
}

nlohmann::json sentencepiece_tokenizer_json(nlohmann::json vocab, nlohmann::json merges) {
  return {
      {"version", "1.0"},
      {"added_tokens", {special_token(0, "<unk>"), special_token(1, "<s>"), special_token(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kSpace}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)},
        {"byte_fallback", true}, {"unk_token", "<unk>"}, {"fuse_unk", true}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
}

}  // namespace kvb
