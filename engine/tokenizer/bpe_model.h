// The "model" of a tokenizer.json of type BPE: vocabulary, merges by rank, byte fallback.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvb::tok {

class BpeModel {
 public:
  // Parses tokenizer.json's "model" object (`field` is its path for errors, e.g. "model").
  static BpeModel from_json(const nlohmann::json& model, const std::string& file,
                            const std::string& field);

  // Ids are in [0, size()).
  int size() const { return static_cast<int>(id_to_token_.size()); }
  // -1 when `token` is not in the vocabulary.
  int find(std::string_view token) const;
  const std::string& token(int id) const { return id_to_token_[id]; }

  // Appends the ids of one word (a stretch the merges may span): its characters looked up in the
  // vocabulary (unknown ones become <0xNN> byte tokens with byte_fallback, else <unk>), then
  // merged pair by pair, lowest rank first, leftmost first among equal ranks.
  void encode_word(std::string_view word, std::vector<int>* out) const;

 private:
  struct Merge {
    int rank;
    int merged_id;
  };

  static uint64_t pair_key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  void read_vocab(const nlohmann::json& vocab, const std::string& file, const std::string& field);
  void read_merges(const nlohmann::json& merges, const std::string& file,
                   const std::string& field);
  void append_char(std::string_view ch, std::vector<int>* symbols) const;
  void merge(std::vector<int>* symbols) const;

  std::unordered_map<std::string, int> token_to_id_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int, 256> byte_ids_{};  // id of "<0xNN>", -1 when absent
  int unk_id_ = -1;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace kvb::tok
