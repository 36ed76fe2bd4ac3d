// Small text helpers: numbers for tables and reports, suffixes, separated lists.
#pragma once
#include <string>
#include <vector>

namespace kvb {

// `v` with `decimals` digits after the point ("%.*f"), never "-0.0" for a zero.
std::string fixed(double v, int decimals);

// Whether `text` ends with `suffix`.
inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Splits on `sep`, keeping empty pieces ("1,2," -> "1", "2", "") so callers can reject them.
std::vector<std::string> split(const std::string& text, char sep);

// The parts with `sep` between them.
std::string join(const std::vector<std::string>& parts, const std::string& sep);

// `text` up to its first newline (a stored error or a LibTorch message, for one-line lists).
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Quotes `s` for a POSIX shell (single quotes).
std::string shell_quote(const std::string& s);
// `s` as one shell word: as it is where nothing in it is special to a shell (letters, digits,
// and _ . / : = , + @ % -), else shell_quote(s). For command lines people read and paste.
std::string shell_word(const std::string& s);

}  // namespace kvb
