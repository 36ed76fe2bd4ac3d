// GPT-2's reversible byte <-> printable-character mapping used by byte-level BPE: printable
// Latin-1 bytes stand for themselves, the other 68 bytes are shifted to U+0100.. so that every
// token is a printable string without spaces or control characters.
#pragma once
#include <string>

namespace kvb::tok {

// UTF-8 text of the character standing for `byte`.
const std::string& byte_to_symbol(unsigned char byte);
// The byte a character stands for, or -1 when `cp` is not one of the 256 symbols.
int symbol_to_byte(char32_t cp);

}  // namespace kvb::tok
