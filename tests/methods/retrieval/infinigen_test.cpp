#include "methods/retrieval/infinigen.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <fstream>

#include "engine/session.h"
#include "engine/model/safetensors.h"
#include "engine/model_view.h"
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

TEST(InfiniGen, PaddedChannelsRepeatAHeadsFirstChannelUnderAZeroMask) {
  const InfiniGenChannels c = infinigen_pad_channels(
      {at::tensor({0, 2}, at::kLong), at::tensor({1, 2, 3}, at::kLong)});
  EXPECT_TRUE(c.ids.equal(at::tensor({0, 2, 0, 1, 2, 3}, at::kLong).view({2, 3})));
  EXPECT_TRUE(c.mask.equal(at::tensor({1.f, 1.f, 0.f, 1.f, 1.f, 1.f}).view({2, 1, 3})));
  EXPECT_EQ(c.total, 5);
  // A head without channels pads with channel 0, all masked: its scores are zero.
  const InfiniGenChannels empty = infinigen_pad_channels(
      {at::tensor({3, 1}, at::kLong), at::empty({0}, at::kLong)});
  EXPECT_TRUE(empty.ids.equal(at::tensor({3, 1, 0, 0}, at::kLong).view({2, 2})));
  EXPECT_TRUE(empty.mask.equal(at::tensor({1.f, 1.f, 0.f, 0.f}).view({2, 1, 2})));
  EXPECT_EQ(empty.total, 2);
}

TEST(InfiniGen, PartialKeysAreTheSkewedKeysOnEachHeadsChannels) {
  // Two heads of d = 2; head 0 keeps channel 1 (padded by it), head 1 channels 0 and 1.
  const InfiniGenChannels c = infinigen_pad_channels(
      {at::tensor({1}, at::kLong), at::tensor({0, 1}, at::kLong)});
  at::Tensor k = at::tensor({1.f, 2.f, 3.f, 4.f}).view({2, 1, 2});  // [Hkv, L = 1, d]
  at::Tensor skew = at::stack({at::eye(2), at::tensor({0.f, 1.f, 1.f, 0.f}).view({2, 2})});
  // Head 0: (1, 2) A = (1, 2) -> channel 1 twice: (2, 2). Head 1: (3, 4) swapped: (4, 3).
  EXPECT_TRUE(infinigen_partial_keys(k, skew, c).equal(at::tensor({2.f, 2.f, 4.f, 3.f}).view({2, 1, 2})));
}

TEST(InfiniGen, SpeculativeScoresUseTheSkewedQueryOnThePartialChannels) {
  // d = 4; head 0 keeps channels {0, 2}, head 1 channel {3} (padded by it, masked). Keys
  // already skewed and cut: [Hkv = 2, n = 3, c = 2].
  const InfiniGenChannels channels = infinigen_pad_channels(
      {at::tensor({0, 2}, at::kLong), at::tensor({3}, at::kLong)});
  at::Tensor keys = at::tensor({1.0f, 0.0f, 0.0f, 2.0f, 3.0f, -1.0f,  //
                                2.0f, 5.0f, -1.0f, 5.0f, 0.5f, 5.0f}).reshape({2, 3, 2});
  // g = 2: query heads 0-1 speculate KV head 0, heads 2-3 KV head 1.
  at::Tensor q = at::tensor({2.0f, 9.0f, 1.0f, 9.0f, 4.0f, 9.0f, -1.0f, 9.0f,  //
                             0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 3.0f}).reshape({4, 4});
  // A = I: head 0's queries on channels {0, 2} are (2, 1) and (4, -1); scores / sqrt(4),
  //   averaged over the two. key 0 (1, 0): (2 + 4) / 2 / 2 = 1.5; key 1 (0, 2): (2 - 2) / 4 = 0;
  //   key 2 (3, -1): ((6 - 1) + (12 + 1)) / 4 = 4.5.
  // Head 1's queries on channel 3 are 1 and 3 (the padding column's 5s count 0):
  //   key 0 (2): (2 + 6) / 4 = 2; key 1 (-1): -4 / 4 = -1; key 2 (0.5): 2 / 4 = 0.5.
  // Summed over the group (the default) each is twice that.
  at::Tensor eye = at::eye(4).expand({2, 4, 4});
  at::Tensor s = infinigen_speculative_scores(q, eye, channels, keys, /*group_mean=*/true);
  EXPECT_TRUE(at::allclose(s, at::tensor({1.5f, 0.0f, 4.5f, 2.0f, -1.0f, 0.5f}).view({2, 3}))) << s;
  s = infinigen_speculative_scores(q, eye, channels, keys);
  EXPECT_TRUE(at::allclose(s, at::tensor({3.0f, 0.0f, 9.0f, 4.0f, -2.0f, 1.0f}).view({2, 3}))) << s;
  // A swapping channels 0 and 1 for head 0: (q A)_0 = q_1 = 9 for both query heads.
  at::Tensor swap = at::stack({at::eye(4).index_select(0, at::tensor({1, 0, 2, 3}, at::kLong)),
                               at::eye(4)});
  s = infinigen_speculative_scores(q, swap, channels, keys, /*group_mean=*/true);
  //   key 0: (9 + 9) / 4 = 4.5; key 1: (2 - 2) / 4 = 0; key 2: (27 - 1 + 27 + 1) / 4 = 13.5.
  EXPECT_TRUE(at::allclose(s[0], at::tensor({4.5f, 0.0f, 13.5f}))) << s;
}

