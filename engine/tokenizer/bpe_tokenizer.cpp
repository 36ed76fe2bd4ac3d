#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "engine/common/error.h"

namespace kvb::tok {

std::vector<int> BpeTokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int> ids;
  if (add_bos) ids = prefix_ids_;
  for (const AddedTokens::Piece& piece : parts_.added.split(text)) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      encode_segment(parts_.normalizer.apply(piece.text), piece.offset == 0, &ids);
    }
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw InputError("decode: token id " + std::to_string(id) + " out of range [0, " +
                       std::to_string(vocab_size()) + ")");
    }
    if (const AddedTokens::Token* added = parts_.added.by_id(id)) {
      if (!(skip_special && added->special)) tokens.push_back(added->content);
    } else if (id < parts_.model.size()) {
      tokens.push_back(parts_.model.token(id));
    }
  }
  return parts_.decoder.decode(std::move(tokens));
}

int BpeTokenizer::vocab_size() const {
  return std::max(parts_.model.size(), parts_.added.max_id() + 1);
}

int BpeTokenizer::find_token(std::string_view token) const {
  if (const AddedTokens::Token* added = parts_.added.by_content(token)) return added->id;
  return parts_.model.find(token);
}

}  // namespace kvb::tok
