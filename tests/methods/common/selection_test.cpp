// methods/common/selection.h: the group attention weights of every KV head at once (from the
// decode attention kernel's probabilities where a kernel runs) against one head's (ATen's
// softmax of the gathered keys in fp32), on random keys in each pool dtype.
#include "methods/common/selection.h"

#include <gtest/gtest.h>

#include "engine/kernel_adapter.h"

namespace kvb {
namespace {

TEST(GroupAttentionWeights, EveryHeadAtOnceEqualsEachHeadsSoftmaxSummedOverItsGroup) {
  at::manual_seed(7);
  // Over 2 MiB of fp32 K/V, so the CPU kernel splits each head into chunks of rows whose
  // softmax states it merges; n not a multiple of a tile.
  const int64_t Hkv = 2, g = 4, n = 2100, d = 128;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    LayerKV kv(int(Hkv), d, dtype);
    kv.append_many(at::randn({Hkv, n, d}).to(dtype), at::randn({Hkv, n, d}).to(dtype), 0);
    const at::Tensor q = (2 * at::randn({Hkv * g, d})).to(dtype);  // [Hq, d]
    ASSERT_TRUE(sparse_attention_supported(q, kv.key_pool(), kv.value_pool(), Hkv));
    const at::Tensor all = group_attention_weights(q, kv);         // [Hkv, n]
    ASSERT_EQ(all.sizes(), (at::IntArrayRef{Hkv, n}));
    EXPECT_EQ(all.scalar_type(), at::kFloat);
    for (int h = 0; h < int(Hkv); ++h) {
      const at::Tensor one = group_attention_weights(q, kv, h);  // [n]
      EXPECT_TRUE(at::allclose(all[h], one, 1e-5, 1e-7))
          << "head " << h << " in " << at::toString(dtype) << ": largest difference "
          << (all[h] - one).abs().max().item<float>();
      EXPECT_NEAR(all[h].sum().item<double>(), double(g), 1e-4);  // g softmaxes
    }
  }
}

}  // namespace
}  // namespace kvb
