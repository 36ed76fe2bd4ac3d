// UTF-8 and Unicode-category helpers for the tokenizers (no ICU: the letter/number tables are
// generated into unicode_tables.cpp by gen_unicode_tables.py).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kvb::unicode {

constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at byte `pos` of `s` into `*cp` and returns its length in
// bytes (1-4). An invalid or truncated sequence yields one byte with *cp = kReplacementChar,
// so callers can always advance.
size_t decode_utf8(std::string_view s, size_t pos, char32_t* cp);

// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(char32_t cp, std::string* out);

// Whole strings: UTF-8 -> code points (invalid bytes as kReplacementChar) and back.
std::u32string to_code_points(std::string_view utf8);
std::string to_utf8(const std::u32string& code_points);

// Bytes -> valid UTF-8: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// General category L* (\p{L}) and N* (\p{N}); defined in the generated unicode_tables.cpp.
bool is_letter(char32_t cp);
bool is_number(char32_t cp);
// \s as Oniguruma defines it for Unicode: \t \n \v \f \r, U+0085 and the Z* separators.
bool is_whitespace(char32_t cp);
// Python's str.isspace: is_whitespace and the information separators U+001C-U+001F.
bool is_python_space(char32_t cp);
// Python's str.strip() (lstrip: `back` false; rstrip: `front` false) of a UTF-8 text, which
// Jinja's trim is: invalid bytes read as U+FFFD, no space.
std::string python_strip(const std::string& text, bool front = true, bool back = true);

}  // namespace kvb::unicode
