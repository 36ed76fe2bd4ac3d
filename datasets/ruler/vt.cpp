// RULER's variable tracking (scripts/data/synthetic/variable_tracking.py): a chain
// "VAR A = 12345", "VAR B = VAR A", ... (1 chain, 4 hops) hidden in noise; the model must name
// every variable holding the value. One solved in-context example precedes the task, as in
// RULER (generator ruler: RULER's; kvbench_v1: kvbench's before 2026-11-29).
#include <algorithm>
#include <optional>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

constexpr int kHops = 4;
constexpr int64_t kExampleNoise = 10;  // kvbench_v1: noise sentences of the worked example
constexpr int64_t kRulerExampleTokens = 500;  // RULER sizes its worked example to 500 tokens
constexpr int64_t kExampleStep = 5;           // ... in steps of 5 noise units

struct Chain {
  std::vector<std::string> vars;   // X0 .. X4, all holding `value`
  std::vector<std::string> lines;  // the assignments in order
  std::string value;
  std::vector<int> depths;         // kvbench_v1: one per line, ascending
};

std::string random_var(std::mt19937_64& rng, int letters) {
  std::string v;
  for (int i = 0; i < letters; ++i) v += char('A' + uniform_below(rng, 26));
  return v;
}

// A chain of `letters`-letter names. Under generator ruler the later assignments end with a
// space, as RULER writes them ("VAR B = VAR A "), and no depths are drawn (RULER's places are
// drawn per haystack size).
Chain draw_chain(std::mt19937_64& rng, int letters, bool ruler) {
  Chain c;
  while (int(c.vars.size()) < kHops + 1) {
    std::string v = random_var(rng, letters);
    if (std::find(c.vars.begin(), c.vars.end(), v) == c.vars.end()) c.vars.push_back(v);
  }
  c.value = std::to_string(uniform_int(rng, 10000, 99998));  // numpy randint(10000, 99999)
  c.lines.push_back("VAR " + c.vars[0] + " = " + c.value);
  for (int j = 0; j < kHops; ++j)
    c.lines.push_back("VAR " + c.vars[j + 1] + " = VAR " + c.vars[j] + (ruler ? " " : ""));
  if (!ruler) c.depths = draw_depths(rng, kHops + 1);
  return c;
}

RulerPrompt vt_prompt(const std::string& value) {
  RulerPrompt p;
  p.intro = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  p.question = "Question: Find all variables that are assigned the value " + value +
               " in the text above.";
  p.answer_prefix = " Answer: According to the chain(s) of variable assignment in the text above, " +
                    std::to_string(kHops + 1) + " variables are assigned the value " + value +
                    ", they are: ";
  return p;
}

// kvbench_v1's context: n noise sentences, the chain's lines at its depths.
std::string chain_context(const Chain& c, int64_t n) {
  std::vector<Insert> ins;
  for (size_t j = 0; j < c.lines.size(); ++j) ins.push_back({depth_position(n, c.depths[j]), c.lines[j]});
  return noise_haystack(n, ins);
}

