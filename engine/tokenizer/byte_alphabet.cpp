#include "engine/tokenizer/byte_alphabet.h"

#include <array>

#include "engine/tokenizer/unicode.h"

namespace kvb::tok {
namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

// The 68 bytes that do not stand for themselves map to U+0100..U+0143.
constexpr char32_t kSymbolsEnd = 0x144;

struct Alphabet {
  std::array<std::string, 256> utf8;
  std::array<int, kSymbolsEnd> byte_of;

  Alphabet() {
    byte_of.fill(-1);
    char32_t next_shifted = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t symbol = stands_for_itself(b) ? static_cast<char32_t>(b) : next_shifted++;
      unicode::append_utf8(symbol, &utf8[b]);
      byte_of[symbol] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

const std::string& byte_to_symbol(unsigned char byte) { return alphabet().utf8[byte]; }

int symbol_to_byte(char32_t cp) { return cp < kSymbolsEnd ? alphabet().byte_of[cp] : -1; }

}  // namespace kvb::tok
