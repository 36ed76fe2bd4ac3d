#include "engine/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/unicode.h"

namespace kvb::tok {
namespace {

std::string byte_token(int byte) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", byte);
  return buf;
}

// A merges entry: "left right" (one space) or ["left", "right"].
bool parse_merge(const nlohmann::json& entry, std::string* left, std::string* right) {
  if (entry.is_string()) {
    const std::string& s = entry.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) return false;
    *left = s.substr(0, space);
    *right = s.substr(space + 1);
    return true;
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    *left = entry[0].get<std::string>();
    *right = entry[1].get<std::string>();
    return true;
  }
  return false;
}

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& model, const std::string& file,
                             const std::string& field) {
  const std::string type = required_string(model, "type", file, field);
  if (type != "BPE") {
    fail(file, join_field(field, "type"), "unsupported model type \"" + type + "\" (only BPE)");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!optional_string(model, affix, "", file, field).empty()) {
      fail(file, join_field(field, affix), "not supported");
    }
  }
  // BPE dropout skips merges at random as the tokenizers library encodes: not deterministic,
  // and not reproduced. 0 (or null) leaves every merge in place.
  if (const auto it = model.find("dropout"); it != model.end() && !it->is_null() &&
                                             !(it->is_number() && it->get<double>() == 0.0))
    fail(file, join_field(field, "dropout"),
         it->dump() + ": BPE dropout (merges skipped at random) is not reproduced by kvbench");
  BpeModel m;
  m.read_vocab(required(model, "vocab", file, field), file, join_field(field, "vocab"));
  m.read_merges(required(model, "merges", file, field), file, join_field(field, "merges"));
  m.byte_fallback_ = optional_bool(model, "byte_fallback", false, file, field);
  m.fuse_unk_ = optional_bool(model, "fuse_unk", false, file, field);
  m.ignore_merges_ = optional_bool(model, "ignore_merges", false, file, field);
  const std::string unk = optional_string(model, "unk_token", "", file, field);
  if (!unk.empty()) {
    m.unk_id_ = m.find(unk);
    if (m.unk_id_ < 0) fail(file, join_field(field, "unk_token"), "\"" + unk + "\" not in vocab");
  }
  for (int b = 0; b < 256; ++b) m.byte_ids_[b] = m.find(byte_token(b));
  return m;
}

void BpeModel::read_vocab(const nlohmann::json& vocab, const std::string& file,
                          const std::string& field) {
  if (!vocab.is_object()) fail(file, field, "expected an object {token: id}");
  const int n = static_cast<int>(vocab.size());
  id_to_token_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  for (const auto& [token, id_json] : vocab.items()) {
    const std::string where = field + "[\"" + token + "\"]";
    if (!id_json.is_number_integer()) fail(file, where, "expected an integer id");
    const auto id = id_json.get<int64_t>();
    // Ids must be dense: the embedding matrix has one row per id.
    if (id < 0 || id >= n) {
      fail(file, where, "id " + std::to_string(id) + " out of range [0, " + std::to_string(n) + ")");
    }
    if (seen[id]) fail(file, where, "id " + std::to_string(id) + " used twice");
    seen[id] = true;
    id_to_token_[id] = token;
    token_to_id_.emplace(token, static_cast<int>(id));
  }
}

void BpeModel::read_merges(const nlohmann::json& merges, const std::string& file,
                           const std::string& field) {
  if (!merges.is_array()) fail(file, field, "expected an array");
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string where = field + "[" + std::to_string(rank) + "]";
    std::string left, right;
    if (!parse_merge(merges[rank], &left, &right)) {
      fail(file, where, "expected a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    const int left_id = find(left), right_id = find(right), merged_id = find(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      fail(file, where, "\"" + left + "\", \"" + right + "\" or their merge is not in the vocab");
    }
    // An earlier (lower-rank) duplicate wins.
    merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int>(rank), merged_id});
  }
}

int BpeModel::find(std::string_view token) const {
  auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

void BpeModel::append_char(std::string_view ch, std::vector<int>* symbols) const {
  if (const int id = find(ch); id >= 0) {
    symbols->push_back(id);
    return;
  }
  if (byte_fallback_) {
    bool all_bytes_known = true;
    for (char c : ch) all_bytes_known &= byte_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all_bytes_known) {
      for (char c : ch) symbols->push_back(byte_ids_[static_cast<unsigned char>(c)]);
      return;
    }
  }
  if (unk_id_ < 0) return;  // no <unk>: the character is dropped
  if (fuse_unk_ && !symbols->empty() && symbols->back() == unk_id_) return;
  symbols->push_back(unk_id_);
}

void BpeModel::encode_word(std::string_view word, std::vector<int>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int id = find(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<int> symbols;
  symbols.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    char32_t cp;
    const size_t len = unicode::decode_utf8(word, pos, &cp);
    append_char(word.substr(pos, len), &symbols);
    pos += len;
  }
  merge(&symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
}

// Symbols form a linked list over their original positions; candidate pairs wait in a min-heap
// ordered by (rank, position of the left symbol). A popped pair is stale when either side has
// merged since it was queued (its ids no longer match); merged-away positions hold id -1.
// O(n log n) in the word length, so a whole SentencePiece text can be one word.
void BpeModel::merge(std::vector<int>* symbols) const {
  std::vector<int>& ids = *symbols;
  const int n = static_cast<int>(ids.size());
  if (n < 2) return;
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int rank, left, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto queue_pair = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(pair_key(ids[left], ids[next[left]]));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, left, ids[left], ids[next[left]], it->second.merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) queue_pair(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int right = next[c.left];
    if (ids[c.left] != c.left_id || right < 0 || ids[right] != c.right_id) continue;
    ids[c.left] = c.merged_id;
    ids[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    queue_pair(prev[c.left]);
    queue_pair(c.left);
  }
  int kept = 0;
  for (int i = 0; i >= 0; i = next[i]) ids[kept++] = ids[i];
  ids.resize(kept);
}

}  // namespace kvb::tok
