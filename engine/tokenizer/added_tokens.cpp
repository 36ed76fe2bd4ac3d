#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer_json.h"

namespace kvb::tok {

AddedTokens AddedTokens::from_json(const nlohmann::json& added_tokens, int id_limit,
                                   const std::string& file) {
  AddedTokens result;
  if (added_tokens.is_null()) return result;
  if (!added_tokens.is_array()) fail(file, "added_tokens", "expected an array");
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const nlohmann::json& entry = added_tokens[i];
    Token token{required_string(entry, "content", file, field), 0,
                optional_bool(entry, "special", false, file, field)};
    const nlohmann::json& id = required(entry, "id", file, field);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit) {
      fail(file, field + ".id", "expected an integer in [0, " + std::to_string(id_limit) + ")");
    }
    if (token.content.empty()) fail(file, field + ".content", "empty");
    token.id = id.get<int>();
    result.max_id_ = std::max(result.max_id_, token.id);
    result.index_by_id_[token.id] = result.tokens_.size();
    result.tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < result.tokens_.size(); ++i) {
    result.by_first_byte_[static_cast<unsigned char>(result.tokens_[i].content[0])].push_back(i);
  }
  for (auto& bucket : result.by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
      return result.tokens_[a].content.size() > result.tokens_[b].content.size();
    });
  }
  return result;
}

std::vector<AddedTokens::Piece> AddedTokens::split(std::string_view text) const {
  std::vector<Piece> pieces;
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Token* match = nullptr;
    for (size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.compare(pos, tokens_[index].content.size(), tokens_[index].content) == 0) {
        match = &tokens_[index];
        break;
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    if (pos > plain_start) pieces.push_back({text.substr(plain_start, pos - plain_start), plain_start, -1});
    pieces.push_back({text.substr(pos, match->content.size()), pos, match->id});
    pos += match->content.size();
    plain_start = pos;
  }
  if (plain_start < text.size()) pieces.push_back({text.substr(plain_start), plain_start, -1});
  return pieces;
}

const AddedTokens::Token* AddedTokens::by_id(int id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedTokens::Token* AddedTokens::by_content(std::string_view content) const {
  for (const Token& token : tokens_) {
    if (token.content == content) return &token;
  }
  return nullptr;
}

}  // namespace kvb::tok
