// weights_hash: the same for the same weights, another where any byte of any weight differs,
// inside a weight's 32-byte stripes or among its last nbytes % 32 bytes.
#include <gtest/gtest.h>

#include "engine/model/llama_model.h"

namespace kvb {
namespace {

// Hidden 36: the norms' 144 bytes end in 16 bytes past their last 32-byte stripe.
ModelConfig odd_sized_config() {
  return llama_config({.layers = 1, .hidden = 36, .ffn = 20, .heads = 3, .kv_heads = 1,
                       .head_dim = 12, .vocab = 260, .tied = false});
}

// Flips the bits of byte `offset` of t (a contiguous CPU tensor).
void flip_byte(at::Tensor& t, int64_t offset) {
  static_cast<uint8_t*>(t.data_ptr())[offset] ^= 0x5a;
}

TEST(WeightsHash, EveryByteCounts) {
  auto model = LlamaModel::random(odd_sized_config(), 1);
  const uint64_t original = weights_hash(*model);
  EXPECT_EQ(weights_hash(*LlamaModel::random(odd_sized_config(), 1)), original);
  EXPECT_NE(weights_hash(*LlamaModel::random(odd_sized_config(), 2)), original);
  ASSERT_NE(model->final_norm.nbytes() % 32, 0u);
  for (at::Tensor* t : {&model->final_norm, &model->embed}) {
    // A word of each of the four lanes (bytes 0, 8, 16, 24 of a stripe), one in the middle
    // and the last byte (among the final nbytes % 32 of the norm).
    for (int64_t offset : {int64_t(0), int64_t(8), int64_t(16), int64_t(24),
                           int64_t(t->nbytes() / 2), int64_t(t->nbytes() - 1)}) {
      flip_byte(*t, offset);
      EXPECT_NE(weights_hash(*model), original) << "byte " << offset << " of " << t->nbytes();
      flip_byte(*t, offset);
    }
  }
  EXPECT_EQ(weights_hash(*model), original);
}

}  // namespace
}  // namespace kvb
