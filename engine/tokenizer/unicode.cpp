#include "engine/tokenizer/unicode.h"
#include <algorithm>

namespace kvb::unicode {
namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of a well-formed UTF-8 sequence at `pos`, or the number of leading bytes that could
// still start one (negated) when it is ill-formed: -1 for a lone bad byte, -2 for a truncated
// two-byte prefix, and so on.
int sequence_length(std::string_view s, size_t pos, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  char32_t value;
  char32_t min_value;  // rejects overlong encodings
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, value = b0 & 0x1F, min_value = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, value = b0 & 0x0F, min_value = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, value = b0 & 0x07, min_value = 0x10000;
  } else {
    return -1;
  }
  for (int i = 1; i < len; ++i) {
    if (pos + i >= s.size() || !is_continuation(static_cast<unsigned char>(s[pos + i]))) return -i;
    value = (value << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  }
  if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return -1;
  *cp = value;
  return len;
}

}  // namespace

size_t decode_utf8(std::string_view s, size_t pos, char32_t* cp) {
  const int len = sequence_length(s, pos, cp);
  if (len > 0) return static_cast<size_t>(len);
  *cp = kReplacementChar;
  return 1;
}

std::u32string to_code_points(std::string_view utf8) {
  std::u32string out;
  for (size_t pos = 0; pos < utf8.size();) {
    char32_t cp;
    pos += decode_utf8(utf8, pos, &cp);
    out.push_back(cp);
  }
  return out;
}

std::string to_utf8(const std::u32string& code_points) {
  std::string out;
  for (char32_t cp : code_points) append_utf8(cp, &out);
  return out;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    char32_t cp;
    const int len = sequence_length(bytes, pos, &cp);
    if (len > 0) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      append_utf8(kReplacementChar, &out);
      pos += static_cast<size_t>(-len);
    }
  }
  return out;
}

bool is_whitespace(char32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680) {
    return true;
  }
  return (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_python_space(char32_t cp) { return is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::string python_strip(const std::string& text, bool front, bool back) {
  size_t begin = text.size(), end = 0;  // the first non-space code point's start, the last's end
  for (size_t at = 0; at < text.size();) {
    char32_t c;
    const size_t n = decode_utf8(text, at, &c);
    if (!is_python_space(c)) {
      begin = std::min(begin, at);
      end = at + n;
    }
    at += n;
  }
  if (begin >= end) return "";
  if (!front) begin = 0;
  if (!back) end = text.size();
  return text.substr(begin, end - begin);
}

}  // namespace kvb::unicode
