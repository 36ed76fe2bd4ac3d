#include "kernels/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/reference/reference.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::kernels {
namespace {

using test::for_each_simd_level;
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
  dense_decode_attention_reference(q.data(), k.data(), v.data(), ref.data(), c.Hq, c.Hkv, c.n, c.d,
                                   stride, scale);
  for_each_simd_level([&] {
    std::fill(out.begin(), out.end(), std::nanf(""));
    dense_decode_attention(q.data(), k.data(), v.data(), out.data(), c.Hq, c.Hkv, c.n, c.d, stride,
                           scale);
    EXPECT_LT(relative_error(out, ref), 1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, DenseDecodeAttention,
                         ::testing::Values(DenseCase{4, 4, 1, 16, 0},       // MHA, one row
                                           DenseCase{8, 2, 37, 64, 5},      // tail tile, padding
                                           DenseCase{32, 8, 1000, 128, 0},  // Llama-3 GQA
                                           DenseCase{6, 1, 5000, 32, 3},    // split-K chunks
                                           DenseCase{8, 8, 999, 48, 0},     // g = 1, d % 64 != 0
                                           DenseCase{64, 8, 2049, 128, 0},  // g = 8
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
  dense_decode_attention_reference(q.data(), k.data(), v.data(), ref.data(), Hq, Hkv, n, d, n * d, 1.f);
  for_each_simd_level([&] {
    std::fill(out.begin(), out.end(), std::nanf(""));
    dense_decode_attention(q.data(), k.data(), v.data(), out.data(), Hq, Hkv, n, d, n * d, 1.f);
    EXPECT_LT(relative_error(out, ref), 1e-5);
  });
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
  sparse_decode_attention_reference(q.data(), kp.data(), vp.data(), offsets.data(), rows.data(),
                                    ref.data(), Hq, Hkv, d, scale, ref_probs.data());
  // A head with no rows yields zeros (as softmax over nothing times V does in the engine).
  for (int64_t h = 0; h < Hkv; ++h)
    if (lengths[h] == 0)
      for (int64_t x = 0; x < g * d; ++x) ref[h * g * d + x] = 0.f;
  for_each_simd_level([&] {
    std::fill(out.begin(), out.end(), std::nanf(""));
    std::fill(probs.begin(), probs.end(), std::nanf(""));
    sparse_decode_attention(q.data(), kp.data(), vp.data(), offsets.data(), rows.data(),
                            out.data(), Hq, Hkv, d, scale, with_probs ? probs.data() : nullptr);
    EXPECT_LT(relative_error(out, ref), 1e-5);
    if (with_probs) {
      EXPECT_LT(relative_error(probs, ref_probs), 1e-5);
    }
  });
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

TEST(SparseDecodeAttention, RowListsInAWiderTableAreReadThroughTheirStride) {
  // Each head's list is a row of a [Hkv, W] table (a block table's rows, W past the longest
  // list); the slots past a head's count hold other valid pool rows, which must not be read.
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t Hq = 8, Hkv = 4, d = 64, pool_rows = 900, W = 700;
  const std::vector<int64_t> lengths{600, 37, 0, 690};
  auto q = rng.normal(size_t(Hq * d), 2.f);
  auto kp = rng.normal(size_t(pool_rows * d)), vp = rng.normal(size_t(pool_rows * d));
  std::vector<int64_t> table(size_t(Hkv * W)), offsets{0}, packed;
  for (int64_t h = 0; h < Hkv; ++h) {
    for (int64_t j = 0; j < W; ++j) table[size_t(h * W + j)] = (h * 131 + j * 7) % pool_rows;
    packed.insert(packed.end(), table.begin() + h * W, table.begin() + h * W + lengths[h]);
    offsets.push_back(int64_t(packed.size()));
  }
  const int64_t g = Hq / Hkv;
  auto ref = poisoned<float>(size_t(Hq * d)), ref_probs = poisoned<float>(size_t(g * offsets.back()));
  sparse_decode_attention_reference(q.data(), kp.data(), vp.data(), offsets.data(), packed.data(),
                                    ref.data(), Hq, Hkv, d, 0.125f, ref_probs.data());
  for (int64_t x = 0; x < g * d; ++x) ref[2 * g * d + x] = 0.f;  // head 2 attends nothing
  for_each_simd_level([&] {
    auto out = poisoned<float>(size_t(Hq * d)), probs = poisoned<float>(size_t(g * offsets.back()));
    sparse_decode_attention(q.data(), kp.data(), vp.data(), offsets.data(), table.data(),
                            out.data(), Hq, Hkv, d, 0.125f, probs.data(), /*row_list_stride=*/W);
    EXPECT_LT(relative_error(out, ref), 1e-5);
    EXPECT_LT(relative_error(probs, ref_probs), 1e-5);
  });
}

TEST(SparseDecodeAttention, BytesCountKvRowsAndIndices) {
  EXPECT_EQ(decode_attention_bytes(32, 8 * 1024, 128, false), 4 * (2 * 8 * 1024 * 128 + 2 * 32 * 128));
  EXPECT_EQ(decode_attention_bytes(32, 10, 128, true) - decode_attention_bytes(32, 10, 128, false), 80);
}

}  // namespace
}  // namespace kvb::kernels

namespace kvb::kernels {
namespace {

TEST(KvElements, SixteenBitConversionsKnownValues) {
  EXPECT_EQ(bf16_to_float(bf16{0x3F80}), 1.0f);
  EXPECT_EQ(bf16_to_float(bf16{0xC040}), -3.0f);
  EXPECT_EQ(f16_to_float(f16{0x3C00}), 1.0f);
  EXPECT_EQ(f16_to_float(f16{0xC000}), -2.0f);
  EXPECT_EQ(f16_to_float(f16{0x7BFF}), 65504.0f);                // largest finite
  EXPECT_EQ(f16_to_float(f16{0x0001}), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_float(f16{0x03FF}), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(f16{0x8000}), -0.0f);
  EXPECT_TRUE(std::isinf(f16_to_float(f16{0x7C00})));
  EXPECT_TRUE(std::isnan(f16_to_float(f16{0x7E00})));
}

// 16-bit pools: the kernel (AVX-512 / AVX2 loads where the CPU has them) against the fp32 reference run on
// the same values widened in software.
template <typename E>
void check_sixteen_bit(KvElement element, E (*from_bits)(uint16_t), float (*widen)(E)) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t Hq = 32, Hkv = 8, d = 128, pool_rows = 3000;
  const std::vector<int64_t> lengths = {1024, 1000, 1, 0, 256, 2999, 64, 17};
  auto q = rng.normal(size_t(Hq * d), 2.f);
  std::vector<E> kp, vp;
  std::vector<float> kf, vf;
  std::uniform_int_distribution<int> exponent(-6, 2), mantissa(0, 1023), sign(0, 1);
  for (int64_t i = 0; i < pool_rows * d; ++i)
    for (auto* pair : {&kp, &vp}) {
      // A finite value of either format: sign, exponent 2^-6..2^2, 10 mantissa bits.
      const float x = (sign(rng.gen) ? -1.f : 1.f) * std::ldexp(1.f + mantissa(rng.gen) / 1024.f,
                                                                 exponent(rng.gen));
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      const uint16_t half_bits = element == KvElement::kBF16
          ? uint16_t(bits >> 16)
          : uint16_t(((bits >> 16) & 0x8000u) | ((((bits >> 23) & 0xffu) - 112u) << 10) |
                     ((bits >> 13) & 0x3ffu));
      pair->push_back(from_bits(half_bits));
    }
  for (const E& e : kp) kf.push_back(widen(e));
  for (const E& e : vp) vf.push_back(widen(e));
  std::vector<int64_t> offsets{0}, rows;
  for (int64_t h = 0; h < Hkv; ++h) {
    for (int64_t j = 0; j < lengths[size_t(h)]; ++j) rows.push_back((j * 7 + h) % pool_rows);
    offsets.push_back(int64_t(rows.size()));
  }
  const float scale = 1.f / std::sqrt(float(d));
  auto out = poisoned<float>(size_t(Hq * d)), ref = poisoned<float>(size_t(Hq * d));
  sparse_decode_attention_reference(q.data(), kf.data(), vf.data(), offsets.data(), rows.data(),
                                    ref.data(), Hq, Hkv, d, scale, nullptr);
  for (int64_t x = 0; x < (Hq / Hkv) * d; ++x) ref[size_t(3 * (Hq / Hkv) * d + x)] = 0.f;  // empty head
  for_each_simd_level([&] {
    std::fill(out.begin(), out.end(), std::nanf(""));
    sparse_decode_attention(q.data(), kp.data(), vp.data(), element, offsets.data(), rows.data(),
                            out.data(), Hq, Hkv, d, scale);
    EXPECT_LT(relative_error(out, ref), 1e-5);
  });
}

TEST(SparseDecodeAttention, Bf16PoolsMatchTheReferenceOnTheirValues) {
  check_sixteen_bit<bf16>(KvElement::kBF16, [](uint16_t b) { return bf16{b}; }, bf16_to_float);
}

TEST(SparseDecodeAttention, F16PoolsMatchTheReferenceOnTheirValues) {
  check_sixteen_bit<f16>(KvElement::kF16, [](uint16_t b) { return f16{b}; }, f16_to_float);
}

}  // namespace
}  // namespace kvb::kernels
