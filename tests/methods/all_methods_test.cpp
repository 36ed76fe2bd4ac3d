// Properties every registered method must have, checked on the random-weight model:
// with a budget covering the whole prompt it is Full; with a smaller one it attends to B, or to
// what its own declared budget rule says (MethodInfo::attended).
#include <gtest/gtest.h>

#include "engine/session.h"
#include "methods/method.h"

namespace kvb {
namespace {

std::vector<int> prompt_of_length(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 37 + i / 7) % 250);
  return ids;
}

std::vector<const MethodInfo*> budgeted_methods() {
  std::vector<const MethodInfo*> out;
  for (const MethodInfo* m : method_registry().all())
    if (m->uses_budget) out.push_back(m);
  return out;
}

// Greedy decoding that returns the logits of every step ([steps, V]) and the tokens.
struct Trace {
  std::vector<int> tokens;
  std::vector<at::Tensor> logits;
};

Trace greedy_trace(const LlamaModel& model, const MethodInfo& info, int64_t budget,
                   const std::vector<int>& prompt, int steps) {
  std::unique_ptr<Method> method = info.create(info.normalise_config(json::object(), info.name));
  Session session(model, *method, SessionOptions{.budget = budget});
  Trace t;
  at::Tensor logits = session.prefill(prompt);
  for (int i = 0; i < steps; ++i) {
    t.logits.push_back(logits);
    t.tokens.push_back(argmax_token(logits));
    logits = session.decode(t.tokens.back());
  }
  return t;
}

TEST(AllMethods, EveryMethodRegistersAConfigThatRoundTrips) {
  ASSERT_GE(method_registry().all().size(), 3u);
  for (const MethodInfo* m : method_registry().all()) {
    json defaults = m->normalise_config(json::object(), m->name);
    EXPECT_EQ(m->normalise_config(defaults, m->name), defaults) << m->name;
    EXPECT_FALSE(m->fidelity.empty()) << m->name;
    EXPECT_THROW(m->normalise_config(json{{"no_such_field", 1}}, m->name), InputError) << m->name;
  }
}

TEST(AllMethods, BudgetCoveringThePromptIsIdenticalToFull) {
  auto model = LlamaModel::from_reference("random-tiny");
  const std::vector<int> prompt = prompt_of_length(96);
  const Trace full = greedy_trace(*model, *method_registry().find("full"), 0, prompt, 12);
  for (const MethodInfo* m : budgeted_methods()) {
    // B >= prompt + generated tokens: nothing may be dropped at any step.
    const Trace t = greedy_trace(*model, *m, 96 + 16, prompt, 12);
    EXPECT_EQ(t.tokens, full.tokens) << m->name;
    for (size_t i = 0; i < t.logits.size(); ++i) {
      const double err = (t.logits[i] - full.logits[i]).abs().max().item<double>() /
                         full.logits[i].abs().max().item<double>();
      EXPECT_LT(err, 1e-5) << m->name << " step " << i;
    }
  }
}

// Per decode step 1..steps, the mean over the sparse layers (those the method does not keep
// dense by design) and KV heads of the entries attended at that step.
std::vector<double> attended_per_step(const LlamaModel& model, const MethodInfo& info,
                                      int64_t budget, const std::vector<int>& prompt, int steps) {
  std::unique_ptr<Method> method = info.create(info.normalise_config(json::object(), info.name));
  Session session(model, *method, SessionOptions{.budget = budget});
  session.prefill(prompt);
  const size_t first = size_t(info.dense_layers) * size_t(model.config.num_key_value_heads);
  std::vector<double> out;
  double before = 0;
  for (int t = 0; t < steps; ++t) {
    session.decode(5 + t);
    const AttendedCounts& a = session.attended();
    double total = 0;
    for (size_t i = first; i < a.sum.size(); ++i) total += a.sum[i];
    out.push_back((total - before) / double(a.sum.size() - first));
    before = total;
  }
  return out;
}

double first_step_attended(const LlamaModel& model, const MethodInfo& info, int64_t budget,
                           const std::vector<int>& prompt) {
  return attended_per_step(model, info, budget, prompt, 1)[0];
}

// B, or the method's own rule where it declares one (ClusterKV's recent tokens on top of B,
// Quest's whole pages, InfiniGen's threshold count): the range per KV head at decode step
// `step` with `entries` resident.
AttendedRange expected_attended(const MethodInfo& m, int64_t budget, int64_t entries,
                                int64_t step) {
  if (!m.attended) return {double(budget), double(budget)};
  return m.attended(m.normalise_config(json::object(), m.name), budget, entries, step);
}

// Whether the method's default config refuses `budget` (check_budget's InputError).
bool refuses(const MethodInfo& m, int64_t budget) {
  try {
    m.check_budget(m.normalise_config(json::object(), m.name), budget, m.name);
    return false;
  } catch (const InputError&) {
    return true;
  }
}

TEST(AllMethods, MeasuredBudgetMatchesTheConfiguredOne) {
  auto model = LlamaModel::from_reference("random-tiny");
  const std::vector<int> prompt = prompt_of_length(300);
  for (const MethodInfo* m : budgeted_methods()) {
    int checked = 0;
    for (int64_t budget : {32, 64, 128}) {
      // A budget the defaults refuse with a message (Ada-SnapKV's window 32 needs B > 32) is
      // not run; every method must accept at least two of the three.
      if (refuses(*m, budget)) continue;
      ++checked;
      const double attended = first_step_attended(*model, *m, budget, prompt);
      const AttendedRange rule = expected_attended(*m, budget, 301, 1);
      // Each method declares its slack (e.g. one block of 16 for block-wise eviction).
      EXPECT_GE(attended, rule.fewest - m->budget_tolerance) << m->name << " at budget " << budget;
      EXPECT_LE(attended, rule.most + m->budget_tolerance) << m->name << " at budget " << budget;
    }
    EXPECT_GE(checked, 2) << m->name;
  }
}

// A declared rule holds at every step, not only the first (ClusterKV's grows with the step).
TEST(AllMethods, DeclaredBudgetRulesHoldAtEveryDecodeStep) {
  auto model = LlamaModel::from_reference("random-tiny");
  const std::vector<int> prompt = prompt_of_length(300);
  for (const MethodInfo* m : budgeted_methods()) {
    if (!m->attended) continue;
    const std::vector<double> per_step = attended_per_step(*model, *m, 48, prompt, 20);
    for (size_t t = 0; t < per_step.size(); ++t) {
      const AttendedRange rule = expected_attended(*m, 48, 301 + int64_t(t), int64_t(t) + 1);
      EXPECT_GE(per_step[t], rule.fewest - m->budget_tolerance) << m->name << " step " << t + 1;
      EXPECT_LE(per_step[t], rule.most + m->budget_tolerance) << m->name << " step " << t + 1;
    }
  }
}

TEST(AllMethods, PromptsShorterThanTheBudgetAreNotCompressed) {
  auto model = LlamaModel::from_reference("random-tiny");
  const std::vector<int> prompt = prompt_of_length(40);
  for (const MethodInfo* m : budgeted_methods())
    EXPECT_DOUBLE_EQ(first_step_attended(*model, *m, 64, prompt), 41.0) << m->name;
}

}  // namespace
}  // namespace kvb
