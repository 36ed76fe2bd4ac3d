// RULER's needle-in-a-haystack family (scripts/data/synthetic/niah.py): needles
// "One of the special magic {numbers|words|uuids} for {key} is: {value}." hidden in a noise,
// essay or distractor-needle haystack; the model must return the values of the asked keys.
#include <algorithm>
#include <optional>

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

// What one sample draws before its size is known, so that every candidate size holds the
// same needles (distractors come from their own stream, `haystack_seed`).
struct NiahRecord {
  std::vector<std::string> keys, needles, queries, answers;
  std::vector<std::vector<std::string>> values;  // per key
  Placement place;
  uint64_t haystack_seed = 0;
};

class Niah : public RulerTask {
 public:
  Niah(const std::string& name, const NiahSpec& spec, const RulerParams& p)
      : RulerTask(p), name_(name), spec_(spec) {}

  std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    WordLists words;
    if (!params_.wordlist_dir.empty()) words = WordLists::load(params_.wordlist_dir);
    EssayWords essay;
    if (spec_.haystack == "essay") essay = EssayWords::load(params_.haystack_file);
    const Resources res{tokenizer, words, essay};
    std::optional<int64_t> task_size;  // generator ruler: the task's size, from a probe sample
    if (ruler_generator()) {
      std::mt19937_64 probe_rng(probe_seed(seed));
      const NiahRecord probe = draw_record(probe_rng, words);
      const RulerPrompt prompt = sized_prompt(tokenizer, probe);
      auto render = [&](int64_t n) { return this->render(res, probe, prompt, n); };
      task_size = ruler_task_size(tokenizer, ruler_step(), params_.context_length, render, [&](int64_t n) {
        return fits(tokenizer, probe, prompt, render(n));
      });
    }
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i)
      for (Sample& s : one_record(res, draw_record(rng, words), i, task_size))
        out.push_back(std::move(s));
    return out;
  }

 private:
  struct Resources {
    const Tokenizer& tokenizer;
    const WordLists& words;
    const EssayWords& essay;
  };

  // niah.py's step (`incremental`): 500 essay words, 25 lines of noise or distractor needles,
  // 5 lines where context_length < 4096.
  int64_t ruler_step() const {
    if (spec_.haystack == "essay") return 500;
    return params_.context_length < 4096 ? 5 : 25;
  }

  NiahRecord draw_record(std::mt19937_64& rng, const WordLists& words) const {
    NiahRecord r;
    while (int(r.keys.size()) < spec_.num_keys) {
      std::string key = random_value(rng, spec_.key_kind, &words);
      if (std::find(r.keys.begin(), r.keys.end(), key) != r.keys.end()) continue;  // distinct
      r.keys.push_back(key);
      r.values.emplace_back();
      for (int v = 0; v < spec_.num_values; ++v) {
        r.values.back().push_back(random_value(rng, spec_.value_kind, &words));
        r.needles.push_back(needle_text(spec_.value_kind, key, r.values.back().back()));
      }
    }
    portable_shuffle(r.needles, rng);
    r.place.depths = draw_depths(rng, int(r.needles.size()));
    for (int64_t k : sample_indices(rng, spec_.num_keys, spec_.num_queries)) {
      r.queries.push_back(r.keys[size_t(k)]);
      for (const std::string& v : r.values[size_t(k)]) r.answers.push_back(v);
    }
    r.haystack_seed = rng();
    // RULER's line haystacks place the needles before units drawn at random for each size.
    r.place.random = ruler_generator() && spec_.haystack != "essay";
    r.place.seed = r.place.random ? rng() : 0;
    return r;
  }

  RulerPrompt asking(const NiahRecord& r, size_t k) const {
    return niah_prompt(spec_.value_kind, r.keys[k], r.values[k].size() == 1);
  }

  // The prompt the sample is sized with: RULER's joint question, or with separate questions the
  // longest (generator ruler: every question must fit; kvbench_v1 sized with the first key's).
  RulerPrompt sized_prompt(const Tokenizer& tokenizer, const NiahRecord& r) const {
    if (params_.queries != "separate")
      return niah_prompt(spec_.value_kind, join_queries(r.queries), r.answers.size() == 1);
    return asking(r, ruler_generator() ? longest_question(tokenizer, r) : 0);
  }

  std::string render(const Resources& res, const NiahRecord& r, const RulerPrompt& prompt,
                     int64_t n) const {
    return compose(prompt, haystack(n, r, res.words, res.essay));
  }

  // Generator ruler's rule for a prompt; with separate questions every key's must fit (a
  // question's first tokens may merge with the context's).
  bool fits(const Tokenizer& tokenizer, const NiahRecord& r, const RulerPrompt& sized,
            const std::string& text) const {
    if (params_.queries == "separate") return every_question_fits(tokenizer, text, sized, r);
    return ruler_fits(tokenizer, text);
  }

  // Sample `index`: RULER's one question, or with `queries: separate` one question per key
  // ("<task>-<index>.q<k>", context "<task>-<index>"). Generator ruler: from the task's size
  // down by whole steps until it fits; kvbench_v1: filled to context_length on its own.
  std::vector<Sample> one_record(const Resources& res, const NiahRecord& r, int index,
                                 std::optional<int64_t> task_size) const {
    const bool separate = params_.queries == "separate";
    const RulerPrompt prompt = sized_prompt(res.tokenizer, r);
    auto render = [&](int64_t n) { return this->render(res, r, prompt, n); };
    // kvbench_v1's step of n: one noise sentence, one essay word, or one distractor needle.
    const int64_t max_n =
        spec_.haystack == "needle" ? params_.context_length / 8 : params_.context_length;
    auto [n, text] =
        task_size ? ruler_sample(*task_size, ruler_step(), render,
                                 [&](const std::string& t) { return fits(res.tokenizer, r, prompt, t); })
                  : fit_prompt(res.tokenizer, max_n, render);
    const json placed = r.place.percents(n, r.needles.size());
    json meta = {{"depths", placed}, {"queries", r.queries}};
    if (placed.size() == 1)  // one needle: a heatmap coordinate
      meta["depth"] = placed[0].get<double>() / 100.0;
    const std::string tail = question_tail(prompt);
    if (!separate) return {make_sample(name_, index, std::move(text), r.answers, meta, tail)};
    // Separate: the same context (with the intro every key's question has), then each key's
    // own question.
    const std::string context = text.substr(0, text.size() - tail.size());
    std::vector<Sample> out;
    for (size_t k = 0; k < r.keys.size(); ++k) {
      const RulerPrompt asked = asking(r, k);
      if (asked.intro != prompt.intro) throw std::logic_error(name_ + ": intros differ");
      const std::string question = question_tail(asked);
      Sample s = make_sample(name_, index, context + question, r.values[k],
                             {{"depths", placed}, {"queries", {r.keys[k]}}}, question);
      s.id += ".q" + std::to_string(k + 1);
      s.context_id = name_ + "-" + std::to_string(index);
      out.push_back(std::move(s));
    }
    return out;
  }

  // The key whose question (its tail, after the context) has the most tokens.
  size_t longest_question(const Tokenizer& tokenizer, const NiahRecord& r) const {
    size_t best = 0, most = 0;
    for (size_t k = 0; k < r.keys.size(); ++k) {
      const size_t tokens = tokenizer.encode(question_tail(asking(r, k)), false).size();
      if (tokens > most) most = tokens, best = k;
    }
    return best;
  }

  // Whether `text`'s context followed by each key's question fits (the sizing rule of
  // generator ruler: no BOS, max_new_tokens beside it).
  bool every_question_fits(const Tokenizer& tokenizer, const std::string& text,
                           const RulerPrompt& sized, const NiahRecord& r) const {
    const std::string context = text.substr(0, text.size() - question_tail(sized).size());
    for (size_t k = 0; k < r.keys.size(); ++k)
      if (!ruler_fits(tokenizer, context + question_tail(asking(r, k)))) return false;
    return true;
  }

  std::string haystack(int64_t n, const NiahRecord& r, const WordLists& words,
                       const EssayWords& essay) const {
    const std::vector<std::string>& needles = r.needles;
    const Placement& place = r.place;
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
          spec_.haystack == "needle" ? distractor_needles(n, r.keys, r.haystack_seed, words)
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
    return needle_haystack(n, needles, place.depths, r.keys, r.haystack_seed, words);
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
