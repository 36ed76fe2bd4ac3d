// Byte-level BPE on the hand-built vocabulary of fixtures.h (ids 0-255 are the bytes).
#include <gtest/gtest.h>

#include <chrono>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixtures.h"

namespace kvb {
namespace {

using Ids = std::vector<int>;

std::unique_ptr<Tokenizer> gpt2() {
  return Tokenizer::from_json(tokenizer_test::byte_level_tokenizer_json(false),
                              {{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}},
                              "gpt2");
}

std::unique_ptr<Tokenizer> llama3() {
  return Tokenizer::from_json(tokenizer_test::byte_level_tokenizer_json(true), nlohmann::json::object(),
                              "llama3");
}

TEST(TokenizerByteLevel, FixtureAlphabet) {
  EXPECT_EQ(tokenizer_test::gpt2_symbol(' '), "\u0120");  // "Ġ"
  EXPECT_EQ(tokenizer_test::gpt2_symbol('\n'), "\u010A");  // "Ċ"
  EXPECT_EQ(tokenizer_test::gpt2_symbol('a'), "a");
}

TEST(TokenizerByteLevel, Gpt2RegexAndMerges) {
  auto tok = gpt2();
  // Words: "the" " cat" "'s" " 12345" " é日本" "\n" "\n" "ok" " the" " 😀!".
  // "\n\n" is split because \s+(?!\S) gives back the last newline before "ok".
  const Ids expected = {116, 257,                       // t he
                        32,  99,  97,  116,             // " cat": no merge with a space
                        262,                            // 's
                        32,  263, 51,  52,  53,         // " " 12 3 4 5
                        32,  259, 261, 0xE6, 0x9C, 0xAC,  // " " é 日 and 本's three bytes
                        10,  10,                        // \n \n
                        111, 107,                       // o k
                        258,                            // " the": " t" + "he"
                        32,  0xF0, 0x9F, 0x98, 0x80, 33};  // " " 😀's four bytes !
  const std::string text = "the cat's 12345 \u00e9\u65e5\u672c\n\nok the \U0001F600!";
  EXPECT_EQ(tok->encode(text, false), expected);
  EXPECT_EQ(tok->decode(expected), text);
  // Trailing spaces stay one word; "  " merges.
  EXPECT_EQ(tok->encode("a   b  ", false), (Ids{97, 265, 32, 98, 265}));
  // No ignore_merges here: "xyz" is spelled out although it is in the vocabulary.
  EXPECT_EQ(tok->encode("xyz", false), (Ids{120, 121, 122}));
}

TEST(TokenizerByteLevel, Gpt2SpecialTokens) {
  auto tok = gpt2();
  EXPECT_EQ(tok->encode("hi<|endoftext|>the", false), (Ids{104, 105, 267, 116, 257}));
  EXPECT_EQ(tok->decode({104, 105, 267, 116, 257}), "hithe");
  EXPECT_EQ(tok->decode({104, 105, 267, 116, 257}, false), "hi<|endoftext|>the");
  EXPECT_EQ(tok->bos_id(), 267);
  EXPECT_EQ(tok->eos_ids(), Ids{267});
  EXPECT_FALSE(tok->add_bos_by_default());  // GPT-2's post-processor adds nothing
  EXPECT_EQ(tok->encode("hi", true), (Ids{104, 105}));  // so neither does a sequence's start
  EXPECT_EQ(tok->vocab_size(), 269);
}

TEST(TokenizerByteLevel, Llama3RegexAndMerges) {
  auto tok = llama3();
  // Words: "Hello" " WORLD" " it" "'S" (contractions ignore case) "ok" " " "123" "45"
  // "\n\n" (\s*[\r\n]+) " " " x" <|eot_id|> "the".
  const Ids expected = {267,                            // BOS from the post-processor
                        72,  101, 108, 108, 111,        // Hello
                        32,  87,  79,  82,  76, 68,     // " WORLD"
                        32,  105, 116,                  // " it"
                        39,  83,                        // 'S: the merge is lowercase "'s"
                        111, 107,                       // ok
                        32,                             // " "
                        263, 51,                        // 12 3
                        52,  53,                        // 4 5
                        264,                            // \n\n
                        32,                             // " "
                        32,  120,                       // " x"
                        268,                            // <|eot_id|>
                        116, 257};                      // t he
  const std::string text = "Hello WORLD it'Sok 12345\n\n  x<|eot_id|>the";
  EXPECT_EQ(tok->encode(text, true), expected);
  EXPECT_EQ(tok->decode(expected, false), "<|endoftext|>" + text);
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_EQ(tok->bos_id(), 267);
  // ignore_merges: a word found whole in the vocabulary is one token.
  EXPECT_EQ(tok->encode("xyz", false), Ids{266});
}

// GLM-4's tokenizer.json: Sequence[ByteLevel, TemplateProcessing("[gMASK] <sop> $A")] (here
// with the fixture's two special tokens standing for [gMASK] and <sop>): both are the prefix.
nlohmann::json glm_style_post_processor(bool token_after_sequence) {
  auto special = [](const char* id) {
    return nlohmann::json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
  };
  nlohmann::json single = {special("<|endoftext|>"), special("<|eot_id|>"),
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}};
  if (token_after_sequence) single.push_back(special("<|eot_id|>"));
  return {{"type", "Sequence"},
          {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}},
                          {{"type", "TemplateProcessing"}, {"single", single}}}}};
}

