// engine/decode_graphs.h where no graph is captured (the CPU): fixed tensors keep their address
// and take each new value; a piece runs as it is. The graphs themselves: tests/gpu.
#include "engine/decode_graphs.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kvb {
namespace {

TEST(DecodeGraphs, FixedTensorsKeepTheirAddressAndTakeEachValue) {
  DecodeGraphs graphs;
  const at::Tensor first = at::arange(4, at::kFloat);
  const at::Tensor& fixed = graphs.fixed("x", first);
  const void* where = fixed.data_ptr();
  EXPECT_NE(where, first.data_ptr()) << "fixed() must copy, not alias the caller's tensor";
  EXPECT_TRUE(fixed.equal(first));
  const at::Tensor& again = graphs.fixed("x", at::full({4}, 7.f));
  EXPECT_EQ(again.data_ptr(), where);
  EXPECT_TRUE(again.equal(at::full({4}, 7.f)));
  graphs.fixed("y", at::zeros({2}));  // another name: its own tensor; x's reference stays valid
  EXPECT_EQ(graphs.fixed("x", at::ones({4})).data_ptr(), where);
  EXPECT_THROW(graphs.fixed("x", at::ones({5})), std::logic_error);
  EXPECT_THROW(graphs.fixed("x", at::ones({4}, at::kDouble)), std::logic_error);
}

TEST(DecodeGraphs, WithoutCudaAPieceRunsAsItIs) {
  if (DecodeGraphs::available()) GTEST_SKIP() << "skipped: this build captures CUDA graphs";
  DecodeGraphs graphs;
  const auto twice = [](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{in[0] * 2};
  };
  for (float value : {1.f, 3.f}) {
    const std::vector<at::Tensor> out = graphs.run(0, {at::full({3}, value)}, twice);
    EXPECT_TRUE(out.at(0).equal(at::full({3}, 2 * value)));
  }
  EXPECT_EQ(graphs.captured(), 0u);
}

}  // namespace
}  // namespace kvb
