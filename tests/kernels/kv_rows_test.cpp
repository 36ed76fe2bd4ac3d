// kernels/kv_rows.h: a step's K and V rows land in their pool rows, and nowhere else.
#include "kernels/kv_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kvb::kernels {
namespace {

// Pool row r of `pool` (d values per row).
std::vector<float> pool_row(const std::vector<float>& pool, int64_t r, int64_t d) {
  return {pool.begin() + r * d, pool.begin() + (r + 1) * d};
}

TEST(KvRowsKernel, RowsOfAStridedListLandInTheirPoolRowsOnly) {
  const int64_t d = 6, pool_rows = 40, n = 3;
  // The rows as a column of a [n, 5] block table: entries 5 apart.
  const std::vector<int64_t> table = {17, -1, -1, -1, -1, 2, -1, -1, -1, -1, 39, -1, -1, -1, -1};
  std::vector<float> k_pool(size_t(pool_rows * d), -7.f), v_pool(size_t(pool_rows * d), -9.f);
  std::vector<float> k(size_t(n * d)), v(size_t(n * d));
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(i), v[i] = 100.f + float(i);
  write_kv_rows(k_pool.data(), v_pool.data(), table.data(), 5, k.data(), v.data(), n,
                d * int64_t(sizeof(float)));
  const std::vector<int64_t> rows = {17, 2, 39};
  for (int64_t r = 0; r < pool_rows; ++r) {
    const auto at = std::find(rows.begin(), rows.end(), r);
    if (at == rows.end()) {
      EXPECT_EQ(pool_row(k_pool, r, d), std::vector<float>(size_t(d), -7.f)) << r;
      EXPECT_EQ(pool_row(v_pool, r, d), std::vector<float>(size_t(d), -9.f)) << r;
    } else {
      const int64_t i = at - rows.begin();
      EXPECT_EQ(pool_row(k_pool, r, d), pool_row(k, i, d)) << r;
      EXPECT_EQ(pool_row(v_pool, r, d), pool_row(v, i, d)) << r;
    }
  }
}

TEST(KvRowsKernel, APrefillsRowsRunOnThreadsAndAre16BitRowsByBytes) {
  // 4096 rows of 128 bf16 values (1 MiB per pool: the threaded path), reversed into the pool.
  const int64_t d = 128, n = 4096;
  std::vector<uint16_t> k_pool(size_t(n * d), 0), v_pool(size_t(n * d), 0), k, v;
  for (int64_t i = 0; i < n * d; ++i) k.push_back(uint16_t(i * 3)), v.push_back(uint16_t(i * 5));
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(n - 1 - i);
  write_kv_rows(k_pool.data(), v_pool.data(), rows.data(), 1, k.data(), v.data(), n,
                d * int64_t(sizeof(uint16_t)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) {
      ASSERT_EQ(k_pool[size_t((n - 1 - i) * d + c)], k[size_t(i * d + c)]) << i;
      ASSERT_EQ(v_pool[size_t((n - 1 - i) * d + c)], v[size_t(i * d + c)]) << i;
    }
}

}  // namespace
}  // namespace kvb::kernels
