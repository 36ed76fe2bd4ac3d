// A short real training run: the loss must fall and the saved folder must load.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/common/json_fields.h"
#include "tests/test_util.h"
#include "training/tiny_trainer.h"

namespace kvb {
namespace {

// 120 steps of the curriculum's first phase (copy-short) into `out_dir`, in `compute_dtype`;
// the training.json written. Skips the test without the shared folder.
class TinyTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::shared_dir().empty())
      GTEST_SKIP() << "skipped: " << test::shared_absent("${SHARED} (word lists, essays)");
  }
  json train(at::ScalarType compute_dtype) {
    const std::string shared = test::shared_dir();
    options.out_dir = dir.file("model");
    options.sources = {shared + "/data/wordlists",
                       shared + "/data/haystack/PaulGrahamEssays.json"};
    options.bpe_merges = 300;
    options.log_every = 20;
    options.phases = {default_curriculum().front()};
    options.phases[0].steps = 120;
    options.compute_dtype = compute_dtype;
    trained = train_tiny_model(options, "test", log);
    return read_json_file(options.out_dir + "/training.json");
  }
  // The loss fell from chance (about ln 256) towards copying.
  void expect_loss_fell(const json& record) {
    const json& curve = record["curve"];
    ASSERT_EQ(curve.size(), 6u) << log.str();
    const double first = curve.front()["loss"], last = curve.back()["loss"];
    EXPECT_LT(last, first - 1.0) << log.str();
  }
  test::TempDir dir;
  TinyTrainingOptions options;
  std::ostringstream log;
  std::shared_ptr<LlamaModel> trained;
};

TEST_F(TinyTrainer, CopyingLossFallsAndTheFolderLoads) {
  expect_loss_fell(train(at::kFloat));
  auto model = LlamaModel::load(options.out_dir);
  EXPECT_EQ(model->config.vocab_size, model->tokenizer->vocab_size());
  EXPECT_EQ(model->config.hidden_size, options.shape.hidden);
}

// Mixed precision: the same recipe with the passes in bf16 learns too; the master weights,
// which AdamW updates, stay fp32 and so does the saved model.
TEST_F(TinyTrainer, Bf16MixedPrecisionLearnsWithFp32MasterWeights) {
  const json record = train(at::kBFloat16);
  expect_loss_fell(record);
  EXPECT_EQ(record["compute_dtype"], "bf16");
  EXPECT_EQ(trained->dtype(), at::kFloat);
  EXPECT_EQ(read_json_file(options.out_dir + "/config.json")["torch_dtype"], "float32");
}

}  // namespace
}  // namespace kvb