TEST(InfiniGen, ThresholdCountIsTheHeadMeanOfKeysWithinAlphaOfTheirOwnMax) {
  // Head 0: max 10, alpha 5: 5 (exactly at the threshold, counted as the reference's >=), 9.5,
  // 10 -> 3. Head 1: its own max 8: 3 and 8 -> 2. Mean 2.5, truncated -> 2.
  const at::Tensor scores = at::tensor({0.0f, 4.0f, 5.0f, 9.5f, 10.0f,  //
                                        1.0f, 2.0f, 3.0f, 8.0f, -20.0f}).view({2, 5});
  EXPECT_EQ(infinigen_threshold_count(scores, 5.0).item<int64_t>(), 2);
  EXPECT_EQ(infinigen_threshold_count(scores.narrow(0, 0, 1), 5.0).item<int64_t>(), 3);
  EXPECT_EQ(infinigen_threshold_count(scores.narrow(0, 1, 1), 5.0).item<int64_t>(), 2);
  EXPECT_EQ(infinigen_threshold_count(scores, 0.0).item<int64_t>(), 1);    // only each max
  EXPECT_EQ(infinigen_threshold_count(scores, 100.0).item<int64_t>(), 5);  // (5 + 5) / 2
  EXPECT_EQ(infinigen_threshold_count(scores, 27.0).item<int64_t>(), 4);   // (5 + 4) / 2, truncated
  // With the shared count 2, head 0 fetches its current entry (4) and its best other one (3);
  // head 1 its current entry (4) and entry 3.
  EXPECT_TRUE(infinigen_fetch(scores, 2).equal(at::tensor({3, 4, 3, 4}, at::kLong).view({2, 2})));
}

TEST(InfiniGen, FetchTakesTheCurrentEntryAndTheTopOthersBySpeculativeScore) {
  // Two heads at once; entry 4 is the current one.
  const at::Tensor scores = at::tensor({3.0f, 9.0f, 1.0f, 7.0f, 0.5f,  //
                                        9.0f, 0.0f, 8.0f, 1.0f, 0.0f}).view({2, 5});
  auto rows = [](std::vector<int64_t> v, int64_t cols) {
    return at::tensor(v, at::kLong).view({-1, cols});
  };
  EXPECT_TRUE(infinigen_fetch(scores, 3).equal(rows({1, 3, 4, 0, 2, 4}, 3)));
  EXPECT_TRUE(infinigen_fetch(scores, 1).equal(rows({4, 4}, 1)));
  EXPECT_TRUE(infinigen_fetch(scores, 5).equal(rows({0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, 5)));
}

TEST(InfiniGen, FetchRowsBeginWithTheFetchOfTheirDeviceCount) {
  at::manual_seed(11);
  const at::Tensor scores = at::randn({3, 40});
  const int64_t cap = 12;
  for (int64_t fetch = 1; fetch <= cap; ++fetch) {
    const at::Tensor rows = infinigen_fetch_rows(scores, at::scalar_tensor(fetch, at::kLong), cap);
    ASSERT_EQ(rows.sizes(), (at::IntArrayRef{3, cap}));
    EXPECT_TRUE(rows.narrow(1, 0, fetch).equal(infinigen_fetch(scores, fetch))) << fetch;
    EXPECT_TRUE((rows.narrow(1, fetch, cap - fetch) == 39).all().item<bool>()) << fetch;
  }
}

std::vector<int> prompt_of_length(int n) {
  std::vector<int> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + (i * 37 + i / 7) % 250);
  return ids;
}

