// The fused RMSNorm kernel against the double-precision reference, in fp32 and bf16.
#include <cmath>

#include "kernels/reference/reference.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::kernels {
namespace {

using test::KernelRng;
using test::poisoned;
using test::relative_error;

TEST(RmsNormKernel, Fp32RowsMatchTheReferenceOnOneRowAndOnThreads) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const float eps = 1e-5f;
  // One decode row of Llama-3-8B's width; many narrow rows (the threaded prefill path).
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 4096}, {700, 96}, {3, 7}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(dim));
    auto x = rng.normal(size_t(rows * dim), 3.f), w = rng.normal(size_t(dim));
    auto ref = poisoned<float>(x.size()), out = poisoned<float>(x.size());
    rms_norm_reference(x.data(), w.data(), ref.data(), rows, dim, eps);
    rms_norm(x.data(), w.data(), out.data(), KvElement::kF32, rows, dim, eps);
    EXPECT_LT(relative_error(out, ref), 1e-6);
    rms_norm(x.data(), w.data(), x.data(), KvElement::kF32, rows, dim, eps);  // in place
    EXPECT_EQ(x, out);
  }
}

TEST(RmsNormKernel, Bf16RoundsTheNormalisedRowThenTheProduct) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t rows = 5, dim = 4096;
  const float eps = 1e-6f;
  std::vector<bf16> x16, w16;
  std::vector<float> x, w;  // the same values widened
  for (float v : rng.normal(size_t(rows * dim), 2.f)) x16.push_back(float_to_bf16(v));
  for (float v : rng.normal(size_t(dim))) w16.push_back(float_to_bf16(v));
  for (bf16 v : x16) x.push_back(bf16_to_float(v));
  for (bf16 v : w16) w.push_back(bf16_to_float(v));
  std::vector<float> ref(x.size());
  rms_norm_reference(x.data(), w.data(), ref.data(), rows, dim, eps);
  std::vector<bf16> out(x.size(), bf16{0x7fc0});
  rms_norm(x16.data(), w16.data(), out.data(), KvElement::kBF16, rows, dim, eps);
  // Two roundings to bf16's 8 significant bits, each within half a unit in the last place, up
  // to 2^-8 of the value: 2^-7 at most (the product of two bf16 values is exact in fp32).
  int64_t exact = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float got = bf16_to_float(out[i]);
    ASSERT_LE(std::abs(got - ref[i]), (std::ldexp(1.0, -7) + 1e-6) * std::abs(ref[i])) << i;
    exact += got == bf16_to_float(float_to_bf16(ref[i]));
  }
  // Most elements are the reference rounded once; a kernel that skipped the first rounding
  // would give all of them.
  EXPECT_GT(exact, int64_t(ref.size()) / 2);
  EXPECT_LT(exact, int64_t(ref.size()));
}

TEST(RmsNormKernel, AddThenNormGivesTheRoundedSumAndItsNorm) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t rows = 3, dim = 512;
  const float eps = 1e-5f;
  const auto x = rng.normal(size_t(rows * dim), 2.f), residual = rng.normal(size_t(rows * dim));
  const auto w = rng.normal(size_t(dim));
  {  // fp32: the sum is the fp32 sum; the norm is rms_norm's of it
    std::vector<float> want_sum(x.size()), want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want_sum[i] = x[i] + residual[i];
    rms_norm(want_sum.data(), w.data(), want.data(), KvElement::kF32, rows, dim, eps);
    auto sum = poisoned<float>(x.size()), out = poisoned<float>(x.size());
    add_rms_norm(x.data(), residual.data(), w.data(), sum.data(), out.data(), KvElement::kF32,
                 rows, dim, eps);
    EXPECT_EQ(sum, want_sum);
    EXPECT_EQ(out, want);
  }
  // bf16: the fp32 sum of the widened values rounded once to nearest even, as ATen's add.
  std::vector<bf16> x16, r16, w16;
  for (float v : x) x16.push_back(float_to_bf16(v));
  for (float v : residual) r16.push_back(float_to_bf16(v));
  for (float v : w) w16.push_back(float_to_bf16(v));
  std::vector<bf16> want_sum, want(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    want_sum.push_back(float_to_bf16(bf16_to_float(x16[i]) + bf16_to_float(r16[i])));
  rms_norm(want_sum.data(), w16.data(), want.data(), KvElement::kBF16, rows, dim, eps);
  std::vector<bf16> sum(x.size(), bf16{0x7fc0}), out(x.size(), bf16{0x7fc0});
  add_rms_norm(x16.data(), r16.data(), w16.data(), sum.data(), out.data(), KvElement::kBF16, rows,
               dim, eps);
  int64_t rounded_away = 0;  // sums that the bf16 rounding changed: the test sees rounding
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(sum[i].bits, want_sum[i].bits) << i;
    ASSERT_EQ(out[i].bits, want[i].bits) << i;
    rounded_away += bf16_to_float(sum[i]) != bf16_to_float(x16[i]) + bf16_to_float(r16[i]);
  }
  EXPECT_GT(rounded_away, int64_t(x.size()) / 4);
}

TEST(RmsNormKernel, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.f).bits, 0x3f80);
  EXPECT_EQ(float_to_bf16(1.f + std::ldexp(1.f, -8)).bits, 0x3f80);  // a tie goes to even
  EXPECT_EQ(float_to_bf16(1.f + 3 * std::ldexp(1.f, -8)).bits, 0x3f82);  // a tie, up to even
  EXPECT_EQ(float_to_bf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)).bits, 0x3f81);
  EXPECT_EQ(float_to_bf16(std::nanf("")).bits, 0x7fc0);
}

}  // namespace
}  // namespace kvb::kernels
