#include "methods/common/attention_scores.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kvb {
namespace {

// The column sums written out from their definition, in double, one query at a time:
// query i of head h sees keys 0..i (GQA: KV head h / g); key j counts for it when
// i >= j + skip_after. [Hq][L].
std::vector<std::vector<double>> column_sums_by_definition(const at::Tensor& q, const at::Tensor& k,
                                                           double power, int64_t skip_after) {
  const int64_t Hq = q.size(0), L = q.size(1), d = q.size(2), g = Hq / k.size(0);
  const at::Tensor qd = q.to(at::kDouble), kd = k.to(at::kDouble);
  std::vector<std::vector<double>> sums(size_t(Hq), std::vector<double>(size_t(L), 0.0));
  for (int64_t h = 0; h < Hq; ++h)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> logits;
      double top = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += qd[h][i][c].item<double>() * kd[h / g][j][c].item<double>();
        logits.push_back(dot / std::sqrt(double(d)));
        top = std::max(top, logits.back());
      }
      double total = 0;
      for (double x : logits) total += std::exp(x - top);
      for (int64_t j = 0; j <= i; ++j)
        if (i >= j + skip_after)
          sums[size_t(h)][size_t(j)] += std::pow(std::exp(logits[size_t(j)] - top) / total, power);
    }
  return sums;
}

// Chunks of 3 queries (chunk_bytes = 3 queries' fp32 rows), so the later chunks see more keys
// than the first and the last chunk is short; power and skip_after as KV-Compress uses them.
TEST(ColumnAttentionSum, ChunkedEqualsTheDefinitionUnderTheCausalMask) {
  at::manual_seed(3);
  const int64_t Hq = 4, Hkv = 2, L = 11, d = 8;
  const at::Tensor q = at::randn({Hq, L, d}), k = at::randn({Hkv, L, d});
  for (const auto& [power, skip_after] : std::vector<std::pair<double, int64_t>>{{1.0, 0}, {2.0, 3}}) {
    const at::Tensor got =
        column_attention_sum(q, k, power, skip_after, /*chunk_bytes=*/3 * 4 * Hq * L);
    ASSERT_EQ(got.sizes(), (at::IntArrayRef{Hq, L}));
    const auto want = column_sums_by_definition(q, k, power, skip_after);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t j = 0; j < L; ++j)
        EXPECT_NEAR(got[h][j].item<double>(), want[size_t(h)][size_t(j)], 1e-5)
            << "power " << power << ", skip_after " << skip_after << ", head " << h << ", key " << j;
  }
}

}  // namespace
}  // namespace kvb