// Attended entries per KV head of the sparse layers (>= 2) over `steps` decode steps.
double sparse_attended(const LlamaModel& model, Method& method, int64_t budget, int steps,
                       const ModelView* view = nullptr) {
  Session session(model, method, SessionOptions{.budget = budget, .model_view = view});
  session.prefill(prompt_of_length(300));
  for (int t = 0; t < steps; ++t) session.decode(5 + t);
  const AttendedCounts& a = session.attended();
  const size_t first = 2 * size_t(model.config.num_key_value_heads);
  double total = 0;
  for (size_t i = first; i < a.sum.size(); ++i) total += a.sum[i];
  return total / double(a.sum.size() - first) / double(steps);
}

TEST(InfiniGen, DefaultAttendsTheThresholdCountCappedByTheBudget) {
  const MethodInfo& info = method_registry().get("infinigen", "test");
  const json defaults = info.normalise_config(json::object(), "infinigen");
  EXPECT_EQ(defaults.at("fill_to_budget"), false);
  EXPECT_EQ(defaults.at("calibration"), "text");
  // Every sparse head of every step attends min(count, B), count = that layer's threshold count
  // (alpha = 0.01: random-tiny's speculative scores spread over ~0.1, so alpha = 5 takes every
  // key; here 24..35 of ~300 pass).
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("infinigen", {{"alpha", 0.01}});
  auto* infinigen = dynamic_cast<InfiniGen*>(method.get());
  ASSERT_NE(infinigen, nullptr);
  Session session(*model, *method, SessionOptions{.budget = 64});
  session.prefill(prompt_of_length(300));
  const int last = model->config.num_hidden_layers - 1, Hkv = model->config.num_key_value_heads;
  std::vector<double> before(Hkv, 0.0);
  bool below_budget = false;
  for (int t = 0; t < 4; ++t) {
    session.decode(5 + t);
    const int64_t expected = std::min<int64_t>(infinigen->last_count(), 64);  // the last layer's
    below_budget = below_budget || expected < 64;
    for (int h = 0; h < Hkv; ++h) {
      const double now = session.attended().sum[size_t(last * Hkv + h)];
      EXPECT_EQ(now - before[h], double(expected)) << "step " << t << " head " << h;
      before[h] = now;
    }
  }
  EXPECT_TRUE(below_budget) << "alpha = 5 never fell below B = 64: the check shows nothing";
  // alpha so large that every key passes: the count is capped by B exactly.
  auto all = test::make_method("infinigen", {{"alpha", 1e9}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *all, 64, 2), 64.0);
  // fill_to_budget: exactly B by speculative score.
  auto fill = test::make_method("infinigen", {{"fill_to_budget", true}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *fill, 64, 2), 64.0);
  // The reference's ratio cap: int(n * 0.1) entries per head (n = 301, 302).
  auto ratio = test::make_method("infinigen", {{"budget_ratio", 0.1}, {"fill_to_budget", true}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *ratio, 64, 2), 30.0);
  // Whatever the cell's budget: the reference caps every prompt by its ratio (a B above the
  // prompt's length attended every entry, as Full).
  auto above = test::make_method("infinigen", {{"budget_ratio", 0.1}, {"fill_to_budget", true}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *above, 4096, 2), 30.0);
}

TEST(InfiniGen, PartialKeysKeepEveryEntryPastTheirBuffersGrowth) {
  // A 20-token prompt leaves room for 41 partial keys; 40 decode steps outgrow it. With alpha
  // so large that every key passes, the threshold count is every entry of the step: the
  // scores must cover each entry before and after the growth.
  auto model = LlamaModel::from_reference("random-tiny");
  auto method = test::make_method("infinigen", {{"alpha", 1e9}, {"calibration", "prompt"}});
  auto* infinigen = dynamic_cast<InfiniGen*>(method.get());
  ASSERT_NE(infinigen, nullptr);
  Session session(*model, *method, SessionOptions{.budget = 8});
  session.prefill(prompt_of_length(20));
  for (int t = 0; t < 40; ++t) {
    session.decode(5 + t);
    ASSERT_EQ(infinigen->last_count(), 21 + t) << "step " << t;
  }
}

