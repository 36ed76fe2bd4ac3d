// A short real training run: the loss must fall and the saved folder must load.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"
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
    options.recipe.bpe_merges = 300;
    options.log_every = 20;
    options.recipe.phases = {default_recipe().phases.front()};
    options.recipe.phases[0].steps = 120;
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
  EXPECT_EQ(model->config.hidden_size, options.recipe.shape.hidden);
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

// A recipe file says everything train-tiny trains; reading it is strict and names the field.
TEST(TrainingRecipe, TheBuiltInRecipeRoundTripsAndErrorsNameTheField) {
  const TrainingRecipe v1 = default_recipe();
  ASSERT_EQ(v1.phases.size(), 5u);
  const json j = recipe_json(v1);
  EXPECT_EQ(recipe_json(read_recipe(j, "r.json: $")), j);
  EXPECT_EQ(j["model"]["hidden"], 128);
  EXPECT_EQ(j["phases"][4]["task_weights"]["vt"], 1.5);

  auto error_of = [](json bad) {
    try {
      read_recipe(bad, "r.json: $");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json unknown_task = j;
  unknown_task["phases"][1]["task_weights"]["needles"] = 1.0;
  EXPECT_NE(error_of(unknown_task).find("r.json: $.phases[1].task_weights.needles: unknown task"),
            std::string::npos) << error_of(unknown_task);
  json unknown_key = j;
  unknown_key["model"]["hiden"] = 64;
  EXPECT_NE(error_of(unknown_key).find("hiden"), std::string::npos) << error_of(unknown_key);
  json too_long = j;
  too_long["model"]["max_positions"] = 1024;  // the last phase's rows are 1280 tokens
  EXPECT_NE(error_of(too_long).find("more than model.max_positions 1024"), std::string::npos)
      << error_of(too_long);
  json doc_too_long = j;
  doc_too_long["phases"][0]["max_doc"] = 200;  // rows of 128
  EXPECT_NE(error_of(doc_too_long).find("r.json: $.phases[0].max_doc: needs min_doc <= max_doc <= length"),
            std::string::npos) << error_of(doc_too_long);
  EXPECT_NE(error_of(json::object()).find("phases"), std::string::npos);
}

// The draft recipes in training/recipes/ stay readable as the code changes.
TEST(TrainingRecipe, TheCommittedRecipesRead) {
  const std::string dir = std::string(KVBENCH_SOURCE_DIR) + "/training/recipes";
  int read = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    EXPECT_NO_THROW(read_recipe(read_json_file(entry.path().string()), entry.path().string()))
        << entry.path();
    ++read;
  }
  EXPECT_GE(read, 1);
}

}  // namespace
}  // namespace kvb
