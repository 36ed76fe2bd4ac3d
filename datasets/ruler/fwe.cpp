// RULER's frequent words extraction (scripts/data/synthetic/freq_words_extraction.py): coded
// 6-letter words with Zipf (alpha = 2) counts; the model must name the three most frequent,
// the top-ranked "word" being "..." noise to ignore.
#include <algorithm>
#include <set>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

constexpr int kVocab = 2000;
constexpr double kZeta2 = 1.6449340668482264;  // zeta(2) = pi^2 / 6

RulerPrompt fwe_prompt() {
  RulerPrompt p;
  p.intro = "Read the following coded text and track the frequency of each coded word. Find the "
            "three most frequently appeared coded words. ";
  p.question = "Question: Do not provide any explanation. Please ignore the dots '....'. What are "
               "the three most frequently appeared words in the above coded text?";
  p.answer_prefix = " Answer: According to the coded text above, the three most frequently "
                    "appeared words are:";
  return p;
}

// 2000 distinct random lowercase 6-letter words, sorted then shuffled; rank 1 is "...".
std::vector<std::string> coded_vocab(std::mt19937_64& rng) {
  std::set<std::string> words;
  while (int(words.size()) < kVocab) {
    std::string w;
    for (int i = 0; i < 6; ++i) w += char('a' + uniform_below(rng, 26));
    words.insert(w);
  }
  std::vector<std::string> vocab(words.begin(), words.end());
  portable_shuffle(vocab, rng);
  vocab[0] = "...";
  return vocab;
}

// The word of rank k appears floor(n * k^-2 / zeta(2)) times; all shuffled.
std::string coded_text(const std::vector<std::string>& vocab, int64_t n, uint64_t seed) {
  std::vector<const std::string*> words;
  for (size_t k = 1; k <= vocab.size(); ++k) {
    const int64_t count = int64_t(double(n) * (1.0 / (double(k) * double(k))) / kZeta2);
    if (count == 0) break;  // counts only fall with k
    for (int64_t r = 0; r < count; ++r) words.push_back(&vocab[k - 1]);
  }
  std::mt19937_64 rng(seed);
  portable_shuffle(words, rng);
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + *words[i];
  return out;
}

class FrequentWords : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const std::vector<std::string> vocab = coded_vocab(rng);
      const uint64_t text_seed = rng();
      auto render = [&](int64_t n) {
        return compose(fwe_prompt(), coded_text(vocab, n, text_seed));
      };
      std::string text = fit_prompt(tokenizer, params_.context_length, render).text;
      out.push_back(make_sample("fwe", i, std::move(text), {vocab[1], vocab[2], vocab[3]},
                                json::object(),
                                question_tail(fwe_prompt())));
    }
    return out;
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "fwe", "RULER frequent words extraction: the 3 most frequent coded words (Zipf, alpha 2)",
    RulerNeeds{.default_max_new_tokens = 50},
    [](const RulerParams& p) { return std::make_unique<FrequentWords>(p); }));

}  // namespace
}  // namespace kvb
