// The trainer's forward pass must be the engine's: same logits as Session::prefill, and packed
// documents must not see each other.
#include <gtest/gtest.h>

#include "engine/session.h"
#include "methods/method.h"
#include "training/training_forward.h"

namespace kvb {
namespace {

std::shared_ptr<LlamaModel> small_model() {
  return LlamaModel::random(llama_config({.layers = 2, .hidden = 32, .ffn = 64, .heads = 4,
                                          .kv_heads = 2, .head_dim = 8, .vocab = 50}),
                            7);
}

at::Tensor engine_logits(const LlamaModel& model, const std::vector<int>& ids) {
  auto method = method_registry().get("full", "test").create(json::object());
  Session session(model, *method, SessionOptions{});
  return session.prefill(ids, /*all_logits=*/true);  // [L, V]
}

std::vector<int> random_ids(int n, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor t = at::randint(3, 50, {n}, gen, at::kLong);
  return std::vector<int>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
}

at::Tensor as_row(const std::vector<int>& ids) {
  return at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
}

TEST(TrainingForward, MatchesTheEnginesPrefillLogits) {
  auto model = small_model();
  const std::vector<int> a = random_ids(37, 1), b = random_ids(37, 2);
  at::Tensor batch = at::cat({as_row(a), as_row(b)}, 0);  // [2, 37]
  at::Tensor logits = training_logits(*model, batch);
  EXPECT_TRUE(at::allclose(logits[0], engine_logits(*model, a), 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(logits[1], engine_logits(*model, b), 1e-4, 1e-5));
}

TEST(TrainingForward, PackedDocumentsAreIndependent) {
  auto model = small_model();
  const std::vector<int> first = random_ids(20, 3), second = random_ids(15, 4);
  std::vector<int> packed = first;
  packed.insert(packed.end(), second.begin(), second.end());
  std::vector<int64_t> doc(20, 0);
  doc.resize(35, 1);
  at::Tensor logits = training_logits(*model, as_row(packed), at::tensor(doc, at::kLong).unsqueeze(0))[0];
  // RoPE is relative, so the second document's logits do not depend on where it starts.
  EXPECT_TRUE(at::allclose(logits.narrow(0, 0, 20), engine_logits(*model, first), 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(logits.narrow(0, 20, 15), engine_logits(*model, second), 1e-4, 1e-4));
}

TEST(TrainingForward, GradientsReachEveryWeight) {
  auto model = small_model();
  std::vector<at::Tensor> weights = {model->embed, model->final_norm};
  for (const LayerWeights& l : model->layers)
    for (const at::Tensor& t : {l.attn_norm, l.mlp_norm, l.w_qkv, l.wo, l.w_gate_up, l.w_down})
      weights.push_back(t);
  for (at::Tensor& w : weights) w.requires_grad_(true);
  training_logits(*model, as_row(random_ids(12, 5))).pow(2).sum().backward();
  for (const at::Tensor& w : weights) {
    ASSERT_TRUE(w.grad().defined());
    EXPECT_GT(w.grad().abs().sum().item<double>(), 0.0);
  }
  // Every part of the stacked projections, not only one of them.
  for (const LayerWeights& l : model->layers) {
    const at::Tensor qkv = l.w_qkv.grad(), gate_up = l.w_gate_up.grad();
    for (const at::Tensor& part : {qkv.narrow(0, 0, l.q_rows), qkv.narrow(0, l.q_rows, l.kv_rows()),
                                   qkv.narrow(0, l.q_rows + l.kv_rows(), l.kv_rows()),
                                   gate_up.narrow(0, 0, gate_up.size(0) / 2),
                                   gate_up.narrow(0, gate_up.size(0) / 2, gate_up.size(0) / 2)})
      EXPECT_GT(part.abs().sum().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

// Autograd's gradient of a scalar of the logits matches central finite differences, for a
// few entries of every kind of weight (in double precision).
TEST(TrainingForward, GradientsMatchFiniteDifferences) {
  auto model = small_model();
  auto to_double = [](at::Tensor& t) { t = t.to(at::kDouble); };
  to_double(model->embed);
  model->lm_head = model->embed;
  to_double(model->final_norm);
  for (LayerWeights& l : model->layers)
    for (at::Tensor* t : {&l.attn_norm, &l.mlp_norm, &l.w_qkv, &l.wo, &l.w_gate_up, &l.w_down})
      to_double(*t);
  const at::Tensor ids = as_row(random_ids(10, 9));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor probe = at::randn({1, 10, 50}, gen, at::kDouble);
  auto objective = [&] { return (training_logits(*model, ids) * probe).sum(); };
  const LayerWeights& l0 = model->layers[0];
  const int64_t D = l0.w_qkv.size(1), k_first = l0.q_rows * D, v_first = (l0.q_rows + l0.kv_rows()) * D;
  const int64_t up_first = l0.w_gate_up.numel() / 2;
  // A weight, and the flat index of the part probed (q, k, v; up in the stacked matrices).
  const std::vector<std::pair<at::Tensor, int64_t>> probed = {
      {model->embed, 0},       {l0.w_qkv, 0},  {l0.w_qkv, k_first}, {l0.w_qkv, v_first},
      {model->layers[1].w_qkv, 0}, {l0.w_gate_up, up_first}};
  for (auto [w, first] : probed) {
    w.requires_grad_(true);
    objective().backward();
    const at::Tensor grad = w.grad().clone();
    w.grad().zero_();
    w.requires_grad_(false);
    for (int64_t i : {first, first + 7, first + 101}) {
      double* p = w.data_ptr<double>() + i;
      const double keep = *p, h = 1e-6;
      *p = keep + h;
      const double up = objective().item<double>();
      *p = keep - h;
      const double down = objective().item<double>();
      *p = keep;
      EXPECT_NEAR(grad.view(-1)[i].item<double>(), (up - down) / (2 * h), 1e-6);
    }
  }
}

}  // namespace
}  // namespace kvb
