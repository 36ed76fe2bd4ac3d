// RULER's common words extraction (scripts/data/synthetic/common_words_extraction.py): a
// numbered list where 10 words appear 30 times and the others 3 times (6 and 1 below 4096
// tokens); the model must list the 10 most common. One solved example precedes the task.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

constexpr int kCommon = 10;

struct Frequencies {
  int common, uncommon;
};

RulerPrompt cwe_prompt() {
  RulerPrompt p;
  p.intro = "Below is a numbered list of words. In these words, some appear more often than "
            "others. Memorize the ones that appear most often.\n";
  p.question = "Question: What are the 10 most common words in the above list?";
  p.answer_prefix = " Answer: The top 10 words that appear most often in the list are:";
  return p;
}

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i ? " " : "") + std::to_string(i + 1) + ". " + words[i];
  return out;
}

// The first kCommon of `words` repeated f.common times, the rest f.uncommon times, shuffled.
std::string word_list(const std::vector<std::string>& words, Frequencies f, uint64_t seed) {
  std::vector<std::string> list;
  for (size_t i = 0; i < words.size(); ++i)
    for (int r = 0; r < (int(i) < kCommon ? f.common : f.uncommon); ++r) list.push_back(words[i]);
  std::mt19937_64 rng(seed);
  portable_shuffle(list, rng);
  return numbered(list);
}

// common_words_extraction.py's sizing: tokens per word from a probe of 4096 words, bounds
// [10, max(int(context_length // per_word) * 2, 20)], and a step of 10 words.
constexpr int64_t kProbeWords = 4096;
constexpr int64_t kStep = 10;

class CommonWords : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    const WordLists lists = WordLists::load(params_.wordlist_dir);
    std::set<std::string> unique(lists.nouns.begin(), lists.nouns.end());
    unique.insert(lists.adjectives.begin(), lists.adjectives.end());
    unique.insert(lists.verbs.begin(), lists.verbs.end());
    const std::vector<std::string> pool(unique.begin(), unique.end());
    std::optional<int64_t> task_size;  // generator ruler: the task's size, from a probe sample
    if (ruler_generator()) {
      std::mt19937_64 probe_rng(probe_seed(seed));
      task_size = ruler_size(tokenizer, draw_record(probe_rng, pool));
    }
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const CweRecord r = draw_record(rng, pool);
      auto render = [&](int64_t n) { return this->render(r, n); };
      std::string text =
          task_size ? ruler_sample(tokenizer, *task_size, kStep, render, /*min_n=*/kCommon).text
                    : kvbench_v1_fit(tokenizer, r);
      out.push_back(make_sample("cwe", i, std::move(text),
                                std::vector<std::string>(r.words.begin(), r.words.begin() + kCommon),
                                json::object(), question_tail(cwe_prompt())));
    }
    return out;
  }

 private:
  // A permutation of the pool: the task takes a prefix (its first 10 are the common words
  // whatever the size), the example takes words from the far end.
  struct CweRecord {
    std::vector<std::string> words;  // the task's candidates, in order
    std::string shown_example;       // the solved example and its newline
    uint64_t list_seed = 0;
    size_t pool = 0;                 // distinct words of the lists
  };

  bool short_context() const { return params_.context_length < 4096; }
  // RULER's frequencies for short contexts, where 30 repeats would not fit.
  Frequencies frequencies() const { return short_context() ? Frequencies{6, 1} : Frequencies{30, 3}; }

  CweRecord draw_record(std::mt19937_64& rng, const std::vector<std::string>& pool) const {
    const Frequencies example_f = short_context() ? Frequencies{3, 1} : Frequencies{10, 3};
    const size_t example_words = short_context() ? 20 : 40;
    CweRecord r;
    r.pool = pool.size();
    r.words = pool;
    portable_shuffle(r.words, rng);
    const std::vector<std::string> example(r.words.end() - long(example_words), r.words.end());
    r.words.resize(r.words.size() - example_words);
    const uint64_t example_seed = rng();
    r.list_seed = rng();
    const std::vector<std::string> example_answer(example.begin(), example.begin() + kCommon);
    r.shown_example = compose(cwe_prompt(), word_list(example, example_f, example_seed)) + " " +
                      numbered(example_answer) + "\n";
    return r;
  }

  // The prompt with `total` words (RULER's num_words), the first 10 the common ones.
  std::string render(const CweRecord& r, int64_t total) const {
    if (total > int64_t(r.words.size()))
      refuse_beyond_lists(r, "RULER's size search tries " + std::to_string(total) + " words, more");
    const std::vector<std::string> words(r.words.begin(), r.words.begin() + long(total));
    return r.shown_example + compose(cwe_prompt(), word_list(words, frequencies(), r.list_seed));
  }

  // RULER draws beyond its three lists from its json/english_words.json (an 8.5 MB
  // dictionary); kvbench has no such list, and a prompt short of context_length would be
  // silently easier.
  [[noreturn]] void refuse_beyond_lists(const CweRecord& r, const std::string& what) const {
    throw InputError("cwe: context_length " + std::to_string(params_.context_length) + ": " +
                     what + " than the " + std::to_string(r.words.size()) +
                     " that wordlist_dir's three lists hold beside the example's " +
                     std::to_string(r.pool - r.words.size()) +
                     " (RULER then draws from its json/english_words.json, which kvbench does "
                     "not read); use a smaller context_length");
  }

  int64_t ruler_size(const Tokenizer& tokenizer, const CweRecord& probe) const {
    if (int64_t(probe.words.size()) < kProbeWords)
      throw InputError("cwe: RULER sizes the task on a probe of " + std::to_string(kProbeWords) +
                       " words; wordlist_dir's three lists hold " + std::to_string(probe.pool) +
                       " distinct ones, " + std::to_string(probe.pool - probe.words.size()) +
                       " of them for the example (RULER then draws from its "
                       "json/english_words.json, which kvbench does not read)");
    const double per_word =
        double(ruler_tokens(tokenizer, render(probe, kProbeWords))) / double(kProbeWords);
    const int64_t upper = std::max<int64_t>(
        int64_t(std::floor(double(params_.context_length) / per_word)) * 2, 2 * kStep);
    return ruler_binary_search(kStep, upper, [&](int64_t n) {
      return ruler_fits(tokenizer, render(probe, n));
    });
  }

  // kvbench_v1: each sample filled on its own with the common words and n others; every word
  // fitting with room to spare is refused as above.
  std::string kvbench_v1_fit(const Tokenizer& tokenizer, const CweRecord& r) const {
    const int64_t others = int64_t(r.words.size()) - kCommon;
    FittedText fitted = fit_prompt(tokenizer, std::min<int64_t>(others, params_.context_length),
                                   [&](int64_t n) { return render(r, kCommon + n); });
    if (fitted.n == others) refuse_beyond_lists(r, "it takes more words");
    return std::move(fitted.text);
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "cwe", "RULER common words extraction: the 10 most frequent words of a numbered list",
    RulerNeeds{.words = true, .default_max_new_tokens = 120},
    [](const RulerParams& p) { return std::make_unique<CommonWords>(p); }));

}  // namespace
}  // namespace kvb