// The skewing matrices of layer 2 after a prefill of `prompt`.
at::Tensor layer2_skew(const LlamaModel& model, const json& config,
                       const std::vector<int>& prompt) {
  auto method = test::make_method("infinigen", config);
  Session session(model, *method, SessionOptions{.budget = 64});
  session.prefill(prompt);
  return dynamic_cast<InfiniGen&>(*method).calibration().skew[2].clone();
}

TEST(InfiniGen, DefaultCalibrationIsKvbenchsTextNotThePrompt) {
  auto model = LlamaModel::from_reference("random-tiny");
  std::vector<int> other = prompt_of_length(300);
  for (int& id : other) id = 3 + (id * 7) % 250;
  const at::Tensor a = layer2_skew(*model, json::object(), prompt_of_length(300));
  // The same matrices for another prompt, and the same as naming the shipped text.
  EXPECT_TRUE(at::equal(a, layer2_skew(*model, json::object(), other)));
  EXPECT_TRUE(at::equal(a, layer2_skew(*model, {{"calibration_file",
                                                 infinigen_default_calibration_file()}}, other)));
  EXPECT_TRUE(std::filesystem::is_regular_file(infinigen_default_calibration_file()));
  // calibration = prompt: fitted to each prompt, so they differ.
  const json on_prompt = {{"calibration", "prompt"}};
  EXPECT_FALSE(at::allclose(layer2_skew(*model, on_prompt, prompt_of_length(300)),
                            layer2_skew(*model, on_prompt, other)));
}

// A calibration text of 40 numbered copies of `sentence`.
void write_calibration_text(const std::string& path, const std::string& sentence) {
  std::ofstream out(path);
  for (int i = 0; i < 40; ++i) out << sentence << ' ' << i << ". ";
}

TEST(InfiniGen, CalibrationFromAFileRuns) {
  const std::string path = ::testing::TempDir() + "infinigen_calibration.txt";
  write_calibration_text(path, "The quick brown fox jumps over the lazy dog");
  auto model = LlamaModel::from_reference("random-tiny");
  auto method =
      test::make_method("infinigen", {{"calibration_file", path}, {"fill_to_budget", true}});
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *method, 64, 2), 64.0);
  EXPECT_GT(method->counters()["index_bytes"], 0);
  std::remove(path.c_str());
}

TEST(InfiniGen, TextCalibrationIsMadeOncePerModelViewAndCachedInItsDirectory) {
  test::TempDir dir;
  const std::string text = dir.file("calibration.txt");
  write_calibration_text(text, "Pack my box with five dozen liquor jugs");
  auto model = LlamaModel::from_reference("random-tiny");
  const ModelView view(*model, dir.file("cache"));
  InfiniGenConfig config;
  config.calibration_file = text;
  const std::string path = infinigen_cache_path(view, config);
  EXPECT_EQ(path.rfind(dir.file("cache") + "/infinigen-" + view.weights_id() + "-", 0), 0u)
      << path;
  const json method_config = {{"calibration_file", text}, {"fill_to_budget", true}};
  auto method = test::make_method("infinigen", method_config);
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *method, 64, 2, &view), 64.0);
  ASSERT_TRUE(std::filesystem::exists(path));
  // The cached matrices are the ones a fresh calibration computes: orthogonal [Hkv, d, d].
  at::Tensor skew = SafetensorsFile::open(path)->load("layer2.skew");
  ASSERT_EQ(skew.sizes().vec(), (std::vector<int64_t>{2, 16, 16}));
  EXPECT_LT((at::bmm(skew.transpose(1, 2), skew) - at::eye(16)).abs().max().item<double>(), 1e-5);
  // A second method on the same view reuses the view's memo: nothing is read or written.
  std::filesystem::remove(path);
  auto again = test::make_method("infinigen", method_config);
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *again, 64, 2, &view), 64.0);
  EXPECT_FALSE(std::filesystem::exists(path));
  // A new view of the same model computes and writes it again; other weights, another name.
  const ModelView fresh(*model, dir.file("cache"));
  EXPECT_DOUBLE_EQ(sparse_attended(*model, *test::make_method("infinigen", method_config), 64, 2,
                                   &fresh),
                   64.0);
  EXPECT_TRUE(std::filesystem::exists(path));
  auto other = LlamaModel::random(random_tiny_config(), 1);
  EXPECT_NE(infinigen_cache_path(ModelView(*other, dir.file("cache")), config), path);
  // No cache directory: nothing on disk.
  EXPECT_EQ(infinigen_cache_path(ModelView(*model, ""), config), "");
}

