// RULER's frequent words extraction (scripts/data/synthetic/freq_words_extraction.py): coded
// 6-letter words with Zipf (alpha = 2) counts; the model must name the three most frequent,
// the top-ranked "word" being "..." noise to ignore.
#include <algorithm>
#include <optional>
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

// What one sample draws: its vocabulary and the seed of its shuffle.
struct FweRecord {
  std::vector<std::string> vocab;
  uint64_t text_seed = 0;
};

class FrequentWords : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::optional<int64_t> task_size;  // generator ruler: the task's size, from a probe sample
    if (ruler_generator()) {
      std::mt19937_64 probe_rng(probe_seed(seed));
      task_size = ruler_size(tokenizer, draw_record(probe_rng));
    }
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const FweRecord r = draw_record(rng);
      auto render = [&](int64_t n) { return this->render(r, n); };
      std::string text = task_size ? ruler_sample(tokenizer, *task_size, ruler_step(), render).text
                                   : fit_prompt(tokenizer, params_.context_length, render).text;
      out.push_back(make_sample("fwe", i, std::move(text), {r.vocab[1], r.vocab[2], r.vocab[3]},
                                json::object(), question_tail(fwe_prompt())));
    }
    return out;
  }

 private:
  FweRecord draw_record(std::mt19937_64& rng) const {
    FweRecord r;
    r.vocab = coded_vocab(rng);
    r.text_seed = rng();
    return r;
  }

  // The prompt with the coded text of Zipf parameter n.
  std::string render(const FweRecord& r, int64_t n) const {
    return compose(fwe_prompt(), coded_text(r.vocab, n, r.text_seed));
  }

  // freq_words_extraction.py's room for the prompt (max_seq_length less tokens_to_generate)
  // and its step, a 32nd of it.
  int64_t room() const { return params_.context_length - params_.max_new_tokens; }
  int64_t ruler_step() const { return room() / 32; }

  // freq_words_extraction.py's size: from room / 6 words up by steps while the probe's prompt
  // is shorter than the room, then one step back.
  int64_t ruler_size(const Tokenizer& tokenizer, const FweRecord& probe) const {
    if (ruler_step() < 1)
      throw InputError("context_length " + std::to_string(params_.context_length) +
                       " leaves less than 32 tokens beside max_new_tokens " +
                       std::to_string(params_.max_new_tokens) + " (fwe grows in 32nds of that)");
    int64_t n = room() / 6;
    while (ruler_tokens(tokenizer, render(probe, n)) < room()) n += ruler_step();
    return n - ruler_step();
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "fwe", "RULER frequent words extraction: the 3 most frequent coded words (Zipf, alpha 2)",
    RulerNeeds{.default_max_new_tokens = 50},
    [](const RulerParams& p) { return std::make_unique<FrequentWords>(p); }));

}  // namespace
}  // namespace kvb
