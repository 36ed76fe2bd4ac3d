// A short real training run: the loss must fall and the saved folder must load.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/common/json_fields.h"
#include "tests/test_util.h"
#include "training/tiny_trainer.h"

namespace kvb {
namespace {

TEST(TinyTrainer, CopyingLossFallsAndTheFolderLoads) {
  const std::string shared = test::shared_dir();
  if (shared.empty())
    GTEST_SKIP() << "skipped: " << test::shared_absent("${SHARED} (word lists, essays)");
  test::TempDir dir;
  TinyTrainingOptions options;
  options.out_dir = dir.file("model");
  options.sources = {shared + "/data/wordlists", shared + "/data/haystack/PaulGrahamEssays.json"};
  options.bpe_merges = 300;
  options.log_every = 20;
  options.phases = {default_curriculum().front()};  // copy-short
  options.phases[0].steps = 120;
  std::ostringstream log;
  train_tiny_model(options, "test", log);

  const json record = read_json_file(options.out_dir + "/training.json");
  const json& curve = record["curve"];
  ASSERT_EQ(curve.size(), 6u) << log.str();
  const double first = curve.front()["loss"], last = curve.back()["loss"];
  EXPECT_LT(last, first - 1.0) << log.str();  // from chance (about ln 256) towards copying
  auto model = LlamaModel::load(options.out_dir);
  EXPECT_EQ(model->config.vocab_size, model->tokenizer->vocab_size());
  EXPECT_EQ(model->config.hidden_size, options.shape.hidden);
}

// Mixed precision: the same recipe with the passes in bf16 learns too; the master weights,
// which AdamW updates, stay fp32 and so does the saved model.
TEST(TinyTrainer, Bf16MixedPrecisionLearnsWithFp32MasterWeights) {
  const std::string shared = test::shared_dir();
  if (shared.empty())
    GTEST_SKIP() << "skipped: " << test::shared_absent("${SHARED} (word lists, essays)");
  test::TempDir dir;
  TinyTrainingOptions options;
  options.out_dir = dir.file("model");
  options.sources = {shared + "/data/wordlists", shared + "/data/haystack/PaulGrahamEssays.json"};
  options.bpe_merges = 300;
  options.log_every = 20;
  options.phases = {default_curriculum().front()};
  options.phases[0].steps = 120;
  options.compute_dtype = at::kBFloat16;
  std::ostringstream log;
  auto trained = train_tiny_model(options, "test", log);
  EXPECT_EQ(trained->dtype(), at::kFloat);
  const json record = read_json_file(options.out_dir + "/training.json");
  EXPECT_EQ(record["compute_dtype"], "bf16");
  const json& curve = record["curve"];
  ASSERT_EQ(curve.size(), 6u) << log.str();
  const double first = curve.front()["loss"], last = curve.back()["loss"];
  EXPECT_LT(last, first - 1.0) << log.str();
  EXPECT_EQ(read_json_file(options.out_dir + "/config.json")["torch_dtype"], "float32");
}

}  // namespace
}  // namespace kvb
