#include "engine/tokenizer/split_regex.h"

#include <string>

#include "engine/tokenizer/unicode.h"

namespace kvb::tok {
namespace {

// The patterns exactly as tokenizer.json spells them (after JSON unescaping).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text as code points, so that the scanners can look ahead and back up freely.
// Each scanner takes a start index and returns the end of its match, or the start on no match.
class Scanner {
 public:
  explicit Scanner(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
      char32_t cp;
      offsets_.push_back(pos);
      pos += unicode::decode_utf8(text, pos, &cp);
      cps_.push_back(cp);
    }
    offsets_.push_back(text.size());
  }

  size_t size() const { return cps_.size(); }
  size_t byte_offset(size_t i) const { return offsets_[i]; }

  bool letter(size_t i) const { return i < size() && unicode::is_letter(cps_[i]); }
  bool number(size_t i) const { return i < size() && unicode::is_number(cps_[i]); }
  bool space(size_t i) const { return i < size() && unicode::is_whitespace(cps_[i]); }
  bool newline(size_t i) const { return i < size() && (cps_[i] == '\r' || cps_[i] == '\n'); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < size() && !space(i) && !letter(i) && !number(i); }
  bool is(size_t i, char32_t c) const { return i < size() && cps_[i] == c; }

  template <typename Pred>
  size_t run(size_t i, Pred pred) const {
    while (pred(i)) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring case (ASCII folding).
  size_t contraction(size_t i, bool ignore_case) const {
    if (!is(i, '\'') || i + 1 >= size()) return i;
    auto at = [&](size_t j, char c) {
      if (j >= size()) return false;
      char32_t cp = cps_[j];
      if (ignore_case && cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
      return cp == static_cast<char32_t>(c);
    };
    for (char c : {'s', 't', 'm', 'd'}) {
      if (at(i + 1, c)) return i + 2;
    }
    for (const char* pair : {"re", "ve", "ll"}) {
      if (at(i + 1, pair[0]) && at(i + 2, pair[1])) return i + 3;
    }
    return i;
  }

  // ` ?X+` for a character class X.
  template <typename Pred>
  size_t optional_space_then_run(size_t i, Pred pred) const {
    const size_t start = is(i, ' ') && pred(i + 1) ? i + 1 : i;
    return pred(start) ? run(start, pred) : i;
  }

  // \s+(?!\S): the whitespace run, minus its last character when a non-space follows.
  size_t spaces_not_before_text(size_t i) const {
    const size_t end = run(i, [this](size_t j) { return space(j); });
    if (end == i || end == size()) return end;
    return end - 1 > i ? end - 1 : i;
  }

  size_t spaces(size_t i) const {
    return run(i, [this](size_t j) { return space(j); });
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t word_with_one_leading_mark(size_t i) const {
    auto letters = [this](size_t j) { return letter(j); };
    if (!newline(i) && !letter(i) && !number(i) && i < size() && letter(i + 1)) {
      return run(i + 1, letters);
    }
    return run(i, letters);
  }

  size_t digits(size_t i, size_t max_count) const {
    size_t end = i;
    while (end - i < max_count && number(end)) ++end;
    return end;
  }

  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t punctuation_then_newlines(size_t i) const {
    const size_t end = optional_space_then_run(i, [this](size_t j) { return other(j); });
    return end == i ? i : run(end, [this](size_t j) { return newline(j); });
  }

  // \s*[\r\n]+: greedy whitespace backed up to just after its last line break.
  size_t spaces_through_last_newline(size_t i) const {
    const size_t end = spaces(i);
    for (size_t j = end; j > i; --j) {
      if (newline(j - 1)) return j;
    }
    return i;
  }

 private:
  std::vector<char32_t> cps_;
  std::vector<size_t> offsets_;
};

size_t match_gpt2(const Scanner& s, size_t i) {
  size_t end;
  if ((end = s.contraction(i, false)) > i) return end;
  if ((end = s.optional_space_then_run(i, [&](size_t j) { return s.letter(j); })) > i) return end;
  if ((end = s.optional_space_then_run(i, [&](size_t j) { return s.number(j); })) > i) return end;
  if ((end = s.optional_space_then_run(i, [&](size_t j) { return s.other(j); })) > i) return end;
  if ((end = s.spaces_not_before_text(i)) > i) return end;
  return s.spaces(i);
}

size_t match_llama3(const Scanner& s, size_t i, size_t max_digits) {
  size_t end;
  if ((end = s.contraction(i, true)) > i) return end;
  if ((end = s.word_with_one_leading_mark(i)) > i) return end;
  if ((end = s.digits(i, max_digits)) > i) return end;
  if ((end = s.punctuation_then_newlines(i)) > i) return end;
  if ((end = s.spaces_through_last_newline(i)) > i) return end;
  if ((end = s.spaces_not_before_text(i)) > i) return end;
  return s.spaces(i);
}

}  // namespace

std::optional<SplitRegex> recognise_split_regex(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return SplitRegex::kGpt2;
  if (pattern == kLlama3Pattern) return SplitRegex::kLlama3;
  if (pattern == kQwen2Pattern) return SplitRegex::kQwen2;
  return std::nullopt;
}

void split_with_regex(SplitRegex regex, std::string_view text, std::vector<std::string_view>* out) {
  const Scanner s(text);
  for (size_t i = 0; i < s.size();) {
    size_t end = regex == SplitRegex::kGpt2     ? match_gpt2(s, i)
                 : regex == SplitRegex::kLlama3 ? match_llama3(s, i, 3)
                                                : match_llama3(s, i, 1);
    // Every character is a letter, a number, a space or "other", and each regex has an
    // alternative for each class, so a match always consumes something; guard regardless.
    if (end == i) end = i + 1;
    out->push_back(text.substr(s.byte_offset(i), s.byte_offset(end) - s.byte_offset(i)));
    i = end;
  }
}

}  // namespace kvb::tok
