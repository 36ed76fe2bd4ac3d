#include "training/bpe_vocabulary.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "engine/tokenizer/sentencepiece_json.h"

namespace kvb {
namespace {

const std::string kSpace = "\u2581";  // "▁"

// The normalised words of `text`: spaces become "▁", every word starts with one (the
// normaliser's Prepend), and a newline is a word of its own. Each word is split into symbols:
// one per character, "▁" being one symbol.
void count_words(const std::string& text, std::map<std::vector<std::string>, int64_t>& counts) {
  std::vector<std::string> word = {kSpace};
  auto flush = [&] {
    if (!word.empty()) ++counts[word];
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (uint8_t(ch) >= 0x80) {  // a whole UTF-8 character: one symbol, never merged
      size_t end = i + 1;
      while (end < text.size() && (uint8_t(text[end]) & 0xC0) == 0x80) ++end;
      word.push_back(text.substr(i, end - i));
      i = end - 1;
    } else if (ch == ' ') {
      flush();
      word = {kSpace};
    } else if (ch == '\n') {
      flush();
      counts[{"\n"}]++;
    } else {
      word.push_back(std::string(1, ch));
    }
  }
  flush();
}

bool has_digit(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return std::isdigit(uint8_t(c)); });
}

bool ascii_text(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && uint8_t(c) < 0x7F; });
}

// Merges join printable ASCII (a word may start with "▁"); never digits or newlines.
bool mergeable(const std::string& left, const std::string& right) {
  const std::string left_text = left.rfind(kSpace, 0) == 0 ? left.substr(kSpace.size()) : left;
  if (!ascii_text(left_text) || !ascii_text(right) || right.empty()) return false;
  if (has_digit(left) || has_digit(right)) return false;
  if (right.rfind(kSpace, 0) == 0) return false;  // never across a word boundary
  if (left == kSpace && std::isupper(uint8_t(right[0]))) return false;
  return true;
}

using PairCounts = std::map<std::pair<std::string, std::string>, int64_t>;
using WordCounts = std::vector<std::pair<std::vector<std::string>, int64_t>>;

// Adds `sign` * n for every mergeable adjacent pair of `symbols`.
void count_pairs(const std::vector<std::string>& symbols, int64_t n, PairCounts& counts) {
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (mergeable(symbols[i], symbols[i + 1])) counts[{symbols[i], symbols[i + 1]}] += n;
}

// The most frequent pair (ties: the smallest, the map's order), if seen more than once.
bool best_pair(const PairCounts& counts, std::pair<std::string, std::string>* out) {
  int64_t best = 1;
  for (const auto& [pair, n] : counts)
    if (n > best) {
      best = n;
      *out = pair;
    }
  return best > 1;
}

bool contains_pair(const std::vector<std::string>& symbols,
                   const std::pair<std::string, std::string>& p) {
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (symbols[i] == p.first && symbols[i + 1] == p.second) return true;
  return false;
}

// `symbols` with every occurrence of `p` merged, left to right.
std::vector<std::string> merged(const std::vector<std::string>& symbols,
                                const std::pair<std::string, std::string>& p) {
  std::vector<std::string> out;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (i + 1 < symbols.size() && symbols[i] == p.first && symbols[i + 1] == p.second) {
      out.push_back(p.first + p.second);
      ++i;
    } else {
      out.push_back(symbols[i]);
    }
  }
  return out;
}

}  // namespace

nlohmann::json learn_bpe_tokenizer(const std::vector<std::string>& corpus, int merges) {
  std::map<std::vector<std::string>, int64_t> counts;
  for (const std::string& text : corpus) count_words(text, counts);
  WordCounts words(counts.begin(), counts.end());
  PairCounts pairs;
  for (const auto& [symbols, n] : words) count_pairs(symbols, n, pairs);

  nlohmann::json vocab = byte_fallback_vocab();
  int next_id = int(vocab.size());
  vocab[kSpace] = next_id++;
  vocab["\n"] = next_id++;
  for (char c = 33; c < 127; ++c) vocab[std::string(1, c)] = next_id++;

  nlohmann::json merge_list = nlohmann::json::array();
  std::pair<std::string, std::string> pair;
  for (int m = 0; m < merges && best_pair(pairs, &pair); ++m) {
    for (auto& [symbols, n] : words) {
      if (!contains_pair(symbols, pair)) continue;
      count_pairs(symbols, -n, pairs);  // only the words that change are recounted
      symbols = merged(symbols, pair);
      count_pairs(symbols, n, pairs);
    }
    const std::string token = pair.first + pair.second;
    if (!vocab.contains(token)) vocab[token] = next_id++;
    merge_list.push_back(pair.first + " " + pair.second);
  }
  return sentencepiece_tokenizer_json(std::move(vocab), std::move(merge_list));
}

nlohmann::json bpe_tokenizer_config() {
  return {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
          {"eos_token", "</s>"}, {"tokenizer_class", "LlamaTokenizer"}};
}

}  // namespace kvb
