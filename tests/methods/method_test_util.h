// Driving a method's hooks directly on hand-built tensors.
#pragma once
#include <gtest/gtest.h>

#include "engine/session.h"
#include "harness/suite/suite.h"
#include "methods/method.h"

namespace kvb::test {

inline std::unique_ptr<Method> make_method(const std::string& name, const json& config = {}) {
  const MethodInfo& info = method_registry().get(name, "test");
  return info.create(info.normalise_config(config.is_null() ? json::object() : config, name));
}

inline MethodContext context(int layers, int heads, int kv_heads, int head_dim, int64_t budget,
                             int64_t prompt_length) {
  return MethodContext{.num_layers = layers, .num_heads = heads, .num_kv_heads = kv_heads,
                       .head_dim = head_dim, .budget = budget, .prompt_length = prompt_length};
}

// The integers a, a+1, ..., b-1 (expected positions).
inline std::vector<int64_t> range(int64_t a, int64_t b) {
  std::vector<int64_t> out;
  for (int64_t i = a; i < b; ++i) out.push_back(i);
  return out;
}

// Unit vector e_i of length d.
inline at::Tensor unit(int64_t i, int64_t d) {
  at::Tensor e = at::zeros({d});
  e[i] = 1.0;
  return e;
}

// The message of the InputError that validating a one-method suite on random-tiny raises.
inline std::string suite_error(const json& method_entry, const json& budgets) {
  json suite = {{"name", "t"}, {"models", {"random-tiny"}}, {"datasets", {"passkey"}},
                {"methods", {method_entry}}, {"budgets", budgets}};
  try {
    parse_suite(suite, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Greedy decoding of `ids` on random-tiny with method `name` (`config`) at `budget` gives Full's
// logits (within 1e-5) and tokens at every one of `steps` steps.
inline void expect_matches_full(const std::string& name, int64_t budget,
                                const std::vector<int>& ids, const json& config = {},
                                int steps = 6) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto full = make_method("full");
  auto method = make_method(name, config);
  SessionOptions options;
  options.budget = budget;
  Session a(*model, *full, SessionOptions{}), b(*model, *method, options);
  at::Tensor la = a.prefill(ids), lb = b.prefill(ids);
  for (int step = 0; step < steps; ++step) {
    ASSERT_LT((la - lb).abs().max().item<double>(), 1e-5) << name << config << " step " << step;
    const int ta = argmax_token(la), tb = argmax_token(lb);
    ASSERT_EQ(ta, tb) << name << config << " step " << step;
    la = a.decode(ta);
    lb = b.decode(tb);
  }
}

}  // namespace kvb::test
