// RULER's variable tracking (scripts/data/synthetic/variable_tracking.py): a chain
// "VAR A = 12345", "VAR B = VAR A", ... (1 chain, 4 hops) hidden in noise; the model must name
// every variable holding the value. One solved in-context example precedes the task, as in
// RULER.
#include <algorithm>

#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"

namespace kvb {
namespace {

constexpr int kHops = 4;
constexpr int64_t kExampleNoise = 10;  // noise sentences of the in-context example

struct Chain {
  std::vector<std::string> vars;   // X0 .. X4, all holding `value`
  std::vector<std::string> lines;  // the assignments in order
  std::string value;
  std::vector<int> depths;         // one per line, ascending
};

std::string random_var(std::mt19937_64& rng) {
  std::string v;
  for (int i = 0; i < 5; ++i) v += char('A' + uniform_below(rng, 26));
  return v;
}

Chain draw_chain(std::mt19937_64& rng) {
  Chain c;
  while (int(c.vars.size()) < kHops + 1) {
    std::string v = random_var(rng);
    if (std::find(c.vars.begin(), c.vars.end(), v) == c.vars.end()) c.vars.push_back(v);
  }
  c.value = std::to_string(uniform_int(rng, 10000, 99998));  // numpy randint(10000, 99999)
  c.lines.push_back("VAR " + c.vars[0] + " = " + c.value);
  for (int j = 0; j < kHops; ++j) c.lines.push_back("VAR " + c.vars[j + 1] + " = VAR " + c.vars[j]);
  c.depths = draw_depths(rng, kHops + 1);
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

std::string chain_context(const Chain& c, int64_t n) {
  std::vector<Insert> ins;
  for (size_t j = 0; j < c.lines.size(); ++j) ins.push_back({depth_position(n, c.depths[j]), c.lines[j]});
  return noise_haystack(n, ins);
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
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const Chain example = draw_chain(rng);
      const Chain chain = draw_chain(rng);
      const std::string shown_example =
          vt_prompt(example.value).compose(chain_context(example, kExampleNoise),
                                           params_.question_position) +
          (params_.question_position == "before" ? " " : "") + join(example.vars, " ");
      auto render = [&](int64_t n) {
        return shown_example + "\n\n" +
               vt_prompt(chain.value).compose(chain_context(chain, n), params_.question_position);
      };
      std::string text = fit_to_tokens(tokenizer, params_.context_length, params_.context_length, render);
      out.push_back(make_sample("vt", i, std::move(text), chain.vars,
                                {{"depths", chain.depths}, {"value", chain.value}},
                                vt_prompt(chain.value).question_tail(params_.question_position)));
    }
    return out;
  }
};

KVB_REGISTER_DATASET(ruler_dataset_info(
    "vt", "RULER variable tracking: 1 chain of 4 hops in noise, name all variables",
    RulerNeeds{.default_max_new_tokens = 30},
    [](const RulerParams& p) { return std::make_unique<VariableTracking>(p); }));

}  // namespace
}  // namespace kvb
