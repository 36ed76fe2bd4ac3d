#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "training/bpe_vocabulary.h"
#include "training/retrieval_episodes.h"

namespace kvb {
namespace {

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer;
  EpisodeSources sources;
};

// A tokenizer learnt from a little task text; the sources from ../shared.
bool make_fixture(Fixture* f) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) return false;
  f->sources = {shared + "/data/wordlists", shared + "/data/haystack/PaulGrahamEssays.json"};
  std::vector<std::string> corpus(20, "One of the special magic numbers for the key is: 1. The grass is green.");
  f->tokenizer = Tokenizer::from_json(learn_bpe_tokenizer(corpus, 100), bpe_tokenizer_config(), "<test>");
  return true;
}

#define KVB_REQUIRE_SHARED(f) \
  Fixture f;                  \
  if (!make_fixture(&f))      \
  GTEST_SKIP() << "skipped: " << test::shared_absent("${SHARED} (word lists, essays)")

TEST(RetrievalEpisodes, DocumentsEndWithTheAnswerTheDatasetExpects) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 1);
  for (const char* task : {"passkey", "niah_single_1", "niah_multikey_2"}) {
    const EpisodeSampler::Document d = sampler.document(task, 512);
    EXPECT_EQ(d.ids.front(), f.tokenizer->bos_id());
    EXPECT_EQ(d.ids.back(), f.tokenizer->eos_ids()[0]);
    const std::vector<int> answer(d.ids.begin() + d.answer_begin, d.ids.end() - 1);
    const std::string text = f.tokenizer->decode(answer);
    EXPECT_FALSE(text.empty()) << task;
    EXPECT_TRUE(std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(uint8_t(c)) || c == ' '; }))
        << task << ": " << text;
    EXPECT_LE(int64_t(d.ids.size()), 512 + 48) << task;
  }
}

TEST(RetrievalEpisodes, BatchesPackDocumentsWithAlignedTargetsAndWeights) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 2);
  EpisodeMix mix{.length = 512, .min_doc = 96, .max_doc = 300,
                 .task_weights = {{"repeat", 1.0}, {"passkey", 1.0}, {"niah_single_1", 1.0}}};
  const EpisodeBatch b = sampler.batch(mix, 3);
  ASSERT_EQ(b.inputs.sizes(), (at::IntArrayRef{3, 512}));
  for (const at::Tensor& t : {b.targets, b.weights, b.doc, b.answer_kind})
    EXPECT_EQ(t.sizes(), b.inputs.sizes());
  // Targets are the inputs shifted by one.
  EXPECT_TRUE(at::equal(b.targets.narrow(1, 0, 511), b.inputs.narrow(1, 1, 511)));
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_GE(b.kinds[size_t(r)].size(), 2u) << "several documents per row";
    const at::Tensor doc = b.doc[r];
    EXPECT_TRUE((doc.narrow(0, 1, 511) >= doc.narrow(0, 0, 511)).all().item<bool>());
  }
  // Answers weigh 1; <s> targets (a new document's first token) weigh 0.
  EXPECT_TRUE(((b.answer_kind >= 0) == (b.weights == 1.0f)).all().item<bool>());
  EXPECT_TRUE((b.weights.masked_select(b.targets == f.tokenizer->bos_id()) == 0).all().item<bool>());
}

TEST(RetrievalEpisodes, RepeatDocumentsRepeatTheirFirstSpan) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 3);
  const EpisodeSampler::Document d = sampler.document("repeat", 100);
  const int64_t span = d.answer_begin - 1;
  ASSERT_GE(span, 8);
  for (size_t i = size_t(d.answer_begin); i + 1 < d.ids.size(); ++i)
    EXPECT_EQ(d.ids[i], d.ids[i - size_t(span)]);
}

}  // namespace
}  // namespace kvb
