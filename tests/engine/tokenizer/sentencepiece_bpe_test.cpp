// SentencePiece-style BPE: the stories260K acceptance checks and a hand-checked mini vocabulary.
#include <gtest/gtest.h>

#include <chrono>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixtures.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using Ids = std::vector<int>;
using nlohmann::json;

const std::vector<std::string>& varied_texts() {
  static const std::vector<std::string> texts = {
      "Once upon a time",
      "Hello, world! It's 2024-05-17: 3.14 * 42 = 131.88",
      "  leading and trailing spaces  ",
      "line one\nline two\n\n\tindented\r\nwindows",
      "multiple     spaces   inside",
      "caf\u00e9 na\u00efve \u00fcber",
      "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0",
      // (A literal "▁" cannot round-trip: it is what spaces become.)
      "emoji \U0001F600\U0001F389 and symbols \u00a7\u00b6\u2020",
      "",
      " ",
      "\n",
  };
  return texts;
}

TEST(TokenizerStories260K, EncodesOnceUponATime) {
  KVB_REQUIRE_STORIES260K(dir);
  auto tok = Tokenizer::load(dir);
  EXPECT_EQ(tok->encode("Once upon a time", true), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("Once upon a time", false), (Ids{403, 407, 261, 378}));
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), Ids{2});
  EXPECT_TRUE(tok->add_bos_by_default());
}

TEST(TokenizerStories260K, DecodesTheReferenceOutput) {
  KVB_REQUIRE_STORIES260K(dir);
  auto tok = Tokenizer::load(dir);
  const Ids ids = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298,
                   315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
  const std::string text = tok->decode(ids);
  const std::string expected = "Once upon a time, there was a little girl named Lily.";
  EXPECT_EQ(text.substr(0, expected.size()), expected) << text;
}

TEST(TokenizerStories260K, RoundTripsVariedText) {
  KVB_REQUIRE_STORIES260K(dir);
  auto tok = Tokenizer::load(dir);
  for (const std::string& text : varied_texts()) {
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
}

TEST(TokenizerStories260K, SpecialTokensWrittenInTheText) {
  KVB_REQUIRE_STORIES260K(dir);
  auto tok = Tokenizer::load(dir);
  // Each stretch between added tokens is normalised on its own (gets its own "▁").
  EXPECT_EQ(tok->encode("<s>Once</s>", false), (Ids{1, 403, 2}));
  EXPECT_EQ(tok->decode({1, 403, 2}), "Once");
  EXPECT_EQ(tok->decode({1, 403, 2}, false), "<s> Once</s>");
}

TEST(TokenizerStories260K, EncodesALongTextQuickly) {
  KVB_REQUIRE_STORIES260K(dir);
  auto tok = Tokenizer::load(dir);
  std::string text;
  while (text.size() < 160000) text += "Once upon a time, there was a little girl named Lily. \u00e9\n";
  const auto start = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 32000u);
  EXPECT_LT(seconds, 0.5);
  EXPECT_EQ(tok->decode(ids), text);
}

std::unique_ptr<Tokenizer> mini(bool legacy, bool byte_fallback = true) {
  return Tokenizer::from_json(tokenizer_test::sentencepiece_tokenizer_json(legacy, byte_fallback),
                              tokenizer_test::sentencepiece_config(), "mini");
}

TEST(TokenizerSentencePiece, MergesByRankAcrossTheWholeText) {
  auto tok = mini(false);
  // "▁b▁a": the rank-0 merge "b ▁" spans the word boundary.
  EXPECT_EQ(tok->encode("b a", true), (Ids{1, 259, 265, 260}));
  // "▁ab▁ab": "b ▁" (rank 0) first, then "▁ a" at 0, then "a b" at 4; "▁a b" never applies.
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{262, 265, 263}));
  EXPECT_EQ(tok->decode({1, 259, 265, 260}), "b a");
  EXPECT_EQ(tok->decode({262, 265, 263}), "ab ab");
}

TEST(TokenizerSentencePiece, LegacyMetaspaceSplitsAtEachSpace) {
  auto tok = mini(true);
  EXPECT_EQ(tok->encode("b a", false), (Ids{259, 261, 262}));
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{264, 264}));
  EXPECT_EQ(tok->decode({264, 264}), "ab ab");
  // Metaspace prepends "▁" only when the text does not start with a space, so (as in Hugging
  // Face's legacy tokenizers) a leading space is lost; everything else round-trips.
  EXPECT_EQ(tok->decode(tok->encode(" a", false)), "a");
  for (const std::string& text : varied_texts()) {
    if (!text.empty() && text[0] == ' ') continue;
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
}

