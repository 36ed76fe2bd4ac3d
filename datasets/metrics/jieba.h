// jieba's default word segmentation, `jieba.cut(text, cut_all=False)` (accurate mode, HMM on),
// as LongBench's Chinese metrics call it, reimplemented over jieba's own data files: the
// dictionary (dict.txt, read at run time) and the HMM model of finalseg/ (prob_start.py,
// prob_trans.py, prob_emit.py: Python dict literals, parsed at run time). Follows jieba 0.42.1
// (Debian's python3-jieba) token for token, tie-breaks included.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvb {

// Where Debian's python3-jieba installs its dictionary.
inline constexpr const char* kDebianJiebaDict = "/usr/lib/python3/dist-packages/jieba/dict.txt";

class JiebaSegmenter {
 public:
  // Reads `dict_path` (jieba's dict.txt format: "word freq [tag]" a line) and the HMM model
  // from finalseg/ beside it, or else from Debian's python3-jieba. InputError, naming the
  // file, when one is missing or malformed.
  explicit JiebaSegmenter(const std::string& dict_path);

  // jieba.cut(text, cut_all=False, HMM=True) as UTF-8 tokens; their concatenation is `text`
  // (invalid UTF-8 bytes come back as U+FFFD).
  std::vector<std::string> cut(const std::string& text) const;

  // The dictionary frequency of `word` (0 when absent or only a prefix of a word).
  int64_t frequency(const std::string& word) const;

 private:
  // Every dictionary word and every prefix of one (jieba's FREQ keys) is a node of this trie.
  int32_t child(int32_t node, char32_t c) const;  // -1 when the extension is not a key
  int64_t frequency(const std::u32string& word) const;
  void load_dictionary(const std::string& path);
  void load_hmm(const std::string& dir);

  void cut_han_block(const std::u32string& block, std::vector<std::u32string>& out) const;
  void cut_unknown(const std::u32string& buf, std::vector<std::u32string>& out) const;
  void cut_hmm(const std::u32string& han, std::vector<std::u32string>& out) const;
  double emit(int state, char32_t c) const;

  std::unordered_map<uint64_t, int32_t> children_;  // (node << 21 | code point) -> node
  std::vector<int64_t> freq_;                        // per node; node 0 is the empty string
  std::vector<double> log_freq_;                     // log(freq), or log(1) when freq is 0
  double log_total_ = 0;                             // log(sum of the dictionary's freqs)

  // HMM over the states B, M, E, S (begin, middle, end of a word, single character).
  std::array<double, 4> start_{};
  std::array<std::array<double, 4>, 4> trans_{};  // [from][to]
  std::array<std::vector<double>, 4> emit_;       // [state][c - U+4E00], c in U+4E00..U+9FD5
};

// The segmenter for `dict_path` ("" = kDebianJiebaDict), loaded once per process and path;
// thread-safe.
const JiebaSegmenter& jieba_segmenter(const std::string& dict_path = "");

}  // namespace kvb
