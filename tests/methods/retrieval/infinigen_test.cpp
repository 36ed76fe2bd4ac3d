#include "methods/retrieval/infinigen.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <fstream>

#include "harness/engine/session.h"
#include "harness/model/safetensors.h"
#include "tests/methods/method_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

// Calibration-like Q, K with uneven channel scales (as real heads have).
at::Tensor anisotropic(int64_t heads, int64_t n, int64_t d, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor scales = at::linspace(0.2, 3.0, d);
  at::Tensor mix = at::randn({d, d});
  return at::matmul(at::randn({heads, n, d}) * scales, mix);
}

TEST(InfiniGen, SkewingMatricesAreOrthogonalAndKeepDotProducts) {
  const int64_t d = 16;
  at::Tensor q = anisotropic(2, 96, d, 1);  // [Hkv, g*T, d]
  at::Tensor k = anisotropic(2, 48, d, 2);  // [Hkv, T, d]
  at::Tensor a = infinigen_skewing(q, k);
  ASSERT_EQ(a.sizes(), (std::vector<int64_t>{2, d, d}));
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_LT((at::matmul(a[h].t(), a[h]) - at::eye(d)).abs().max().item<double>(), 1e-5);
    at::Tensor plain = at::matmul(q[h], k[h].t());
    at::Tensor skewed = at::matmul(at::matmul(q[h], a[h]), at::matmul(k[h], a[h]).t());
    EXPECT_LT(((skewed - plain).abs().max() / plain.abs().max()).item<double>(), 1e-5);
    // Column j of A is Q's j-th right singular vector: |Q a_j| = j-th singular value
    // (singular values of Q and K are both descending, so Sq*Sk keeps that order).
    at::Tensor sv = at::linalg_svdvals(q[h]);
    at::Tensor norms = at::matmul(q[h], a[h]).norm(2, 0);
    EXPECT_LT(((norms - sv).abs().max() / sv[0]).item<double>(), 1e-4);
  }
}

TEST(InfiniGen, PartialChannelsAreTheUnionOfTheTopQueryAndKeyChannels) {
  // d = 10, r = 0.2: the top 2 channels of each. Q is large on 3 and 7 (signs mixed), K on 7
  // and 1: the union is {1, 3, 7}.
  const int64_t d = 10;
  at::Tensor qa = at::full({1, 4, d}, 0.1);
  at::Tensor ka = at::full({1, 5, d}, -0.1);
  for (int64_t t = 0; t < 4; ++t) {
    qa[0][t][3] = (t % 2 ? -5.0 : 5.0);
    qa[0][t][7] = (t % 2 ? 4.0 : -4.0);
    qa[0][t][1] = 0.5;
  }
  for (int64_t t = 0; t < 5; ++t) {
    ka[0][t][7] = -6.0;
    ka[0][t][1] = 3.0;
    ka[0][t][3] = 0.2;
  }
  std::vector<at::Tensor> ch = infinigen_partial_channels(qa, ka, 0.2);
  ASSERT_EQ(ch.size(), 1u);
  std::vector<int64_t> got(ch[0].data_ptr<int64_t>(), ch[0].data_ptr<int64_t>() + ch[0].numel());
  EXPECT_EQ(got, (std::vector<int64_t>{1, 3, 7}));
}

std::vector<int> prompt_of_length(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 37 + i / 7) % 250);
  return ids;
}

// Attended entries per KV head of the sparse layers (>= 2) over `steps` decode steps.
double sparse_attended(const LlamaModel& model, Method& method, int64_t budget, int steps) {
  Session session(model, method, SessionOptions{budget, 0});
  session.prefill(prompt_of_length(300));
  for (int t = 0; t < steps; ++t) session.decode(5 + t);
  const AttendedCounts& a = session.attended();
  const size_t first = 2 * size_t(model.config.num_key_value_heads);
  double total = 0;
  for (size_t i = first; i < a.sum.size(); ++i) total += a.sum[i];
  return total / double(a.sum.size() - first) / double(steps);
}

TEST(InfiniGen, ThresholdModeAttendsAtMostTheBudget) {
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("infinigen", {{"fill_to_budget", false}});
  const double attended = sparse_attended(*model, *method, 64, 3);
  EXPECT_LE(attended, 64.0);
  EXPECT_GE(attended, 1.0);
  // alpha so large that every key passes: the count is capped by B exactly.
  auto all = test::make_method("infinigen", {{"fill_to_budget", false}, {"alpha", 1e9}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *all, 64, 2), 64.0);
  // The reference's ratio cap: int(n * 0.1) entries per head (n = 301, 302).
  auto ratio = test::make_method("infinigen", {{"budget_ratio", 0.1}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *ratio, 64, 2), 30.0);
}

TEST(InfiniGen, CalibrationFromAFileRuns) {
  const std::string path = ::testing::TempDir() + "infinigen_calibration.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 40; ++i) out << "The quick brown fox jumps over the lazy dog " << i << ". ";
  }
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("infinigen", {{"calibration_file", path}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *method, 64, 2), 64.0);
  EXPECT_GT(method->counters()["index_bytes"], 0);
  std::remove(path.c_str());
}

TEST(InfiniGen, FileCalibrationIsCachedBesideAFolderModelKeyedByItsWeights) {
  test::TempDir dir;
  const std::string text = dir.file("calibration.txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 40; ++i) out << "Pack my box with five dozen liquor jugs " << i << ". ";
  }
  save_model(*LlamaModel::from_reference("random-tiny"), dir.file("model"));
  auto model = LlamaModel::load(dir.file("model"));
  InfiniGenConfig config;
  config.calibration_file = text;
  const std::string path = infinigen_cache_path(*model, config);
  EXPECT_EQ(path.rfind(dir.file("model") + "/.kvbench-cache/infinigen-", 0), 0u) << path;
  auto method = test::make_method("infinigen", {{"calibration_file", text}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *method, 64, 2), 64.0);
  ASSERT_TRUE(std::filesystem::exists(path));
  // The cached matrices are the ones a fresh calibration computes: orthogonal [Hkv, d, d].
  auto file = SafetensorsFile::open(path);
  at::Tensor skew = file->load("layer2.skew");
  ASSERT_EQ(skew.sizes().vec(), (std::vector<int64_t>{2, 16, 16}));
  EXPECT_LT((at::bmm(skew.transpose(1, 2), skew) - at::eye(16)).abs().max().item<double>(), 1e-5);
  // Other weights, other key.
  auto other = LlamaModel::random(random_tiny_config(), 1);
  other->source = model->source;
  EXPECT_NE(infinigen_cache_path(*other, config), path);
}

TEST(InfiniGen, BadConfigsNameTheField) {
  for (const char* field : {"alpha", "partial_ratio", "calibration_tokens", "budget_ratio"}) {
    json bad = {{field, -1}};
    std::string e = test::suite_error({{"name", "infinigen"}, {"config", bad}}, {32});
    EXPECT_NE(e.find(field), std::string::npos) << field << ": " << e;
  }
  std::string e = test::suite_error(
      {{"name", "infinigen"}, {"config", {{"calibration_file", "/no/such/file.txt"}}}}, {32});
  EXPECT_NE(e.find("calibration_file"), std::string::npos) << e;
  e = test::suite_error({{"name", "infinigen"}, {"config", {{"fill_to_budget", 3}}}}, {32});
  EXPECT_NE(e.find("fill_to_budget"), std::string::npos) << e;
}

}  // namespace
}  // namespace kvb
