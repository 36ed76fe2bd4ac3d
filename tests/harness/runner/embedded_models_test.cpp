// The embedded trained models answer their tasks through the whole harness (dataset -> runner
// -> method -> scores): kvbench-tiny-v2 must retrieve a pass key 1k tokens back, and must need
// the far context to do it.
#include <gtest/gtest.h>

#include "datasets/dataset.h"
#include "harness/runner/runner.h"
#include "methods/method.h"

namespace kvb {
namespace {

double passkey_score(const LlamaModel& model, const std::string& method,
                     std::optional<int64_t> budget) {
  const DatasetInfo& dataset = dataset_registry().get("passkey", "test");
  const MethodInfo& info = method_registry().get(method, "test");
  const Cell cell{.model = model.source,
                  .dataset = {.name = "passkey",
                              .params = dataset.normalise_params(
                                  {{"context_length", 1024}, {"samples", 4}}, "test")},
                  .method = {.name = method, .label = method,
                             .config = info.normalise_config(json::object(), "test")},
                  .budget = budget};
  const CellResult result = run_cell(cell, model, [](int, int) {});
  double sum = 0;
  for (const SampleRow& s : result.samples) sum += s.score;
  return result.samples.empty() ? -1 : sum / double(result.samples.size());
}

TEST(EmbeddedModel, KvbenchTinyV2RetrievesAPassKeyFromFarBack) {
  auto model = LlamaModel::from_reference("kvbench-tiny-v2");
  EXPECT_TRUE(model->trained);
  EXPECT_EQ(model->config.num_hidden_layers, 6);
  // 96 over 50 samples on a GPU (models/kvbench-tiny-v2/README.md); these 4 are all right.
  EXPECT_EQ(passkey_score(*model, "full", std::nullopt), 100.0);
  // With only the 4 sinks and 124 recent tokens the key is out of reach.
  EXPECT_LE(passkey_score(*model, "streaming_llm", 128), 25.0);
}

}  // namespace
}  // namespace kvb
