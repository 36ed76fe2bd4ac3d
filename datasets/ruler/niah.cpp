// RULER's needle-in-a-haystack family (scripts/data/synthetic/niah.py): needles
// "One of the special magic {numbers|words|uuids} for {key} is: {value}." hidden in a noise,
// essay or distractor-needle haystack; the model must return the values of the asked keys.
#include <algorithm>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

// One task of the family (RULER's synthetic.yaml).
struct NiahSpec {
  std::string haystack;  // "noise", "essay" or "needle" (distractor needles with other keys)
  std::string key_kind;  // "words" or "uuids"
  std::string value_kind;  // "numbers", "words" or "uuids"
  int num_keys = 1;      // needles with distinct keys
  int num_values = 1;    // values per key (one needle each)
  int num_queries = 1;   // keys asked about
};

std::string needle_text(const std::string& value_kind, const std::string& key,
                        const std::string& value) {
  return "One of the special magic " + value_kind + " for " + key + " is: " + value + ".";
}

// "a", "a and b", "a, b, and c" as RULER joins the queried keys.
std::string join_queries(const std::vector<std::string>& q) {
  if (q.size() == 1) return q[0];
  std::string out;
  for (size_t i = 0; i + 1 < q.size(); ++i) out += (i ? ", " : "") + q[i];
  return out + ", and " + q.back();
}

// RULER singularises its template when exactly one value is asked for.
RulerPrompt niah_prompt(const std::string& kind, const std::string& query, bool singular) {
  const std::string one = kind.substr(0, kind.size() - 1);  // numbers -> number
  RulerPrompt p;
  p.singular = singular;
  if (singular) {
    p.intro = "A special magic " + one + " is hidden within the following text. Make sure to "
              "memorize it. I will quiz you about the " + one + " afterwards.\n";
    p.question = "What is the special magic " + one + " for " + query +
                 " mentioned in the provided text?";
    p.answer_prefix = " The special magic " + one + " for " + query +
                      " mentioned in the provided text is";
  } else {
    p.intro = "Some special magic " + kind + " are hidden within the following text. Make sure "
              "to memorize it. I will quiz you about the " + kind + " afterwards.\n";
    p.question = "What are all the special magic " + kind + " for " + query +
                 " mentioned in the provided text?";
    p.answer_prefix = " The special magic " + kind + " for " + query +
                      " mentioned in the provided text are";
  }
  return p;
}

// Where a sample's needles go: at `depths` (percent; essays, and generator kvbench_v1), or,
// for RULER's line haystacks, before units drawn from `seed` for each haystack size.
struct Placement {
  std::vector<int> depths;
  bool random = false;
  uint64_t seed = 0;

  // The needles as inserts into a haystack of n units: RULER inserts needle k before the k-th
  // largest of its drawn places (random.sample, sorted in reverse, zipped with the needles).
  std::vector<Insert> inserts(int64_t n, const std::vector<std::string>& needles) const {
    const std::vector<int64_t> at = ruler_positions(seed, n, int(needles.size()));
    std::vector<Insert> out;
    for (size_t j = 0; j < at.size(); ++j) out.push_back({at[j], needles[at.size() - 1 - j]});
    return out;
  }
  // Each needle's depth in percent of a haystack of n units, in the needles' order.
  json percents(int64_t n, size_t needles) const {
    if (!random) return depths;
    const std::vector<double> ascending = ruler_position_percents(seed, n, int(needles));
    return json(std::vector<double>(ascending.rbegin(), ascending.rend()));  // as inserts()
  }
};