// RULER's context: n noise units, line j of the chain before the j-th of its places.
std::string ruler_chain_context(const Chain& c, int64_t n, uint64_t places_seed) {
  const std::vector<int64_t> at = ruler_positions(places_seed, n, int(c.lines.size()));
  std::vector<Insert> ins;
  for (size_t j = 0; j < c.lines.size(); ++j) ins.push_back({at[j], c.lines[j]});
  return ruler_lines(n, [](int64_t) { return ruler_noise_unit(); }, ins);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// What one sample draws: the worked example's chain (new names and value in the example's
// shape) and the task's chain, with the seed of the task's line places (generator ruler).
struct VtRecord {
  Chain example, chain;
  uint64_t places_seed = 0;
};

class VariableTracking : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const bool ruler = ruler_generator();
    const RulerExample shape = ruler ? ruler_example(tokenizer, rng()) : RulerExample{};
    std::optional<int64_t> task_size;  // generator ruler: the task's size, from a probe sample
    if (ruler) {
      std::mt19937_64 probe_rng(probe_seed(seed));
      const VtRecord probe = draw_record(probe_rng);
      // RULER estimates the tokens per unit without the example, then sizes with the
      // example's tokens counted apart (its text as built, before new names and value).
      auto task_alone = [&](int64_t n) { return render(probe, shape, n, /*with_example=*/false); };
      task_size = ruler_task_size(tokenizer, ruler_step(), params_.context_length, task_alone,
                                  [&](int64_t n) {
                                    return ruler_tokens(tokenizer, task_alone(n)) +
                                               shape.tokens + params_.max_new_tokens <=
                                           params_.context_length;
                                  });
    }
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const VtRecord r = draw_record(rng);
      auto render_n = [&](int64_t n) { return render(r, shape, n, true); };
      auto [n, text] =
          task_size ? ruler_sample(tokenizer, *task_size, ruler_step(), render_n)
                    : fit_prompt(tokenizer, params_.context_length, render_n);
      // Each line's place in percent of the n noise units (line j before the j-th place).
      const json depths =
          ruler ? json(ruler_position_percents(r.places_seed, n, int(r.chain.lines.size())))
                : json(r.chain.depths);
      out.push_back(make_sample("vt", i, std::move(text), r.chain.vars,
                                {{"depths", depths}, {"value", r.chain.value}},
                                question_tail(vt_prompt(r.chain.value))));
    }
    return out;
  }

 private:
  // The worked example's noise units and the seed of its lines' places: RULER builds it once
  // (variable_tracking.py's first call, 500 tokens, no BOS, no answer, steps of 5), then gives
  // each sample new names and a new value in it.
  struct RulerExample {
    int64_t noise = 0;
    uint64_t seed = 0;
    int64_t tokens = 0;  // of the example as built, answered (RULER's example_tokens)
  };

  // variable_tracking.py's step: 10 noise units, 5 where context_length < 4096.
  int64_t ruler_step() const { return params_.context_length < 4096 ? 5 : 10; }

  VtRecord draw_record(std::mt19937_64& rng) const {
    const bool ruler = ruler_generator();
    VtRecord r;
    r.example = draw_chain(rng, ruler ? 3 : 5, ruler);
    r.chain = draw_chain(rng, 5, ruler);
    r.places_seed = ruler ? rng() : 0;
    return r;
  }

  // The prompt with n noise units; the example goes inside the user turn, before the task
  // (RULER).
  std::string render(const VtRecord& r, const RulerExample& shape, int64_t n,
                     bool with_example) const {
    const bool ruler = ruler_generator();
    const std::string shown_example =
        ruler ? solved_example(r.example, ruler_chain_context(r.example, shape.noise, shape.seed))
              : solved_example(r.example, chain_context(r.example, kExampleNoise));
    return compose(vt_prompt(r.chain.value),
                   ruler ? ruler_chain_context(r.chain, n, r.places_seed) : chain_context(r.chain, n),
                   with_example ? shown_example + (ruler ? "\n" : "\n\n") : "");
  }

  // RULER's example: its size by the binary search on a probe chain, then the example itself
  // (another chain) from that size down by steps of 5 until it fits.
  RulerExample ruler_example(const Tokenizer& tokenizer, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    const Chain probe = draw_chain(rng, 3, /*ruler=*/true);
    const uint64_t probe_places = rng();
    const Chain example = draw_chain(rng, 3, /*ruler=*/true);
    const uint64_t places = rng();
    auto fits = [&](const std::string& text) {
      return ruler_tokens(tokenizer, text) <= kRulerExampleTokens;
    };
    auto probe_text = [&](int64_t n) {
      return unwrapped(probe, ruler_chain_context(probe, n, probe_places));
    };
    const int64_t size = ruler_task_size(tokenizer, kExampleStep, kRulerExampleTokens, probe_text,
                                         [&](int64_t n) { return fits(probe_text(n)); });
    try {
      const int64_t noise = ruler_sample(size, kExampleStep, [&](int64_t n) {
                              return unwrapped(example, ruler_chain_context(example, n, places));
                            }, fits).n;
      const std::string answered =
          solved_example(example, ruler_chain_context(example, noise, places));
      return {noise, places, ruler_tokens(tokenizer, answered)};
    } catch (const InputError&) {
      throw InputError("vt: RULER's worked example does not fit its " +
                       std::to_string(kRulerExampleTokens) + " tokens in this tokenizer");
    }
  }

  // The example's question, never in a chat template (RULER builds it with the task's own).
  std::string unwrapped(const Chain& example, const std::string& context) const {
    const RulerPrompt p = vt_prompt(example.value);
    return p.user_turn(context, params_.question_position) +
           p.answer_start(params_.question_position);
  }

  // The example as the prompt shows it: its question answered. Under generator ruler with a
  // space before the names and a newline after them (the prompt's "\n" follows), as RULER
  // joins input, " ", the names and "\n".
  std::string solved_example(const Chain& example, const std::string& context) const {
    const std::string asked = unwrapped(example, context);
    if (ruler_generator()) return asked + " " + join(example.vars, " ") + "\n";
    return asked + (params_.question_position == "before" ? " " : "") + join(example.vars, " ");
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "vt", "RULER variable tracking: 1 chain of 4 hops in noise, name all variables",
    RulerNeeds{.default_max_new_tokens = 30},
    [](const RulerParams& p) { return std::make_unique<VariableTracking>(p); }));

}  // namespace
}  // namespace kvb
