// The rotate-half RoPE kernel on values worked by hand (the engine's test compares it bit for
// bit with ATen: tests/engine/kernel_adapter_test.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/rope.h"

namespace kvb::kernels {
namespace {

TEST(RopeKernel, RotatesHalvesAndCopiesTheChannelsPastR) {
  // One head, one position, d = 6, r = 4: pairs (0, 2) and (1, 3); cos = (c, c), sin = (-s, s)
  // with c = 0.5, s = 0.25 (exact in binary).
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> cos = {0.5f, 0.5f, 0.5f, 0.5f}, sin = {-0.25f, -0.25f, 0.25f, 0.25f};
  std::vector<float> out(6, -1.f);
  rope_rotate_half(x.data(), cos.data(), sin.data(), out.data(), KvElement::kF32, 1, 1, 6, 4);
  // (a c - b s, b c + a s) for (a, b) = (1, 3) and (2, 4); 5 and 6 unchanged.
  EXPECT_EQ(out, (std::vector<float>{-0.25f, 0.f, 1.75f, 2.5f, 5.f, 6.f}));
}

TEST(RopeKernel, EachPositionTakesItsOwnAnglesAndEveryHeadTheSame) {
  // Two heads of two positions, d = r = 2: position 0 turns by (c, s) = (1, 0), position 1 by
  // (0, 1) (a quarter turn: (a, b) -> (-b, a)).
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> cos = {1, 1, 0, 0}, sin = {0, 0, -1, 1};
  std::vector<float> out(8, -1.f);
  rope_rotate_half(x.data(), cos.data(), sin.data(), out.data(), KvElement::kF32, 2, 2, 2, 2);
  EXPECT_EQ(out, (std::vector<float>{1, 2, -4, 3, 5, 6, -8, 7}));
}

TEST(RopeKernel, RefusesAnOddOrTooWideRotation) {
  std::vector<float> x(8), out(8), angles(8);
  EXPECT_THROW(rope_rotate_half(x.data(), angles.data(), angles.data(), out.data(),
                                KvElement::kF32, 1, 1, 8, 3), std::invalid_argument);
  EXPECT_THROW(rope_rotate_half(x.data(), angles.data(), angles.data(), out.data(),
                                KvElement::kF32, 1, 1, 4, 8), std::invalid_argument);
}

}  // namespace
}  // namespace kvb::kernels
