#include <gtest/gtest.h>

#include <algorithm>

#include "tests/test_util.h"
#include "engine/common/error.h"
#include "training/batch_stream.h"
#include "training/bpe_vocabulary.h"
#include "training/retrieval_episodes.h"
#include "training/tiny_trainer.h"

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
  std::vector<std::string> corpus(
      20, "One of the special magic numbers for the key is: 1. The grass is green. Some special "
          "magic numbers are hidden within the following text. The special magic number for the "
          "key mentioned in the provided text is 1. Remember 1. Repeat it:");
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
    ASSERT_EQ(d.answers.size(), 1u) << task;
    EXPECT_EQ(d.answers[0].second, int64_t(d.ids.size())) << task;  // through </s>
    const std::vector<int> answer(d.ids.begin() + d.answers[0].first, d.ids.end() - 1);
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
  ASSERT_EQ(d.answers.size(), 1u);
  const int64_t span = d.answers[0].first - 1;
  ASSERT_GE(span, 8);
  for (size_t i = size_t(d.answers[0].first); i + 1 < d.ids.size(); ++i)
    EXPECT_EQ(d.ids[i], d.ids[i - size_t(span)]);
}

// The text of a document's token range, leading spaces dropped.
std::string span_text(const Tokenizer& t, const EpisodeSampler::Document& d,
                      std::pair<int64_t, int64_t> span) {
  std::string text = t.decode(std::vector<int>(d.ids.begin() + span.first, d.ids.begin() + span.second));
  return text.substr(std::min(text.size(), text.find_first_not_of(' ')));
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(uint8_t(c)); });
}

// Every copy after the first is an answer, the first copy is not, and the document fills the
// length asked for with noise between them.
TEST(RetrievalEpisodes, DigitRepeatsAnswerEveryLaterCopy) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 4);
  for (int64_t tokens : {64, 300}) {
    const EpisodeSampler::Document d = sampler.document("repeat_digits", tokens);
    ASSERT_GE(d.answers.size(), 1u);
    ASSERT_LE(d.answers.size(), 3u);
    const std::string digits = span_text(*f.tokenizer, d, d.answers[0]);
    EXPECT_TRUE(all_digits(digits)) << digits;
    for (const auto& span : d.answers) EXPECT_EQ(span_text(*f.tokenizer, d, span), digits);
    const std::string before = f.tokenizer->decode(std::vector<int>(d.ids.begin(), d.ids.begin() + d.answers[0].first));
    EXPECT_NE(before.find("Remember " + digits + "."), std::string::npos) << before;
    EXPECT_LE(int64_t(d.ids.size()), tokens);
    EXPECT_GE(int64_t(d.ids.size()), tokens * 3 / 4) << "noise fills the document";
  }
}

// Multi-query recall: one answer per needle, each a 7-digit value that a needle of the same
// document holds, asked in niah's wording.
TEST(RetrievalEpisodes, MqarAsksForEveryNeedle) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 5);
  const EpisodeSampler::Document d = sampler.document("mqar", 600);
  ASSERT_EQ(d.answers.size(), 6u);  // 600 / 96
  const std::string text = f.tokenizer->decode(d.ids);
  for (const auto& span : d.answers) {
    const std::string value = span_text(*f.tokenizer, d, span);
    EXPECT_EQ(value.size(), 7u) << value;
    EXPECT_TRUE(all_digits(value)) << value;
    EXPECT_NE(text.find(" is: " + value + "."), std::string::npos) << "no needle holds " << value;
    EXPECT_NE(text.find(" mentioned in the provided text is " + value + "."), std::string::npos);
  }
  EXPECT_LE(int64_t(d.ids.size()), 600);
  // In a batch (the row's rest filled with copying), exactly the answers' tokens weigh 1, the
  // values' tokens marked mqar.
  EpisodeMix mix{.length = 700, .min_doc = 500, .max_doc = 600, .task_weights = {{"mqar", 1.0}}};
  const EpisodeBatch b = sampler.batch(mix, 1);
  ASSERT_EQ(b.kinds[0].front(), "mqar");
  const int64_t mqar = std::find(b.kind_names.begin(), b.kind_names.end(), "mqar") - b.kind_names.begin();
  EXPECT_TRUE(((b.answer_kind >= 0) == (b.weights == 1.0f)).all().item<bool>());
  const int64_t answered = (b.answer_kind == mqar).sum().item<int64_t>();
  EXPECT_EQ(answered % 7, 0);
  EXPECT_GE(answered, 7 * 5);
}

