#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "training/bpe_vocabulary.h"

namespace kvb {
namespace {

std::unique_ptr<Tokenizer> learnt(int merges) {
  std::vector<std::string> corpus;
  for (int i = 0; i < 50; ++i)
    corpus.push_back("The grass is green. The sky is blue. The pass key is 71432. VAR ABCDE = 123\n");
  return Tokenizer::from_json(learn_bpe_tokenizer(corpus, merges), bpe_tokenizer_config(), "<test>");
}

std::string piece(const Tokenizer& t, int id) { return t.decode({id}, /*skip_special=*/false); }

TEST(BpeVocabulary, FrequentWordsBecomeSingleTokensAndDigitsNeverMerge) {
  auto t = learnt(200);
  EXPECT_EQ(t->encode("grass", false).size(), 1u);
  EXPECT_EQ(t->encode("sky is", false).size(), 2u);
  EXPECT_EQ(t->encode("The", false).size(), 2u);  // "▁" never merges with a capital
  const std::vector<int> number = t->encode("71432", false);
  ASSERT_EQ(number.size(), 6u);  // "▁" and one token per digit
  for (size_t i = 1; i < number.size(); ++i) EXPECT_EQ(piece(*t, number[i]).size(), 1u);
}

TEST(BpeVocabulary, RoundTripsAnyTextThroughByteFallback) {
  auto t = learnt(200);
  for (const std::string text : {"The sky is blue.", "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 ok", "a\n\nb  c"})
    EXPECT_EQ(t->decode(t->encode(text, true)), text) << text;
}

TEST(BpeVocabulary, APromptEndingInASpaceKeepsItsTokensWhenTheAnswerFollows) {
  auto t = learnt(200);
  const std::vector<int> prompt = t->encode("they are: ", true);
  const std::vector<int> full = t->encode("they are: ABCDE VAR", true);
  ASSERT_GT(full.size(), prompt.size());
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), full.begin()));
  const std::vector<int> key = t->encode("The pass key is", true);
  const std::vector<int> with_answer = t->encode("The pass key is 71432", true);
  EXPECT_TRUE(std::equal(key.begin(), key.end(), with_answer.begin()));
}

TEST(BpeVocabulary, StopsWhenNoPairRepeats) {
  const nlohmann::json j = learn_bpe_tokenizer({"ab"}, 100);
  EXPECT_TRUE(j["model"]["merges"].empty());  // "▁a", "ab" occur once: not worth a token
}

}  // namespace
}  // namespace kvb
