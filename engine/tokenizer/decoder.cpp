#include "engine/tokenizer/decoder.h"

#include "engine/tokenizer/byte_alphabet.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/unicode.h"

namespace kvb::tok {
namespace {

using Tokens = std::vector<std::string>;

// "<0xNN>" -> NN, else -1: NN as Rust's u8::from_str_radix(.., 16) reads it (either case, an
// optional '+' before one digit), which the reference's ByteFallback decoder uses.
int byte_of_token(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  const auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  if (token[3] == '+') return digit(token[4]);
  const int high = digit(token[3]), low = digit(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// Each run of <0xNN> tokens becomes the text its bytes spell where they are valid UTF-8 as a
// whole, else one U+FFFD per byte (HF tokenizers' ByteFallback; not a lossy decoding, which
// gives one U+FFFD per invalid sequence).
Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  std::string bytes;
  const auto flush = [&] {
    if (bytes.empty()) return;
    if (unicode::utf8_lossy(bytes) == bytes) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\uFFFD");
    }
    bytes.clear();
  };
  for (std::string& token : tokens) {
    const int byte = byte_of_token(token);
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

Tokens fuse(const Tokens& tokens) {
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  return {joined};
}

// Removes up to `start` leading and `stop` trailing copies of `ch` from each token.
Tokens strip(Tokens tokens, const std::string& ch, int start, int stop) {
  for (std::string& token : tokens) {
    size_t begin = 0, end = token.size();
    for (int i = 0; i < start && token.compare(begin, ch.size(), ch) == 0; ++i) begin += ch.size();
    for (int i = 0; i < stop && end >= begin + ch.size() &&
                    token.compare(end - ch.size(), ch.size(), ch) == 0;
         ++i) {
      end -= ch.size();
    }
    token = token.substr(begin, end - begin);
  }
  return tokens;
}

Tokens metaspace(Tokens tokens, const std::string& replacement, bool strip_first_space) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = replace_all(tokens[i], replacement, " ");
    if (i == 0 && strip_first_space && !tokens[i].empty() && tokens[i][0] == ' ') {
      tokens[i].erase(0, 1);
    }
  }
  return tokens;
}

// Each character stands for a byte (GPT-2's alphabet); a token holding any other character
// (e.g. an added token) contributes its own bytes.
Tokens byte_level(const Tokens& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    std::string token_bytes;
    bool all_mapped = true;
    for (size_t pos = 0; pos < token.size() && all_mapped;) {
      char32_t cp;
      pos += unicode::decode_utf8(token, pos, &cp);
      const int byte = symbol_to_byte(cp);
      all_mapped = byte >= 0;
      token_bytes.push_back(static_cast<char>(byte));
    }
    bytes += all_mapped ? token_bytes : token;
  }
  return {unicode::utf8_lossy(bytes)};
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& decoder, const std::string& file) {
  if (decoder.is_null())
    fail(file, "decoder", "none: the tokenizers library then joins the tokens with spaces, which "
                          "kvbench does not reproduce");
  Decoder result;
  result.add(decoder, file, "decoder");
  return result;
}

void Decoder::add(const nlohmann::json& decoder, const std::string& file,
                  const std::string& field) {
  const std::string type = required_string(decoder, "type", file, field);
  if (type == "Sequence") {
    const nlohmann::json& list = required(decoder, "decoders", file, field);
    if (!list.is_array()) fail(file, join_field(field, "decoders"), "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      add(list[i], file, field + ".decoders[" + std::to_string(i) + "]");
    }
  } else if (type == "Replace") {
    const nlohmann::json& pattern = required(decoder, "pattern", file, field);
    const std::string pattern_field = join_field(field, "pattern");
    if (!pattern.is_object() || !pattern.contains("String")) {
      fail(file, pattern_field, "only {\"String\": ...} patterns are supported");
    }
    Step step{Step::Kind::kReplace, required_string(pattern, "String", file, pattern_field),
              required_string(decoder, "content", file, field)};
    if (step.from.empty()) fail(file, pattern_field + ".String", "empty");
    steps_.push_back(std::move(step));
  } else if (type == "ByteFallback") {
    steps_.push_back({Step::Kind::kByteFallback, "", ""});
  } else if (type == "Fuse") {
    steps_.push_back({Step::Kind::kFuse, "", ""});
  } else if (type == "Strip") {
    Step step{Step::Kind::kStrip, required_string(decoder, "content", file, field), ""};
    const nlohmann::json& start = required(decoder, "start", file, field);
    const nlohmann::json& stop = required(decoder, "stop", file, field);
    if (!start.is_number_integer() || start.get<int64_t>() < 0 || !stop.is_number_integer() ||
        stop.get<int64_t>() < 0 || step.from.empty()) {
      fail(file, field, "expected content (a character) and start/stop counts");
    }
    step.start = start.get<int>();
    step.stop = stop.get<int>();
    steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    Step step{Step::Kind::kMetaspace, optional_string(decoder, "replacement", "\u2581", file, field),
              ""};
    // Legacy files say add_prefix_space; newer ones prepend_scheme ("always", "first", "never").
    const bool add_prefix = optional_bool(decoder, "add_prefix_space", true, file, field);
    step.strip_first_space =
        optional_string(decoder, "prepend_scheme", add_prefix ? "always" : "never", file,
                        field) != "never";
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    steps_.push_back({Step::Kind::kByteLevel, "", ""});
  } else {
    fail(file, join_field(field, "type"), "unsupported decoder \"" + type + "\"");
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kReplace:
        for (std::string& token : tokens) token = replace_all(token, step.from, step.to);
        break;
      case Step::Kind::kByteFallback: tokens = byte_fallback(std::move(tokens)); break;
      case Step::Kind::kFuse: tokens = fuse(tokens); break;
      case Step::Kind::kStrip:
        tokens = strip(std::move(tokens), step.from, step.start, step.stop);
        break;
      case Step::Kind::kMetaspace:
        tokens = metaspace(std::move(tokens), step.from, step.strip_first_space);
        break;
      case Step::Kind::kByteLevel: tokens = byte_level(tokens); break;
    }
  }
  return fuse(tokens).front();
}

}  // namespace kvb::tok
