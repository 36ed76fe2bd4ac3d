// tokenizer.json's "decoder": turns the token strings of a sequence of ids back into text.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvb::tok {

class Decoder {
 public:
  // `decoder` may be null (plain concatenation). Supported: Sequence, Replace (String pattern),
  // ByteFallback, Fuse, Strip, Metaspace, ByteLevel.
  static Decoder from_json(const nlohmann::json& decoder, const std::string& file);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel } kind;
    std::string from, to;  // kReplace; kStrip: `from` is the character; kMetaspace: `from`
    int start = 0, stop = 0;  // kStrip: how many leading / trailing characters may go
    bool strip_first_space = false;  // kMetaspace: drop the dummy prefix of the first token
  };
  void add(const nlohmann::json& decoder, const std::string& file, const std::string& field);

  std::vector<Step> steps_;
};

}  // namespace kvb::tok
