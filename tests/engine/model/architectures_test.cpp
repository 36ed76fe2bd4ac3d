// Qwen3 and GLM-4 against an independent derivation of their transformers modeling code, in
// plain double-precision loops over the weights (no ATen op of the engine is reused):
// - Qwen3 (modeling_qwen3.py): per-head RMSNorm of q and k (weights [d]) before rotate-half
//   RoPE over the whole head; q/k/v/o biases only when attention_bias; explicit head_dim.
// - GLM-4 (modeling_glm.py): q/k/v biases, no o_proj bias; RoPE on the first
//   partial_rotary_factor * head_dim dimensions, pairs (2i, 2i+1), frequencies
//   base^(-2i / rotary_dim); the MLP's gate_up_proj [2F, D] with the gate first.
// Also: save_model -> load round trips of both, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/model/llama_model.h"
#include "engine/session.h"
#include "methods/method.h"
#include "tests/engine/model/architecture_configs.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

Mat to_mat(const at::Tensor& t) {  // [R, C]
  at::Tensor c = t.to(at::kDouble).contiguous();
  Mat m(size_t(c.size(0)), Vec(size_t(c.size(1))));
  for (size_t r = 0; r < m.size(); ++r)
    for (size_t k = 0; k < m[r].size(); ++k) m[r][k] = c[int64_t(r)][int64_t(k)].item<double>();
  return m;
}
Vec to_vec(const at::Tensor& t) {
  if (!t.defined()) return {};
  at::Tensor c = t.to(at::kDouble).contiguous();
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

Vec matvec(const Mat& w, const Vec& x, const Vec& bias = {}) {
  Vec y(w.size(), 0.0);
  for (size_t r = 0; r < w.size(); ++r) {
    for (size_t k = 0; k < x.size(); ++k) y[r] += w[r][k] * x[k];
    if (!bias.empty()) y[r] += bias[r];
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= double(x.size());
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * w[i];
  return y;
}

// RoPE of one head vector at `pos`, as the modeling files define it.
void rope(Vec& x, int64_t pos, const ModelConfig& c) {
  const int r = c.model_type == "glm" ? int(c.head_dim * c.partial_rotary_factor) : c.head_dim;
  for (int i = 0; i < r / 2; ++i) {
    const double angle = double(pos) * std::pow(c.rope_theta, -2.0 * i / r);
    // GLM turns neighbours (2i, 2i+1); Llama-style models turn (i, i + r/2).
    const int a = c.model_type == "glm" ? 2 * i : i, b = c.model_type == "glm" ? 2 * i + 1 : i + r / 2;
    const double xa = x[size_t(a)], xb = x[size_t(b)];
    x[size_t(a)] = xa * std::cos(angle) - xb * std::sin(angle);
    x[size_t(b)] = xb * std::cos(angle) + xa * std::sin(angle);
  }
}

struct RefLayer {
  Mat wq, wk, wv, wo, gate, up, down;
  Vec bq, bk, bv, bo, attn_norm, mlp_norm, q_norm, k_norm;
};

RefLayer ref_layer(const LayerWeights& l) {
  return {to_mat(l.wq()), to_mat(l.wk()), to_mat(l.wv()), to_mat(l.wo), to_mat(l.w_gate()),
          to_mat(l.w_up()), to_mat(l.w_down), to_vec(l.bq()), to_vec(l.bk()), to_vec(l.bv()),
          to_vec(l.bo), to_vec(l.attn_norm), to_vec(l.mlp_norm), to_vec(l.q_norm),
          to_vec(l.k_norm)};
}

Vec head(const Vec& x, int h, int d) { return Vec(x.begin() + h * d, x.begin() + (h + 1) * d); }

// Logits [L][V] of `ids` through the model's weights.
Mat reference_logits(const LlamaModel& m, const std::vector<int>& ids) {
  const ModelConfig& c = m.config;
  const int d = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const Mat embed = to_mat(m.embed), lm_head = to_mat(m.lm_head);
  std::vector<Vec> xs;
  for (int id : ids) xs.push_back(embed[size_t(id)]);
  for (const LayerWeights& weights : m.layers) {
    const RefLayer l = ref_layer(weights);
    std::vector<std::vector<Vec>> q(xs.size()), k(xs.size()), v(xs.size());  // [pos][head][d]
    for (size_t p = 0; p < xs.size(); ++p) {
      const Vec h = rmsnorm(xs[p], l.attn_norm, c.rms_norm_eps);
      const Vec qa = matvec(l.wq, h, l.bq), ka = matvec(l.wk, h, l.bk), va = matvec(l.wv, h, l.bv);
      for (int i = 0; i < Hq; ++i) {
        Vec qh = head(qa, i, d);
        if (!l.q_norm.empty()) qh = rmsnorm(qh, l.q_norm, c.rms_norm_eps);
        rope(qh, int64_t(p), c);
        q[p].push_back(qh);
      }
      for (int i = 0; i < Hkv; ++i) {
        Vec kh = head(ka, i, d);
        if (!l.k_norm.empty()) kh = rmsnorm(kh, l.k_norm, c.rms_norm_eps);
        rope(kh, int64_t(p), c);
        k[p].push_back(kh);
        v[p].push_back(head(va, i, d));
      }
    }
    for (size_t p = 0; p < xs.size(); ++p) {
      Vec attn;
      for (int i = 0; i < Hq; ++i) {
        const int kv = i / (Hq / Hkv);
        Vec scores;
        double top = -1e300;
        for (size_t t = 0; t <= p; ++t) {
          double s = 0;
          for (int j = 0; j < d; ++j) s += q[p][size_t(i)][size_t(j)] * k[t][size_t(kv)][size_t(j)];
          scores.push_back(s / std::sqrt(double(d)));
          top = std::max(top, scores.back());
        }
        double z = 0;
        for (double& s : scores) z += (s = std::exp(s - top));
        Vec out(size_t(d), 0.0);
        for (size_t t = 0; t <= p; ++t)
          for (int j = 0; j < d; ++j) out[size_t(j)] += scores[t] / z * v[t][size_t(kv)][size_t(j)];
        attn.insert(attn.end(), out.begin(), out.end());
      }
      const Vec o = matvec(l.wo, attn, l.bo);
      for (size_t i = 0; i < o.size(); ++i) xs[p][i] += o[i];
      const Vec h = rmsnorm(xs[p], l.mlp_norm, c.rms_norm_eps);
      const Vec g = matvec(l.gate, h), u = matvec(l.up, h);
      Vec act(g.size());
      for (size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec down = matvec(l.down, act);
      for (size_t i = 0; i < down.size(); ++i) xs[p][i] += down[i];
    }
  }
  Mat logits;
  for (const Vec& x : xs) logits.push_back(matvec(lm_head, rmsnorm(x, to_vec(m.final_norm), c.rms_norm_eps)));
  return logits;
}

std::vector<int> prompt() {
  std::vector<int> ids;
  for (int i = 0; i < 13; ++i) ids.push_back(3 + (i * 29) % 200);
  return ids;
}

at::Tensor engine_logits(const LlamaModel& model) {
  auto method = method_registry().get("full", "test").create(json::object());
  Session session(model, *method, SessionOptions{});
  return session.prefill(prompt(), /*all_logits=*/true);
}

struct Case {
  const char* name;
  ModelConfig config;
};

class Architecture : public ::testing::TestWithParam<Case> {};

TEST_P(Architecture, LogitsMatchAnIndependentDerivation) {
  auto model = LlamaModel::random(GetParam().config, 7);
  const at::Tensor ours = engine_logits(*model).to(at::kDouble);  // [L, V]
  const Mat ref = reference_logits(*model, prompt());
  double err = 0, norm = 0;
  for (size_t p = 0; p < ref.size(); ++p)
    for (size_t j = 0; j < ref[p].size(); ++j) {
      const double diff = ours[int64_t(p)][int64_t(j)].item<double>() - ref[p][j];
      err += diff * diff;
      norm += ref[p][j] * ref[p][j];
    }
  EXPECT_LT(std::sqrt(err / norm), 1e-5) << "relative L2 error of all logits";
}

TEST_P(Architecture, SaveLoadRoundTripsBitForBit) {
  test::TempDir dir;
  auto model = LlamaModel::random(GetParam().config, 11);
  save_model(*model, dir.file("m"));
  auto loaded = LlamaModel::load(dir.file("m"));
  EXPECT_EQ(loaded->config.to_json(), model->config.to_json());
  EXPECT_TRUE(at::equal(engine_logits(*loaded), engine_logits(*model)));
}

INSTANTIATE_TEST_SUITE_P(Models, Architecture,
                         ::testing::Values(Case{"qwen3", test::qwen3_config(false)},
                                           Case{"qwen3_biases", test::qwen3_config(true)},
                                           Case{"glm4", test::glm_config()}),
                         [](const auto& info) { return std::string(info.param.name); });

// The derivation itself must notice what it is meant to check: a GLM model read as if its
// RoPE were Llama's (whole head, rotate-half) gives other logits.
TEST(ArchitectureReference, DistinguishesGlmRopeFromLlamaRope) {
  auto model = LlamaModel::random(test::glm_config(), 7);
  const Mat glm = reference_logits(*model, prompt());
  model->config.model_type = "llama";
  const Mat llama = reference_logits(*model, prompt());
  double diff = 0;
  for (size_t j = 0; j < glm.back().size(); ++j) diff += std::abs(glm.back()[j] - llama.back()[j]);
  EXPECT_GT(diff, 1e-3);
}

}  // namespace
}  // namespace kvb
