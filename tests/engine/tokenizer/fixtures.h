// Small tokenizer.json files built in code, with vocabularies small enough to work out the
// expected ids by hand (see the comments in the tests).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kvb::tokenizer_test {

using nlohmann::json;

// GPT-2's byte alphabet, written out independently of the library: printable Latin-1 bytes
// keep their code point, the others take U+0100, U+0101, ... in byte order.
inline std::string gpt2_symbol(int byte) {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int cp = byte;
  if (!printable(byte)) {
    cp = 256;
    for (int b = 0; b < byte; ++b) cp += printable(b) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

inline std::string gpt2_spell(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) out += gpt2_symbol(b);
  return out;
}

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Byte-level BPE: ids 0-255 are the bytes (id == byte value), then merges 256-265 (by rank),
// "xyz" (266, reachable only through ignore_merges), and the added tokens <|endoftext|> (267)
// and <|eot_id|> (268). `llama3`: Sequence[Split(Llama 3 regex), ByteLevel(use_regex=false)]
// with ignore_merges and a TemplateProcessing BOS; else GPT-2's ByteLevel(use_regex=true).
inline json byte_level_tokenizer_json(bool llama3) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", "t"},          // 256 " t"
      {"h", "e"},          // 257 "he"
      {" t", "he"},        // 258 " the"
      {"\xC3", "\xA9"},    // 259 "é"
      {"\xE6", "\x97"},    // 260 first two bytes of 日
      {"\xE6\x97", "\xA5"},  // 261 "日"
      {"'", "s"},          // 262 "'s"
      {"1", "2"},          // 263 "12"
      {"\n", "\n"},        // 264 "\n\n"
      {" ", " "},          // 265 "  "
  };
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2_symbol(b)] = b;
  json merge_list = json::array();
  for (size_t i = 0; i < merges.size(); ++i) {
    vocab[gpt2_spell(merges[i].first + merges[i].second)] = 256 + static_cast<int>(i);
    merge_list.push_back(gpt2_spell(merges[i].first) + " " + gpt2_spell(merges[i].second));
  }
  vocab["xyz"] = 266;
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                     {"trim_offsets", true}, {"use_regex", !llama3}};
  json pre_tokenizer = byte_level;
  json post_processor = byte_level;
  if (llama3) {
    pre_tokenizer = {{"type", "Sequence"},
                     {"pretokenizers",
                      {{{"type", "Split"},
                        {"pattern", {{"Regex", kLlama3Regex}}},
                        {"behavior", "Isolated"},
                        {"invert", false}},
                       byte_level}}};
    post_processor = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  }
  auto added = [](int id, const char* content) {
    return json{{"id", id},         {"content", content}, {"single_word", false},
                {"lstrip", false},  {"rstrip", false},    {"normalized", false},
                {"special", true}};
  };
  return {{"version", "1.0"},
          {"added_tokens", {added(267, "<|endoftext|>"), added(268, "<|eot_id|>")}},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", post_processor},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"unk_token", nullptr},
            {"byte_fallback", false},
            {"ignore_merges", llama3},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

inline std::string byte_token_name(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// SentencePiece-style BPE: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then
// "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264, "b▁" 265. Merges by rank:
// "b ▁" (spans a word boundary), "▁ a", "a b", "▁a b" (string and pair forms mixed).
// `legacy`: the pre-0.14 form, a Metaspace pre-tokenizer and a ByteFallback/Fuse/Metaspace
// decoder instead of the Prepend/Replace normalizer and the Replace/ByteFallback/Fuse/Strip one.
inline json sentencepiece_tokenizer_json(bool legacy, bool byte_fallback = true) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[byte_token_name(b)] = 3 + b;
  const char* pieces[] = {"\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "b\u2581"};
  for (int i = 0; i < 7; ++i) vocab[pieces[i]] = 259 + i;
  json merges = {json::array({"b", "\u2581"}), "\u2581 a", json::array({"a", "b"}), "\u2581a b"};
  auto special = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"normalized", false}, {"special", true}};
  };
  json t = {{"version", "1.0"},
            {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
            {"model",
             {{"type", "BPE"},
              {"unk_token", "<unk>"},
              {"fuse_unk", true},
              {"byte_fallback", byte_fallback},
              {"vocab", vocab},
              {"merges", merges}}}};
  if (legacy) {
    t["normalizer"] = nullptr;
    t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"},
                          {"add_prefix_space", true}};
    t["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}}}}};
  } else {
    t["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
    t["pre_tokenizer"] = nullptr;
    t["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  }
  return t;
}

inline json sentencepiece_config() {
  return {{"add_bos_token", true}, {"bos_token", {{"content", "<s>"}}}, {"eos_token", "</s>"}};
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace kvb::tokenizer_test
