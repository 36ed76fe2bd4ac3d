// RULER's common words extraction (scripts/data/synthetic/common_words_extraction.py): a
// numbered list where 10 words appear 30 times and the others 3 times (6 and 1 below 4096
// tokens); the model must list the 10 most common. One solved example precedes the task.
#include <algorithm>
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

class CommonWords : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    const WordLists lists = WordLists::load(params_.wordlist_dir);
    std::set<std::string> unique(lists.nouns.begin(), lists.nouns.end());
    unique.insert(lists.adjectives.begin(), lists.adjectives.end());
    unique.insert(lists.verbs.begin(), lists.verbs.end());
    const std::vector<std::string> pool(unique.begin(), unique.end());
    // RULER's frequencies for short contexts, where 30 repeats would not fit.
    const bool short_context = params_.context_length < 4096;
    const Frequencies example_f = short_context ? Frequencies{3, 1} : Frequencies{10, 3};
    const size_t example_words = short_context ? 20 : 40;
    const Frequencies f = short_context ? Frequencies{6, 1} : Frequencies{30, 3};
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      // A permutation of the pool: the task takes a prefix (its first 10 are the common
      // words whatever the size), the example takes words from the far end.
      std::vector<std::string> perm = pool;
      portable_shuffle(perm, rng);
      const std::vector<std::string> example(perm.end() - long(example_words), perm.end());
      perm.resize(perm.size() - example_words);
      const uint64_t example_seed = rng(), list_seed = rng();
      const std::vector<std::string> example_answer(example.begin(), example.begin() + kCommon);
      const std::string shown_example =
          compose(cwe_prompt(), word_list(example, example_f, example_seed)) +
          " " + numbered(example_answer);
      auto render = [&](int64_t n) {
        const std::vector<std::string> words(perm.begin(), perm.begin() + kCommon + long(n));
        return shown_example + "\n" +
               compose(cwe_prompt(), word_list(words, f, list_seed));
      };
      const int64_t words_left = int64_t(perm.size()) - kCommon;
      const int64_t max_n = std::min<int64_t>(words_left, params_.context_length);
      FittedText fitted = fit_prompt(tokenizer, max_n, render);
      // Every word fits with room to spare: RULER would then draw all the words from its
      // json/english_words.json (an 8.5 MB dictionary) and fill the context; kvbench has no
      // such list, and a prompt short of context_length would be silently easier.
      if (fitted.n == words_left)
        throw InputError("cwe: context_length " + std::to_string(params_.context_length) +
                         " takes more words than the " + std::to_string(pool.size()) +
                         " distinct ones of wordlist_dir's three lists (RULER then draws from "
                         "its json/english_words.json, which kvbench does not read); use a "
                         "smaller context_length");
      std::string text = std::move(fitted.text);
      out.push_back(make_sample("cwe", i, std::move(text),
                                std::vector<std::string>(perm.begin(), perm.begin() + kCommon),
                                json::object(),
                                question_tail(cwe_prompt())));
    }
    return out;
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "cwe", "RULER common words extraction: the 10 most frequent words of a numbered list",
    RulerNeeds{.words = true, .default_max_new_tokens = 120},
    [](const RulerParams& p) { return std::make_unique<CommonWords>(p); }));

}  // namespace
}  // namespace kvb
