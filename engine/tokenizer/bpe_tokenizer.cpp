#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "engine/common/error.h"

namespace kvb::tok {

namespace {

// transformers' PreTrainedTokenizerBase.clean_up_tokenization: these replacements, in this order.
std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kReplacements[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) {
    const std::string f(from), t(to);
    std::string out;
    size_t at = 0;
    for (size_t hit; (hit = text.find(f, at)) != std::string::npos; at = hit + f.size())
      out.append(text, at, hit - at).append(t);
    text = out.append(text, at, std::string::npos);
  }
  return text;
}

}  // namespace

std::vector<int> BpeTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int> ids;
  if (add_special && add_bos_) ids = prefix_ids_;
  for (const AddedTokens::Piece& piece : parts_.added.split(text)) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      encode_segment(parts_.normalizer.apply(piece.text), piece.offset == 0, &ids);
    }
  }
  if (add_special && add_eos_) ids.push_back(eos_ids_.front());  // add_eos_ needs an eos_token
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
  std::string text = parts_.decoder.decode(std::move(tokens));
  return clean_up_spaces_ ? clean_up_tokenization(std::move(text)) : text;
}

int BpeTokenizer::vocab_size() const {
  return std::max(parts_.model.size(), parts_.added.max_id() + 1);
}

int BpeTokenizer::find_token(std::string_view token) const {
  if (const AddedTokens::Token* added = parts_.added.by_content(token)) return added->id;
  return parts_.model.find(token);
}

}  // namespace kvb::tok
