// Runs a method on one model placed on two devices / dtypes with the same inputs and compares
// what comes out: the logits of every step and the entries attended. Used by the CPU bf16 test
// (tests/methods/dtype_test.cpp) and the GPU parity tests (tests/gpu/, label gpu).
#pragma once
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "engine/model/llama_model.h"
#include "engine/session.h"
#include "methods/method.h"
#include "reports/inspect.h"

// A GPU test's first line (tests/gpu/, label gpu): skips, saying so, where LibTorch sees no GPU.
#define KVB_REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "skipped: no GPU (torch::cuda::is_available() is false)"

namespace kvb::test {

inline std::vector<int> parity_prompt(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 37 + i / 7) % 250);
  return ids;
}

// Logits ([V] per step, fp32 on the host) and attended counts of a prefill and `steps` decode
// steps fed fixed tokens (not the argmax: two dtypes may pick different tokens).
struct ParityRun {
  std::vector<at::Tensor> logits;
  AttendedCounts attended;
};

inline ParityRun parity_run(const LlamaModel& model, const MethodInfo& info, int64_t budget,
                            const std::vector<int>& prompt, int steps) {
  std::unique_ptr<Method> method = info.create(info.normalise_config(json::object(), info.name));
  Session session(model, *method, SessionOptions{.budget = info.uses_budget ? budget : 0});
  ParityRun run;
  run.logits.push_back(session.prefill(prompt).to(at::kCPU, at::kFloat));
  for (int t = 0; t < steps; ++t)
    run.logits.push_back(session.decode(5 + (t * 11) % 200).to(at::kCPU, at::kFloat));
  run.attended = session.attended();
  return run;
}

// The largest |a - b| over the steps, relative to the largest |a|.
inline double max_relative_error(const ParityRun& a, const ParityRun& b) {
  double worst = 0;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    if (!at::isfinite(b.logits[i]).all().item<bool>()) return INFINITY;
    const double scale = a.logits[i].abs().max().item<double>();
    worst = std::max(worst, (a.logits[i] - b.logits[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

// Every registered method on `model` and on its copy on (device, dtype), fed the same tokens:
//  - at a budget covering the whole sequence (every method attends to everything, as Full),
//    the logits within `tolerance` of the reference's at every step: the dtype's arithmetic
//    alone;
//  - at B = 32, the logits within `selection_tolerance`: where the other dtype's rounding flips
//    a near tie, a method keeps other entries (a path attending to wrong rows, or unnormalised,
//    moves them by far more); with `same_selections` (the same dtype on both sides) the attended
//    counts must be equal too.
inline void expect_methods_agree(const LlamaModel& model, at::Device device, at::ScalarType dtype,
                                 double tolerance, double selection_tolerance,
                                 bool same_selections) {
  const std::shared_ptr<LlamaModel> other = model.to(device, dtype);
  const std::vector<int> prompt = parity_prompt(96);
  for (const MethodInfo* m : method_registry().all()) {
    for (int64_t budget : {int64_t(128), int64_t(32)}) {
      const ParityRun reference = parity_run(model, *m, budget, prompt, 6);
      const ParityRun run = parity_run(*other, *m, budget, prompt, 6);
      const double error = max_relative_error(reference, run);
      EXPECT_LT(error, budget == 128 ? tolerance : selection_tolerance) << m->name << " B=" << budget;
      if (same_selections) {
        EXPECT_EQ(run.attended.sum, reference.attended.sum) << m->name << " B=" << budget;
        EXPECT_EQ(run.attended.max, reference.attended.max) << m->name << " B=" << budget;
      }
    }
  }
}

// The attended positions of a few greedy steps, per step, layer and KV head.
inline std::vector<std::vector<std::vector<std::vector<int64_t>>>> attended_positions(
    const LlamaModel& model, const MethodInfo& info, int64_t budget) {
  std::unique_ptr<Method> method = info.create(info.normalise_config(json::object(), info.name));
  InspectRequest request;
  request.prompt = parity_prompt(96);
  request.budget = info.uses_budget ? budget : 0;
  request.steps = 4;
  return run_inspect(model, *method, request).attended;
}

}  // namespace kvb::test
