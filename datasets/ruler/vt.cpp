// RULER's variable tracking (scripts/data/synthetic/variable_tracking.py): a chain
// "VAR A = 12345", "VAR B = VAR A", ... (1 chain, 4 hops) hidden in noise; the model must name
// every variable holding the value. One solved in-context example precedes the task, as in
// RULER (generator ruler: RULER's; kvbench_v1: kvbench's before 2026-11-29).
#include <algorithm>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

constexpr int kHops = 4;
constexpr int64_t kExampleNoise = 10;  // kvbench_v1: noise sentences of the worked example
constexpr int64_t kRulerExampleTokens = 500;  // RULER sizes its worked example to 500 tokens

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

class VariableTracking : public RulerTask {
 public:
  using RulerTask::RulerTask;

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const bool ruler = ruler_generator();
    const RulerExample shape = ruler ? ruler_example(tokenizer, rng()) : RulerExample{};
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const Chain example = draw_chain(rng, ruler ? 3 : 5, ruler);
      const Chain chain = draw_chain(rng, 5, ruler);
      const uint64_t places_seed = ruler ? rng() : 0;
      const std::string shown_example =
          ruler ? solved_example(example, ruler_chain_context(example, shape.noise, shape.seed))
                : solved_example(example, chain_context(example, kExampleNoise));
      auto render = [&](int64_t n) {
        // The example goes inside the user turn, before the task (RULER).
        return compose(vt_prompt(chain.value),
                       ruler ? ruler_chain_context(chain, n, places_seed) : chain_context(chain, n),
                       shown_example + (ruler ? "\n" : "\n\n"));
      };
      auto [n, text] = fit_prompt(tokenizer, params_.context_length, render);
      // Each line's place in percent of the n noise units (line j before the j-th place).
      const json depths =
          ruler ? json(ruler_position_percents(places_seed, n, int(chain.lines.size())))
                : json(chain.depths);
      out.push_back(make_sample("vt", i, std::move(text), chain.vars,
                                {{"depths", depths}, {"value", chain.value}},
                                question_tail(vt_prompt(chain.value))));
    }
    return out;
  }

 private:
  // The worked example's noise units and the seed of its lines' places: RULER builds it once,
  // as large as fits kRulerExampleTokens (no BOS, no answer), then gives each sample new names
  // and a new value in it.
  struct RulerExample {
    int64_t noise = 0;
    uint64_t seed = 0;
  };
  RulerExample ruler_example(const Tokenizer& tokenizer, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    const Chain sized = draw_chain(rng, 3, /*ruler=*/true);
    const uint64_t places = rng();
    auto render = [&](int64_t n) { return unwrapped(sized, ruler_chain_context(sized, n, places)); };
    try {
      return {fit_to_tokens(tokenizer, kRulerExampleTokens, kRulerExampleTokens, render,
                            /*count_bos=*/false).n,
              places};
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