class Niah : public RulerTask {
 public:
  Niah(const std::string& name, const NiahSpec& spec, const RulerParams& p)
      : RulerTask(p), name_(name), spec_(spec) {}

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    WordLists words;
    if (!params_.wordlist_dir.empty()) words = WordLists::load(params_.wordlist_dir);
    EssayWords essay;
    if (spec_.haystack == "essay") essay = EssayWords::load(params_.haystack_file);
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i)
      for (Sample& s : one_record(tokenizer, rng, i, words, essay)) out.push_back(std::move(s));
    return out;
  }

 private:
  // Sample `index`: RULER's one question, or with `queries: separate` one question per key
  // ("<task>-<index>.q<k>", context "<task>-<index>").
  std::vector<Sample> one_record(const Tokenizer& tokenizer, std::mt19937_64& rng, int index,
                                 const WordLists& words, const EssayWords& essay) const {
    // Everything random is drawn before the size search, so every candidate size holds the
    // same needles; distractors come from their own stream (`haystack_seed`).
    std::vector<std::string> keys, needles;
    std::vector<std::vector<std::string>> values;
    while (int(keys.size()) < spec_.num_keys) {
      std::string key = random_value(rng, spec_.key_kind, &words);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;  // keys distinct
      keys.push_back(key);
      values.emplace_back();
      for (int v = 0; v < spec_.num_values; ++v) {
        values.back().push_back(random_value(rng, spec_.value_kind, &words));
        needles.push_back(needle_text(spec_.value_kind, key, values.back().back()));
      }
    }
    portable_shuffle(needles, rng);
    const std::vector<int> depths = draw_depths(rng, int(needles.size()));
    std::vector<std::string> queries, answers;
    for (int64_t k : sample_indices(rng, spec_.num_keys, spec_.num_queries)) {
      queries.push_back(keys[size_t(k)]);
      for (const std::string& v : values[size_t(k)]) answers.push_back(v);
    }
    const uint64_t haystack_seed = rng();
    // RULER's line haystacks place the needles before units drawn at random for each size.
    const bool random_places = ruler_generator() && spec_.haystack != "essay";
    const uint64_t places_seed = random_places ? rng() : 0;
    const bool separate = params_.queries == "separate";
    const auto asking = [&](size_t k) {
      return niah_prompt(spec_.value_kind, keys[k], values[k].size() == 1);
    };
    // Separate questions: sized with the longest (generator ruler: every question must fit;
    // kvbench_v1 sized with the first key's).
    const RulerPrompt prompt =
        separate ? asking(ruler_generator() ? longest_question(tokenizer, keys.size(), asking) : 0)
                 : niah_prompt(spec_.value_kind, join_queries(queries), answers.size() == 1);
    const Placement place{depths, random_places, places_seed};
    auto render = [&](int64_t n) {
      return compose(prompt, haystack(n, needles, place, keys, haystack_seed, words, essay));
    };
    // One step of n: one noise sentence (a 5-sentence noise unit under generator ruler), one
    // essay word, or one distractor needle.
    const int64_t max_n =
        spec_.haystack == "needle" ? params_.context_length / 8 : params_.context_length;
    auto [n, text] = fit_prompt(tokenizer, max_n, render);
    if (separate && ruler_generator()) {  // a question's first tokens may merge with the context's
      while (n > 0 && !every_question_fits(tokenizer, text, prompt, keys.size(), asking))
        text = render(--n);
      if (!every_question_fits(tokenizer, text, prompt, keys.size(), asking))
        throw InputError("context_length " + std::to_string(params_.context_length) +
                         " is too short for the longest question with max_new_tokens " +
                         std::to_string(params_.max_new_tokens) + " beside it");
    }
    const json placed = place.percents(n, needles.size());
    json meta = {{"depths", placed}, {"queries", queries}};
    if (placed.size() == 1)  // one needle: a heatmap coordinate
      meta["depth"] = placed[0].get<double>() / 100.0;
    const std::string tail = question_tail(prompt);
    if (!separate) return {make_sample(name_, index, std::move(text), answers, meta, tail)};
    // Separate: the same context (with the intro every key's question has), then each key's
    // own question.
    const std::string context = text.substr(0, text.size() - tail.size());
    std::vector<Sample> out;
    for (size_t k = 0; k < keys.size(); ++k) {
      const RulerPrompt asked = asking(k);
      if (asked.intro != prompt.intro) throw std::logic_error(name_ + ": intros differ");
      const std::string question = question_tail(asked);
      Sample s = make_sample(name_, index, context + question, values[k],
                             {{"depths", placed}, {"queries", {keys[k]}}}, question);
      s.id += ".q" + std::to_string(k + 1);
      s.context_id = name_ + "-" + std::to_string(index);
      out.push_back(std::move(s));
    }
    return out;
  }

  // The key whose question (its tail, after the context) has the most tokens.
  size_t longest_question(const Tokenizer& tokenizer, size_t keys,
                          const std::function<RulerPrompt(size_t)>& asking) const {
    size_t best = 0, most = 0;
    for (size_t k = 0; k < keys; ++k) {
      const size_t tokens = tokenizer.encode(question_tail(asking(k)), false).size();
      if (tokens > most) most = tokens, best = k;
    }
    return best;
  }

  // Whether `text`'s context followed by each key's question fits (the sizing rule of
  // generator ruler: no BOS, max_new_tokens beside it).
  bool every_question_fits(const Tokenizer& tokenizer, const std::string& text,
                           const RulerPrompt& sized, size_t keys,
                           const std::function<RulerPrompt(size_t)>& asking) const {
    const std::string context = text.substr(0, text.size() - question_tail(sized).size());
    for (size_t k = 0; k < keys; ++k) {
      const int64_t tokens =
          int64_t(tokenizer.encode(context + question_tail(asking(k)), false).size());
      if (tokens + params_.max_new_tokens > params_.context_length) return false;
    }
    return true;
  }

  std::string haystack(int64_t n, const std::vector<std::string>& needles,
                       const Placement& place, const std::vector<std::string>& keys,
                       uint64_t haystack_seed, const WordLists& words,
                       const EssayWords& essay) const {
    if (spec_.haystack == "essay")
      return essay_haystack(essay, n, [&](int64_t sentences) {
        std::vector<EssayInsert> ins;
        for (size_t k = 0; k < needles.size(); ++k)
          ins.push_back({ruler_generator() ? ruler_depth_index(sentences, place.depths[k])
                                           : depth_position(sentences, place.depths[k]),
                         needles[k]});
        return ins;
      }, /*ruler_join=*/ruler_generator());
    if (place.random) {
      const std::vector<std::string> distractors =
          spec_.haystack == "needle" ? distractor_needles(n, keys, haystack_seed, words)
                                     : std::vector<std::string>();
      return ruler_lines(n, [&](int64_t i) {
        return spec_.haystack == "needle" ? distractors[size_t(i)] : ruler_noise_unit();
      }, place.inserts(n, needles));
    }
    if (spec_.haystack == "noise") {
      std::vector<Insert> ins;
      for (size_t k = 0; k < needles.size(); ++k)
        ins.push_back({depth_position(n, place.depths[k]), needles[k]});
      return noise_haystack(n, ins);
    }
    return needle_haystack(n, needles, place.depths, keys, haystack_seed, words);
  }

  // n needles of other keys (the same kinds), drawn in order from `haystack_seed`.
  std::vector<std::string> distractor_needles(int64_t n, const std::vector<std::string>& keys,
                                              uint64_t haystack_seed,
                                              const WordLists& words) const {
    std::mt19937_64 rng(haystack_seed);
    std::vector<std::string> out;
    for (int64_t i = 0; i < n; ++i) {
      std::string key = random_value(rng, spec_.key_kind, &words);
      while (std::find(keys.begin(), keys.end(), key) != keys.end())
        key = random_value(rng, spec_.key_kind, &words);
      out.push_back(needle_text(spec_.value_kind, key, random_value(rng, spec_.value_kind, &words)));
    }
    return out;
  }

  // kvbench_v1's needle haystack: n distractor needles one per line, the real ones at their
  // depths. The distractors are drawn in order from `haystack_seed`, so a larger n extends a
  // smaller.
  std::string needle_haystack(int64_t n, const std::vector<std::string>& needles,
                              const std::vector<int>& depths, const std::vector<std::string>& keys,
                              uint64_t haystack_seed, const WordLists& words) const {
    const std::vector<std::string> distractors = distractor_needles(n, keys, haystack_seed, words);
    std::string out;
    size_t next = 0;
    for (int64_t i = 0; i <= n; ++i) {
      for (; next < needles.size() && depth_position(n, depths[next]) <= i; ++next)
        out += (out.empty() ? "" : "\n") + needles[next];
      if (i == n) break;
      out += (out.empty() ? "" : "\n") + distractors[size_t(i)];
    }
    return out;
  }

  std::string name_;
  NiahSpec spec_;
};

