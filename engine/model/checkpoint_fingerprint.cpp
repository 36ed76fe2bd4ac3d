#include "engine/model/checkpoint_fingerprint.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb {
namespace {

constexpr uint64_t kWholeFileBytes = 8ull << 20;
constexpr uint64_t kHeadBytes = 1ull << 20;
constexpr uint64_t kBlocks = 256, kBlockBytes = 4096;

struct Fnv1a64 {
  uint64_t state = 0xcbf29ce484222325ULL;
  void add(const void* data, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) state = (state ^ bytes[i]) * 0x100000001b3ULL;
  }
  void add(const std::string& text) { add(text.data(), text.size() + 1); }  // with its NUL
  void add(uint64_t value) { add(&value, sizeof(value)); }
};

// `n` bytes of `in` from `offset` into the hash.
void add_range(Fnv1a64& hash, std::ifstream& in, uint64_t offset, uint64_t n) {
  std::vector<char> buffer(n);
  in.seekg(std::streamoff(offset));
  in.read(buffer.data(), std::streamsize(n));
  hash.add(buffer.data(), size_t(in.gcount()));
  in.clear();
}

// A file's name, size and content (sampled where large); absent files add their name only.
void add_file(Fnv1a64& hash, const std::filesystem::path& dir, const std::string& name) {
  hash.add(name);
  std::error_code error;
  const std::filesystem::path path = dir / name;
  if (!std::filesystem::is_regular_file(path, error)) return hash.add(std::string("(absent)"));
  const uint64_t size = std::filesystem::file_size(path, error);
  hash.add(size);
  std::ifstream in(path, std::ios::binary);
  if (size <= kWholeFileBytes) return add_range(hash, in, 0, size);
  add_range(hash, in, 0, kHeadBytes);
  for (uint64_t i = 0; i < kBlocks; ++i)
    add_range(hash, in, (size - kBlockBytes) * i / (kBlocks - 1), kBlockBytes);
}

// The shards model.safetensors.index.json names, sorted; none where it does not parse (the
// loader then says why).
std::set<std::string> shards_of(const std::filesystem::path& index) {
  std::set<std::string> out;
  std::error_code error;
  if (!std::filesystem::is_regular_file(index, error)) return out;  // a FIFO would block
  std::ifstream in(index);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return out;
  for (const auto& item : j["weight_map"].items())
    if (item.value().is_string()) out.insert(item.value().get<std::string>());
  return out;
}

}  // namespace

std::string checkpoint_fingerprint(const std::string& reference) {
  const std::string folder = LlamaModel::folder_of(reference);
  std::error_code error;
  const std::filesystem::path dir(folder);
  if (folder.empty() || !std::filesystem::is_directory(dir, error)) return "";
  Fnv1a64 hash;
  for (const char* name :
       {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    add_file(hash, dir, name);
  // Only where present, so that the folders without it keep their fingerprints.
  if (std::filesystem::exists(dir / "chat_template.jinja", error))
    add_file(hash, dir, "chat_template.jinja");
  // Only where it changes the tokenizer's settings (engine/tokenizer/tokenizer.h
  // read_tokenizer_config): a folder whose map repeats its config keeps its fingerprint.
  if (std::filesystem::exists(dir / "special_tokens_map.json", error) &&
      special_tokens_map_changes_config(folder))
    add_file(hash, dir, "special_tokens_map.json");
  if (std::filesystem::exists(dir / "model.safetensors", error)) {
    add_file(hash, dir, "model.safetensors");
  } else {
    add_file(hash, dir, "model.safetensors.index.json");
    for (const std::string& shard : shards_of(dir / "model.safetensors.index.json"))
      if (shard.find('/') == std::string::npos) add_file(hash, dir, shard);
  }
  char hex[24];
  std::snprintf(hex, sizeof(hex), "v1:%016llx", static_cast<unsigned long long>(hash.state));
  return hex;
}

}  // namespace kvb