TEST(RetrievalEpisodes, PasskeyDoorsAskOneOfThreeDoors) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 6);
  const EpisodeSampler::Document d = sampler.document("passkey_doors", 512);
  ASSERT_EQ(d.answers.size(), 1u);
  const std::string text = f.tokenizer->decode(d.ids);
  EXPECT_NE(text.find(" door"), std::string::npos) << text.substr(0, 300);
  EXPECT_TRUE(all_digits(span_text(*f.tokenizer, d, {d.answers[0].first, int64_t(d.ids.size()) - 1})));
}

// niah_question_first is niah_single_1 with its question before the haystack: the question
// ("What is the special magic number for KEY ...") comes before the essays, and the answer is the
// needle's number, supervised at the document's end as for every task.
TEST(RetrievalEpisodes, QuestionFirstDocumentsAskBeforeTheHaystack) {
  KVB_REQUIRE_SHARED(f);
  EpisodeSampler sampler(*f.tokenizer, f.sources, 8);
  const EpisodeSampler::Document d = sampler.document("niah_question_first", 512);
  ASSERT_EQ(d.answers.size(), 1u);
  const std::string text = f.tokenizer->decode(d.ids);
  const size_t question = text.find("What is the special magic number");
  const size_t needle = text.find("One of the special magic numbers");
  ASSERT_NE(question, std::string::npos) << text.substr(0, 400);
  ASSERT_NE(needle, std::string::npos) << text.substr(0, 400);
  EXPECT_LT(question, needle);
  const std::string answer = span_text(*f.tokenizer, d, {d.answers[0].first, int64_t(d.ids.size()) - 1});
  EXPECT_TRUE(all_digits(answer)) << answer;
  EXPECT_NE(text.find(answer, needle), std::string::npos) << "the answer is the needle's number";
}

// Batches built ahead on threads are the curriculum's, in order: one worker gives exactly the
// single sampler's batches, several give the same batches on every run, and a worker's error
// reaches the trainer.
TEST(BatchStream, WorkersBuildTheCurriculumDeterministically) {
  KVB_REQUIRE_SHARED(f);
  const std::vector<TrainingPhase> phases = {
      {"a", {.length = 128, .min_doc = 40, .max_doc = 100, .task_weights = {{"repeat", 1.0}}}, 2, 3},
      {"b", {.length = 300, .min_doc = 96, .max_doc = 250,
             .task_weights = {{"passkey", 1.0}, {"repeat_digits", 1.0}}}, 2, 4}};
  EpisodeSampler single(*f.tokenizer, f.sources, 7);
  BatchStream one(*f.tokenizer, f.sources, 7, phases, 1);
  BatchStream three(*f.tokenizer, f.sources, 7, phases, 3), again(*f.tokenizer, f.sources, 7, phases, 3);
  bool differs = false;
  for (const TrainingPhase& p : phases)
    for (int64_t i = 0; i < p.steps; ++i) {
      const EpisodeBatch expected = single.batch(p.mix, p.rows);
      const EpisodeBatch got = one.next(), a = three.next(), b = again.next();
      EXPECT_TRUE(at::equal(got.inputs, expected.inputs)) << p.name << " step " << i;
      EXPECT_TRUE(at::equal(got.weights, expected.weights)) << p.name << " step " << i;
      EXPECT_TRUE(at::equal(a.inputs, b.inputs)) << p.name << " step " << i;
      EXPECT_EQ(a.inputs.sizes(), (at::IntArrayRef{p.rows, p.mix.length}));
      differs = differs || !at::equal(a.inputs, got.inputs);
    }
  EXPECT_TRUE(differs) << "other workers draw their own data";
  EXPECT_THROW(one.next(), std::logic_error);  // the curriculum is over

  EpisodeSources missing = f.sources;
  missing.wordlist_dir = "/nonexistent";
  const std::vector<TrainingPhase> mqar = {
      {"m", {.length = 600, .min_doc = 500, .max_doc = 550, .task_weights = {{"mqar", 1.0}}}, 1, 2}};
  BatchStream failing(*f.tokenizer, missing, 7, mqar, 2);
  EXPECT_THROW(failing.next(), InputError);
}

}  // namespace
}  // namespace kvb
