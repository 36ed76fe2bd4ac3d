// The hand-written pre-tokenizer regex scanners and the Unicode helpers behind them.
#include <gtest/gtest.h>

#include "engine/tokenizer/split_regex.h"
#include "engine/tokenizer/unicode.h"
#include "tests/engine/tokenizer/fixtures.h"

namespace kvb::tok {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(SplitRegex regex, const std::string& text) {
  std::vector<std::string_view> views;
  split_with_regex(regex, text, &views);
  return Pieces(views.begin(), views.end());
}

TEST(TokenizerSplitRegex, RecognisesThePatterns) {
  EXPECT_EQ(recognise_split_regex(tokenizer_test::kGpt2Regex), SplitRegex::kGpt2);
  EXPECT_EQ(recognise_split_regex(tokenizer_test::kLlama3Regex), SplitRegex::kLlama3);
  EXPECT_EQ(recognise_split_regex(
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            SplitRegex::kQwen2);
  EXPECT_EQ(recognise_split_regex(R"(\w+|\s+)"), std::nullopt);
}

TEST(TokenizerSplitRegex, Gpt2) {
  EXPECT_EQ(split(SplitRegex::kGpt2, "Hello world's  123\n\n x"),
            (Pieces{"Hello", " world", "'s", " ", " 123", "\n\n", " x"}));
  // Contractions are case-sensitive: "'S" is punctuation then letters.
  EXPECT_EQ(split(SplitRegex::kGpt2, "it'Sok"), (Pieces{"it", "'", "Sok"}));
  EXPECT_EQ(split(SplitRegex::kGpt2, "a\t\tb  "), (Pieces{"a", "\t", "\t", "b", "  "}));
  EXPECT_EQ(split(SplitRegex::kGpt2, "(x)!! \u65e5\u672c"), (Pieces{"(", "x", ")!!", " \u65e5\u672c"}));
}

TEST(TokenizerSplitRegex, Llama3) {
  EXPECT_EQ(split(SplitRegex::kLlama3, "I'VE 2024!!\n\n"), (Pieces{"I", "'VE", " ", "202", "4", "!!\n\n"}));
  EXPECT_EQ(split(SplitRegex::kLlama3, "(hello) \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440"),
            (Pieces{"(hello", ")", " \u041f\u0440\u0438\u0432\u0435\u0442", " \u043c\u0438\u0440"}));
  EXPECT_EQ(split(SplitRegex::kLlama3, "x\n\n  y  "), (Pieces{"x", "\n\n", " ", " y", "  "}));
  // Arabic-Indic digits are \p{N}: groups of three.
  EXPECT_EQ(split(SplitRegex::kLlama3, "\u0663\u0664\u0665\u0666"),
            (Pieces{"\u0663\u0664\u0665", "\u0666"}));
  // A newline cannot lead a word; a tab can.
  EXPECT_EQ(split(SplitRegex::kLlama3, "\nab\tcd"), (Pieces{"\n", "ab", "\tcd"}));
}

TEST(TokenizerSplitRegex, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split(SplitRegex::kQwen2, "x2024"), (Pieces{"x", "2", "0", "2", "4"}));
}

TEST(TokenizerSplitRegex, InvalidUtf8StillCoversTheText) {
  const std::string text = "a\xFF\xE6 b";
  Pieces pieces = split(SplitRegex::kLlama3, text);
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(TokenizerUnicode, Categories) {
  for (char32_t cp : {U'a', U'Z', U'\u00e9', U'\u03a9', U'\u0416', U'\u65e5', U'\u0627', U'\u3042'}) {
    EXPECT_TRUE(unicode::is_letter(cp)) << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {U'1', U'!', U' ', U'\U0001F600', U'\u00bd'}) {
    EXPECT_FALSE(unicode::is_letter(cp)) << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {U'7', U'\u0663', U'\u216b', U'\u00bd'}) {
    EXPECT_TRUE(unicode::is_number(cp)) << static_cast<uint32_t>(cp);
  }
  EXPECT_FALSE(unicode::is_number(U'x'));
  for (char32_t cp : {U'\n', U'\t', U' ', U'\u00a0', U'\u3000', U'\u2028'}) {
    EXPECT_TRUE(unicode::is_whitespace(cp)) << static_cast<uint32_t>(cp);
  }
  EXPECT_FALSE(unicode::is_whitespace(U'\u200b'));  // zero-width space is Cf, not \s
}

TEST(TokenizerUnicode, Utf8) {
  char32_t cp;
  EXPECT_EQ(unicode::decode_utf8("\u65e5", 0, &cp), 3u);
  EXPECT_EQ(cp, U'\u65e5');
  EXPECT_EQ(unicode::decode_utf8("\xC0\xAF", 0, &cp), 1u);  // overlong "/"
  EXPECT_EQ(cp, unicode::kReplacementChar);
  EXPECT_EQ(unicode::utf8_lossy("\xE6\x97" "a\xFF"), "\uFFFD" "a\uFFFD");
  EXPECT_EQ(unicode::utf8_lossy("ok \U0001F600"), "ok \U0001F600");
}

}  // namespace
}  // namespace kvb::tok