TEST(TokenizerByteLevel, TemplateOfTwoSpecialTokensIsTheWholePrefix) {
  nlohmann::json j = tokenizer_test::byte_level_tokenizer_json(true);
  j["post_processor"] = glm_style_post_processor(false);
  auto tok = Tokenizer::from_json(j, nlohmann::json::object(), "glm");
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_EQ(tok->encode("ok", true), (Ids{267, 268, 111, 107}));
  EXPECT_EQ(tok->encode("ok", false), (Ids{111, 107}));
  // A template that appends after the sequence would be half-applied: refused.
  j["post_processor"] = glm_style_post_processor(true);
  try {
    Tokenizer::from_json(j, nlohmann::json::object(), "glm");
    ADD_FAILURE() << "accepted a special token after the sequence";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("special tokens after the sequence"), std::string::npos) << e.what();
  }
}

TEST(TokenizerByteLevel, MultiByteUtf8) {
  auto tok = llama3();
  // "é日本": one word of letters; é and 日 merge, 本 stays three bytes.
  EXPECT_EQ(tok->encode("\u00e9\u65e5\u672c", false), (Ids{259, 261, 0xE6, 0x9C, 0xAC}));
  EXPECT_EQ(tok->encode("\U0001F600", false), (Ids{0xF0, 0x9F, 0x98, 0x80}));
}

TEST(TokenizerByteLevel, RoundTrips) {
  const std::vector<std::string> texts = {
      "Hello, world! It's 2024-05-17: 3.14 * 42",
      "  leading and trailing  ",
      "tabs\t\tand\r\nnewlines\n\n\n",
      "caf\u00e9 \u65e5\u672c\u8a9e \u041f\u0440\u0438\u0432\u0435\u0442 \U0001F600\U0001F389",
      "I'LL we've they'd",
      "",
  };
  for (const auto& tok : {gpt2(), llama3()}) {
    for (const std::string& text : texts) EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
  }
}

TEST(TokenizerByteLevel, InvalidUtf8DecodesToReplacementCharacter) {
  auto tok = gpt2();
  EXPECT_EQ(tok->decode({97, 0xE6, 0x97, 98}), "a\uFFFDb");
}

TEST(TokenizerByteLevel, EncodesALongTextQuickly) {
  auto tok = llama3();
  std::string text;
  while (text.size() < 100000) text += "the cat's 12345 \u00e9\u65e5\u672c\n\nok the \U0001F600! ";
  const auto start = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 32000u);
  EXPECT_LT(seconds, 0.5);
  EXPECT_EQ(tok->decode(ids), text);
}

}  // namespace
}  // namespace kvb
