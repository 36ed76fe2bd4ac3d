#include "kernels/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/reference/reference.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::kernels {
namespace {

using test::KernelRng;
using test::poisoned;
using test::relative_error;

struct DenseCase {
  int64_t Hq, Hkv, n, d, pad;
};

class DenseDecodeAttention : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseDecodeAttention, MatchesReference) {
  const DenseCase c = GetParam();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t stride = c.n * c.d + c.pad;
  auto q = rng.normal(size_t(c.Hq * c.d), 2.f);
  auto k = rng.normal(size_t(c.Hkv * stride));
  auto v = rng.normal(size_t(c.Hkv * stride));
  const float scale = 1.f / std::sqrt(float(c.d));
  auto out = poisoned<float>(size_t(c.Hq * c.d));
  auto ref = poisoned<float>(size_t(c.Hq * c.d));
  dense_decode_attention(q.data(), k.data(), v.data(), out.data(), c.Hq, c.Hkv, c.n, c.d, stride, scale);
  dense_decode_attention_reference(q.data(), k.data(), v.data(), ref.data(), c.Hq, c.Hkv, c.n, c.d,
                                   stride, scale);
  EXPECT_LT(relative_error(out, ref), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseDecodeAttention,
                         ::testing::Values(DenseCase{4, 4, 1, 16, 0},       // MHA, one row
                                           DenseCase{8, 2, 37, 64, 5},      // tail tile, padding
                                           DenseCase{32, 8, 1000, 128, 0},  // Llama-3 GQA
                                           DenseCase{6, 1, 5000, 32, 3},    // split-K chunks
                                           DenseCase{40, 2, 300, 8, 0}),    // g = 20 > 16
                         [](const ::testing::TestParamInfo<DenseCase>& info) {
                           const DenseCase& c = info.param;  // e.g. Hq8_Hkv2_n37_d64_pad5
                           return "Hq" + std::to_string(c.Hq) + "_Hkv" + std::to_string(c.Hkv) +
                                  "_n" + std::to_string(c.n) + "_d" + std::to_string(c.d) +
                                  "_pad" + std::to_string(c.pad);
                         });

TEST(DenseDecodeAttention, EmptyContextGivesZeros) {
  std::vector<float> q(4 * 8, 1.f), kv(1, 0.f);
  auto out = poisoned<float>(q.size());
  dense_decode_attention(q.data(), kv.data(), kv.data(), out.data(), 4, 2, 0, 8, 0, 1.f);
  for (float x : out) EXPECT_EQ(x, 0.f);
}

TEST(DenseDecodeAttention, LargeLogitsStayFinite) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t Hq = 4, Hkv = 2, n = 700, d = 32;
  auto q = rng.normal(size_t(Hq * d), 40.f);  // scores of order 1e3: needs the max shift
  auto k = rng.normal(size_t(Hkv * n * d));
  auto v = rng.normal(size_t(Hkv * n * d));
  auto out = poisoned<float>(size_t(Hq * d)), ref = poisoned<float>(size_t(Hq * d));
  dense_decode_attention(q.data(), k.data(), v.data(), out.data(), Hq, Hkv, n, d, n * d, 1.f);
  dense_decode_attention_reference(q.data(), k.data(), v.data(), ref.data(), Hq, Hkv, n, d, n * d, 1.f);
  EXPECT_LT(relative_error(out, ref), 1e-5);
}

// Ragged per-head lists of pool rows (unsorted, page-like runs and singletons), with probs.
void check_sparse(int64_t Hq, int64_t Hkv, int64_t d, int64_t pool_rows,
                  const std::vector<int64_t>& lengths, bool with_probs) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  auto q = rng.normal(size_t(Hq * d), 2.f);
  auto kp = rng.normal(size_t(pool_rows * d));
  auto vp = rng.normal(size_t(pool_rows * d));
  std::vector<int64_t> offsets{0}, rows;
  for (int64_t h = 0; h < Hkv; ++h) {
    std::vector<int64_t> all(static_cast<size_t>(pool_rows));
    std::iota(all.begin(), all.end(), int64_t(0));
    std::shuffle(all.begin(), all.end(), rng.gen);
    rows.insert(rows.end(), all.begin(), all.begin() + lengths[h]);
    offsets.push_back(int64_t(rows.size()));
  }
  const int64_t g = Hq / Hkv;
  const float scale = 1.f / std::sqrt(float(d));
  auto out = poisoned<float>(size_t(Hq * d)), ref = poisoned<float>(size_t(Hq * d));
  auto probs = poisoned<float>(size_t(g * offsets.back()));
  auto ref_probs = poisoned<float>(size_t(g * offsets.back()));
  sparse_decode_attention(q.data(), kp.data(), vp.data(), offsets.data(), rows.data(), out.data(),
                          Hq, Hkv, d, scale, with_probs ? probs.data() : nullptr);
  sparse_decode_attention_reference(q.data(), kp.data(), vp.data(), offsets.data(), rows.data(),
                                    ref.data(), Hq, Hkv, d, scale, ref_probs.data());
  // A head with no rows yields zeros (as softmax over nothing times V does in the engine).
  for (int64_t h = 0; h < Hkv; ++h)
    if (lengths[h] == 0)
      for (int64_t x = 0; x < g * d; ++x) ref[h * g * d + x] = 0.f;
  EXPECT_LT(relative_error(out, ref), 1e-5);
  if (with_probs) {
    EXPECT_LT(relative_error(probs, ref_probs), 1e-5);
  }
}

TEST(SparseDecodeAttention, RaggedHeadsMatchReference) {
  check_sparse(32, 8, 128, 4096, {1024, 1000, 1, 17, 256, 3000, 64, 999}, false);
}

TEST(SparseDecodeAttention, ProbabilitiesMatchReference) {
  check_sparse(8, 4, 64, 3000, {2500, 5, 0, 700}, true);
}

TEST(SparseDecodeAttention, SingleHeadLongListSplitsAcrossThreads) {
  check_sparse(4, 1, 32, 20000, {20000}, true);
}

TEST(SparseDecodeAttention, BytesCountKvRowsAndIndices) {
  EXPECT_EQ(decode_attention_bytes(32, 8 * 1024, 128, false), 4 * (2 * 8 * 1024 * 128 + 2 * 32 * 128));
  EXPECT_EQ(decode_attention_bytes(32, 10, 128, true) - decode_attention_bytes(32, 10, 128, false), 80);
}

}  // namespace
}  // namespace kvb::kernels