void register_niah(const std::string& name, const std::string& description, const NiahSpec& spec) {
  RulerNeeds needs;
  needs.essay = spec.haystack == "essay";
  needs.words = spec.key_kind == "words" || spec.value_kind == "words";
  needs.default_max_new_tokens = 128;
  needs.several_keys = spec.num_keys > 1;
  dataset_registry().add(ruler_dataset_info(name, description, needs, [name, spec](const RulerParams& p) {
    return std::make_unique<Niah>(name, spec, p);
  }));
}

// RULER's synthetic.yaml: haystack, key kind, value kind, keys, values per key, queries.
const bool kNiahRegistered = [] {
  register_niah("niah_single_1", "RULER: one word-keyed 7-digit number in noise",
                {"noise", "words", "numbers", 1, 1, 1});
  register_niah("niah_single_2", "RULER: one word-keyed 7-digit number in essays",
                {"essay", "words", "numbers", 1, 1, 1});
  register_niah("niah_single_3", "RULER: one word-keyed uuid in essays",
                {"essay", "words", "uuids", 1, 1, 1});
  register_niah("niah_multikey_1", "RULER: 4 word-keyed numbers in essays, one asked",
                {"essay", "words", "numbers", 4, 1, 1});
  register_niah("niah_multikey_2", "RULER: word-keyed number among word-keyed distractor needles",
                {"needle", "words", "numbers", 1, 1, 1});
  register_niah("niah_multikey_3", "RULER: uuid-keyed uuid among uuid distractor needles",
                {"needle", "uuids", "uuids", 1, 1, 1});
  register_niah("niah_multivalue", "RULER: 4 numbers for one word key in essays, all asked",
                {"essay", "words", "numbers", 1, 4, 1});
  register_niah("niah_multiquery", "RULER: 4 word-keyed numbers in essays, all 4 keys asked",
                {"essay", "words", "numbers", 4, 1, 4});
  return true;
}();

}  // namespace
}  // namespace kvb
