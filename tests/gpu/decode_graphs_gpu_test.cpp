// Decode steps through CUDA graphs (SessionOptions::cuda_graphs, engine/decode_graphs.h) give
// what the eager steps give (label "gpu"; "skipped: no GPU" elsewhere).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <iostream>

#include "engine/decode_graphs.h"
#include "tests/methods/device_compare.h"

namespace kvb {
namespace {

#define KVB_REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "skipped: no GPU (torch::cuda::is_available() is false)"; \
  if (!DecodeGraphs::available()) GTEST_SKIP() << "skipped: this kvbench has no CUDA kernels (KVBENCH_CUDA off)"

struct Steps {
  std::vector<at::Tensor> logits;  // prefill's, then each step's: [V] fp32 on the host
  int64_t graph_steps = 0;
  AttendedCounts attended;
};

Steps run_steps(const LlamaModel& model, const std::string& method_name, bool graphs) {
  const MethodInfo& m = *method_registry().find(method_name);
  std::unique_ptr<Method> method = m.create(m.normalise_config(json::object(), m.name));
  Session session(model, *method,
                  SessionOptions{.budget = m.uses_budget ? 64 : 0, .cuda_graphs = graphs});
  Steps out;
  out.logits.push_back(session.prefill(test::parity_prompt(200)).to(at::kCPU, at::kFloat));
  for (int t = 0; t < 12; ++t)
    out.logits.push_back(session.decode(5 + (t * 11) % 200).to(at::kCPU, at::kFloat));
  out.graph_steps = session.timings().graph_steps;
  out.attended = session.attended();
  return out;
}

TEST(Gpu, CudaGraphStepsGiveTheEagerStepsLogits) {
  KVB_REQUIRE_GPU();
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), dtype);
    for (const std::string name : {"full", "streaming_llm"}) {
      SCOPED_TRACE(name + (dtype == at::kFloat ? " f32" : " bf16"));
      const Steps eager = run_steps(*model, name, false), graphed = run_steps(*model, name, true);
      EXPECT_EQ(eager.graph_steps, 0);
      EXPECT_EQ(graphed.graph_steps, 12);
      EXPECT_EQ(graphed.attended.sum, eager.attended.sum);
      bool bitwise = true;
      for (size_t i = 0; i < eager.logits.size(); ++i) {
        bitwise = bitwise && graphed.logits[i].equal(eager.logits[i]);
        const double scale = eager.logits[i].abs().max().item<double>();
        EXPECT_LT((graphed.logits[i] - eager.logits[i]).abs().max().item<double>() / scale, 1e-3)
            << "step " << i;
      }
      std::cout << "  " << name << (dtype == at::kFloat ? " f32" : " bf16") << ": graph steps "
                << (bitwise ? "bitwise equal to" : "within 1e-3 of") << " the eager steps\n";
    }
  }
}

// A method that may keep a step's tensors (H2O keeps none today, but says nothing) runs eagerly.
TEST(Gpu, CudaGraphsAreLeftOutForAMethodThatMayKeepStepTensors) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), at::kFloat);
  EXPECT_EQ(run_steps(*model, "h2o", true).graph_steps, 0);
}

}  // namespace
}  // namespace kvb
