// Unicode Normalization Form C (UAX #15), for tokenizer.json's {"type": "NFC"} normaliser.
// The Unicode data lives in the generated nfc_tables.cpp (gen_nfc_tables.py, from the Unicode
// Character Database files of Debian's unicode-data package); the algorithm in nfc.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kvb::unicode {

// The NFC form of `utf8`: canonical decomposition, canonical ordering, canonical composition.
// Text whose code points are all below U+0300 is returned unchanged without further work.
// Invalid UTF-8 bytes are kept as they are and act like U+FFFD (a starter that neither
// decomposes nor composes), as the rest of the tokenizer reads them (see decode_utf8).
std::string nfc(std::string_view utf8);

// The Unicode version the tables were generated from, e.g. "15.0.0".
extern const char kNfcUnicodeVersion[];

// Canonical_Combining_Class (0 for starters and unassigned code points).
uint8_t combining_class(char32_t cp);

// The single-step canonical decomposition of `cp` (not recursive; `*second` is 0 for
// singletons); false if there is none. Hangul syllables are left to nfc.cpp.
bool canonical_decomposition(char32_t cp, char32_t* first, char32_t* second);

// The primary composite of `first` + `second`, or 0 if they do not compose (Hangul excluded).
char32_t primary_composite(char32_t first, char32_t second);

}  // namespace kvb::unicode