// A cached calibration that does not fit the model (an edited file here) is refused with the
// file and tensor named, before a session uses it; a file that fits is used as it is.
TEST(InfiniGen, ACachedCalibrationThatDoesNotFitIsRefusedNamingTheTensor) {
  test::TempDir dir;
  const std::string text = dir.file("calibration.txt");
  write_calibration_text(text, "Sphinx of black quartz, judge my vow");
  auto model = LlamaModel::from_reference("random-tiny");
  InfiniGenConfig config;
  config.calibration_file = text;
  const json method_config = {{"calibration_file", text}, {"fill_to_budget", true}};
  const std::string path = infinigen_cache_path(ModelView(*model, dir.file("cache")), config);
  {
    const ModelView view(*model, dir.file("cache"));
    ASSERT_DOUBLE_EQ(
        sparse_attended(*model, *test::make_method("infinigen", method_config), 64, 2, &view), 64.0);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  std::map<std::string, at::Tensor> tensors;
  const auto original = SafetensorsFile::open(path);
  for (const auto& [name, entry] : original->entries()) tensors[name] = original->load(name);
  auto refused_with = [&](const std::map<std::string, at::Tensor>& edited) {
    write_safetensors(path, edited);
    const ModelView view(*model, dir.file("cache"));
    try {
      sparse_attended(*model, *test::make_method("infinigen", method_config), 64, 2, &view);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto edited = [&](const std::string& name, const at::Tensor& value) {
    std::map<std::string, at::Tensor> t = tensors;
    if (value.defined()) t[name] = value; else t.erase(name);
    return t;
  };
  const at::Tensor ids = tensors.at("layer2.channels1");
  ASSERT_GE(ids.size(0), 2);
  const at::Tensor past_d = ids.clone().index_fill_(0, at::tensor({ids.size(0) - 1}), 16.f);
  const at::Tensor swapped = ids.flip(0);
  const at::Tensor fraction = ids.clone().index_fill_(0, at::tensor({int64_t(0)}), 0.5f);
  for (const at::Tensor& bad : {past_d, swapped, fraction}) {
    const std::string error = refused_with(edited("layer2.channels1", bad));
    EXPECT_NE(error.find(path + ": layer2.channels1: expected increasing whole channel ids in "
                                "[0, 16)"), std::string::npos) << error;
  }
  EXPECT_NE(refused_with(edited("layer3.channels0", at::Tensor())).find("layer3.channels0: missing"),
            std::string::npos);
  const std::string shape = refused_with(edited("layer2.skew", at::zeros({2, 16, 8})));
  EXPECT_NE(shape.find("layer2.skew: shape [2, 16, 8], expected [Hkv, d, d] = [2, 16, 16]"),
            std::string::npos) << shape;
  EXPECT_EQ(refused_with(tensors), "accepted");
  // A file cut short (a full disk, an edit) is refused with the same advice.
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  const ModelView view(*model, dir.file("cache"));
  try {
    sparse_attended(*model, *test::make_method("infinigen", method_config), 64, 2, &view);
    ADD_FAILURE() << "a truncated cache file was accepted";
  } catch (const InputError& e) {
    const std::string error = e.what();
    EXPECT_EQ(error.rfind(path, 0), 0u) << error;
    EXPECT_NE(error.find("delete the file to recompute it"), std::string::npos) << error;
  }
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
  e = test::suite_error({{"name", "infinigen"}, {"config", {{"calibration", "book"}}}}, {32});
  EXPECT_NE(e.find("calibration"), std::string::npos) << e;
  e = test::suite_error({{"name", "infinigen"},
                         {"config", {{"calibration", "prompt"},
                                     {"calibration_file", infinigen_default_calibration_file()}}}},
                        {32});
  EXPECT_NE(e.find("calibration_file"), std::string::npos) << e;
  // A JSON file's quotes and escapes are not text to calibrate on.
  test::TempDir dir;
  std::ofstream(dir.file("essays.JSON")) << "{\"text\": \"An essay.\"}";
  e = test::suite_error(
      {{"name", "infinigen"}, {"config", {{"calibration_file", dir.file("essays.JSON")}}}}, {32});
  EXPECT_NE(e.find("calibration_file: " + dir.file("essays.JSON") + " is JSON"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace kvb