TEST(TokenizerSentencePiece, ByteFallbackAndItsDecoding) {
  auto tok = mini(false);
  // "▁é": é is not in the vocabulary -> its UTF-8 bytes C3 A9 -> ids 3 + byte.
  EXPECT_EQ(tok->encode("\u00e9", false), (Ids{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->decode({259, 3 + 0xC3, 3 + 0xA9}), "\u00e9");
  // A lone lead byte is not UTF-8: U+FFFD.
  EXPECT_EQ(tok->decode({260, 3 + 0xC3, 260}), "a\uFFFDa");
  // A run that is not UTF-8 as a whole: one U+FFFD per byte, as HF's ByteFallback (a lossy
  // decoding gives one for E5 83, a three-byte character cut short, and keeps the valid 00).
  EXPECT_EQ(tok->decode({260, 3 + 0xE5, 3 + 0x83, 260}), "a\uFFFD\uFFFDa");
  EXPECT_EQ(tok->decode({3 + 0x00, 3 + 0xC8}), "\uFFFD\uFFFD");
  for (const std::string& text : varied_texts()) {
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
  }
}

TEST(TokenizerSentencePiece, UnknownCharactersWithoutByteFallback) {
  auto tok = mini(false, /*byte_fallback=*/false);
  // "▁cc▁a": consecutive unknown characters fuse into one <unk>; "▁ a" merges.
  EXPECT_EQ(tok->encode("cc a", false), (Ids{259, 0, 262}));
}

TEST(TokenizerSentencePiece, BosAndEosFromTheConfig) {
  auto tok = mini(false);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), Ids{2});
  EXPECT_TRUE(tok->add_bos_by_default());
  auto no_bos = Tokenizer::from_json(tokenizer_test::sentencepiece_tokenizer_json(false),
                                     {{"add_bos_token", false}, {"bos_token", "<s>"}}, "mini");
  EXPECT_FALSE(no_bos->add_bos_by_default());
  EXPECT_EQ(no_bos->bos_id(), 1);
}

// A sequence's start and end as transformers' add_special_tokens makes them: BOS only where
// add_bos_token says, EOS where add_eos_token does; text alone never gets either.
TEST(TokenizerSentencePiece, SpecialTokensOnlyWhereTheConfigAddsThem) {
  const json tokenizer = tokenizer_test::sentencepiece_tokenizer_json(false);
  auto no_bos = Tokenizer::from_json(tokenizer, {{"add_bos_token", false}, {"bos_token", "<s>"}},
                                     "mini");
  EXPECT_EQ(no_bos->encode("b a", true), (Ids{259, 265, 260}));
  auto with_eos = Tokenizer::from_json(
      tokenizer, {{"add_bos_token", true}, {"add_eos_token", true}, {"bos_token", "<s>"},
                  {"eos_token", "</s>"}}, "mini");
  EXPECT_TRUE(with_eos->adds_eos());
  EXPECT_EQ(with_eos->encode("b a", true), (Ids{1, 259, 265, 260, 2}));
  EXPECT_EQ(with_eos->encode("b a", false), (Ids{259, 265, 260}));
}

// clean_up_tokenization_spaces: transformers' replacements after decoding, only where it is true
// (absent: false, transformers' default since 4.45).
TEST(TokenizerSentencePiece, DecodeCleansUpSpacesWhereTheConfigSays) {
  const json tokenizer = tokenizer_test::sentencepiece_tokenizer_json(false);
  json config = tokenizer_test::sentencepiece_config();
  const std::string text = "a . b , a ' b n't 's 're 've 'm ? !";
  auto plain = Tokenizer::from_json(tokenizer, config, "mini");
  EXPECT_FALSE(plain->cleans_up_spaces());
  EXPECT_EQ(plain->decode(plain->encode(text, false)), text);
  config["clean_up_tokenization_spaces"] = true;
  auto clean = Tokenizer::from_json(tokenizer, config, "mini");
  EXPECT_EQ(clean->decode(clean->encode(text, false)), "a. b, a'bn't's're've'm?!");
}

TEST(TokenizerSentencePiece, LoadReadsGenerationConfigEos) {
  test::TempDir dir;
  tokenizer_test::write_file(dir.file("tokenizer.json"), tokenizer_test::sentencepiece_tokenizer_json(false).dump());
  tokenizer_test::write_file(dir.file("tokenizer_config.json"), tokenizer_test::sentencepiece_config().dump());
  tokenizer_test::write_file(dir.file("generation_config.json"), R"({"eos_token_id": [2, 0]})");
  auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->eos_ids(), (Ids{2, 0}));
}

}  // namespace
}  // namespace kvb
