// tokenizer.json's "added_tokens": special and user-added tokens, matched literally in the raw
// input before any normalisation.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvb::tok {

class AddedTokens {
 public:
  struct Token {
    std::string content;
    int id;
    bool special;
  };
  // A stretch of input: plain text (id == -1) or one added token.
  struct Piece {
    std::string_view text;
    size_t offset;  // byte offset in the input
    int id;
  };

  // `added_tokens` may be null (none). Ids must be in [0, id_limit).
  static AddedTokens from_json(const nlohmann::json& added_tokens, int id_limit,
                               const std::string& file);

  // Leftmost-longest literal matches of the added tokens, with the text between them.
  std::vector<Piece> split(std::string_view text) const;

  const Token* by_id(int id) const;
  const Token* by_content(std::string_view content) const;
  int max_id() const { return max_id_; }

 private:
  std::vector<Token> tokens_;
  std::unordered_map<int, size_t> index_by_id_;
  // Indices of the tokens starting with each byte, longest first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
  int max_id_ = -1;
};

}  // namespace kvb::tok
