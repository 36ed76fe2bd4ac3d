// Oracle top-k: the true top-B entries by attention weight (softmax over all entries, summed over
// the GQA group), ties at the B-th weight to the earlier entries.
#include <gtest/gtest.h>

#include "tests/methods/method_test_util.h"

namespace kvb {
namespace {

// Two KV heads of 10 entries, two query heads each, d = 4. Every key is a multiple of e_0 and
// both query heads of a group are e_0, so an entry's weight rises with its multiple: head 0's
// multiples 1 3 2 3 0 2 2 5 2 1 rank entries 7, 1, 3, then four tie at 2 (entries 2, 5, 6, 8);
// head 1's are the reverse order of entries.
TEST(OracleTopK, TakesTheLargestWeightsTiesToTheEarlierEntries) {
  const std::vector<float> multiples = {1, 3, 2, 3, 0, 2, 2, 5, 2, 1};
  const int64_t n = 10, d = 4, B = 4;
  at::Tensor k = at::zeros({2, n, d});  // [Hkv, n, d]
  for (int64_t i = 0; i < n; ++i) {
    k[0][i][0] = multiples[size_t(i)];
    k[1][n - 1 - i][0] = multiples[size_t(i)];
  }
  LayerKV kv(2, d, at::kFloat);
  kv.append_many(k, at::randn({2, n, d}), 0);
  auto method = test::make_method("oracle_topk");
  method->begin(test::context(1, 4, 2, d, B, n));
  const at::Tensor q = test::unit(0, d).repeat({4, 1});  // [Hq, d]
  const std::vector<std::vector<int64_t>> lists = method->select(0, q, kv).lists();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0], (std::vector<int64_t>{1, 2, 3, 7}));
  // Head 1: entry 9 - i holds multiple i: 5 at 2, 3 at 6 and 8, then 2 at 1, 3, 4, 7: entry 1.
  EXPECT_EQ(lists[1], (std::vector<int64_t>{1, 2, 6, 8}));
}

TEST(OracleTopK, AHeadWithinTheBudgetAttendsToEverything) {
  LayerKV kv(1, 4, at::kFloat);
  kv.append_many(at::randn({1, 3, 4}), at::randn({1, 3, 4}), 0);
  auto method = test::make_method("oracle_topk");
  method->begin(test::context(1, 2, 1, 4, 3, 3));
  EXPECT_TRUE(method->select(0, at::randn({2, 4}), kv).all);
}

}  // namespace
}  // namespace kvb
