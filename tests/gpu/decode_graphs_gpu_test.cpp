// Decode steps through CUDA graphs (SessionOptions::cuda_graphs, engine/decode_graphs.h) give
// what the eager steps give (label "gpu"; "skipped: no GPU" elsewhere).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <iostream>
#include <string>
#include <utility>

#include "engine/decode_graphs.h"
#include "tests/engine/model/architecture_configs.h"
#include "tests/methods/device_compare.h"

namespace kvb {
namespace {

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

// The graphed steps' logits within 1e-3 of the eager ones (relative to each step's largest);
// true when every step's are bitwise equal.
bool expect_same_logits(const Steps& graphed, const Steps& eager) {
  bool bitwise = true;
  for (size_t i = 0; i < eager.logits.size(); ++i) {
    bitwise = bitwise && graphed.logits[i].equal(eager.logits[i]);
    const double scale = eager.logits[i].abs().max().item<double>();
    EXPECT_LT((graphed.logits[i] - eager.logits[i]).abs().max().item<double>() / scale, 1e-3)
        << "step " << i;
  }
  return bitwise;
}

// Every method: with --cuda-graphs, the same logits and attended counts as its eager steps;
// its steps replay graphs exactly where it keeps no step tensors.
TEST(Gpu, CudaGraphStepsGiveTheEagerStepsLogits) {
  KVB_REQUIRE_GPU();
  if (!DecodeGraphs::available())
    GTEST_SKIP() << "skipped: this kvbench has no CUDA kernels (KVBENCH_CUDA off)";
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), dtype);
    for (const MethodInfo* m : method_registry().all()) {
      SCOPED_TRACE(m->name + (dtype == at::kFloat ? " f32" : " bf16"));
      const bool eager_only =
          m->create(m->normalise_config(json::object(), m->name))->holds_step_tensors();
      const Steps eager = run_steps(*model, m->name, false);
      const Steps graphed = run_steps(*model, m->name, true);
      EXPECT_EQ(eager.graph_steps, 0);
      EXPECT_EQ(graphed.graph_steps, eager_only ? 0 : 12);
      EXPECT_EQ(graphed.attended.sum, eager.attended.sum);
      const bool bitwise = expect_same_logits(graphed, eager);
      std::cout << "  " << m->name << (dtype == at::kFloat ? " f32" : " bf16") << ": "
                << (eager_only ? "eager (keeps step tensors)"
                               : bitwise ? "graph steps bitwise equal to the eager steps"
                                         : "graph steps within 1e-3 of the eager steps")
                << "\n";
    }
  }
}

// What random-tiny's captures never contain: q/k/v/o biases and q/k norms (Qwen3), partial
// interleaved RoPE and biases (GLM-4). Full's graphed steps against its eager steps, in f32 and
// bf16.
TEST(Gpu, CudaGraphStepsOfQwen3AndGlmGiveTheEagerStepsLogits) {
  KVB_REQUIRE_GPU();
  if (!DecodeGraphs::available())
    GTEST_SKIP() << "skipped: this kvbench has no CUDA kernels (KVBENCH_CUDA off)";
  const std::pair<const char*, ModelConfig> cases[] = {{"qwen3 with biases", test::qwen3_config(true)},
                                                       {"glm4", test::glm_config()}};
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const auto& [name, config] : cases) {
      SCOPED_TRACE(std::string(name) + (dtype == at::kFloat ? " f32" : " bf16"));
      auto model = LlamaModel::random(config, 7)->to(at::Device(at::kCUDA, 0), dtype);
      const Steps eager = run_steps(*model, "full", false);
      const Steps graphed = run_steps(*model, "full", true);
      EXPECT_EQ(graphed.graph_steps, 12);
      expect_same_logits(graphed, eager);
    }
}

}  // namespace
}  // namespace kvb
