// save_model -> LlamaModel::load round trips, and the loader's errors on broken folders.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/json_fields.h"
#include "engine/model/checkpoint_fingerprint.h"
#include "engine/model/llama_model.h"
#include "engine/session.h"
#include "engine/model/safetensors.h"
#include "methods/method.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// Logits [L + 3, V] of a fixed prompt: all prefill positions, then three greedy decode steps.
at::Tensor prompt_logits(const LlamaModel& model) {
  auto method = method_registry().get("full", "test").create(json::object());
  Session session(model, *method, SessionOptions{});
  std::vector<int> ids;
  for (int i = 0; i < 24; ++i) ids.push_back(3 + (i * 37) % 250);
  std::vector<at::Tensor> rows = {session.prefill(ids, /*all_logits=*/true)};
  for (int step = 0; step < 3; ++step)
    rows.push_back(session.decode(argmax_token(rows.back()[-1])).unsqueeze(0));
  return at::cat(rows);
}

ModelConfig qwen2_config() {
  ModelConfig c = random_tiny_config();
  c.model_type = "qwen2";
  c.attention_bias = true;
  return c;
}

ModelConfig untied_config() {
  ModelConfig c = random_tiny_config();
  c.tie_word_embeddings = false;
  return c;
}

// Throws unless `call` raises an InputError whose message contains every fragment.
template <typename F>
void expect_input_error(F call, const std::vector<std::string>& fragments) {
  try {
    call();
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    for (const std::string& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what() << "\nlacks: " << f;
  }
}

class RoundTrip : public ::testing::TestWithParam<ModelConfig> {};

TEST_P(RoundTrip, SavedRandomModelLoadsWithIdenticalLogits) {
  auto model = LlamaModel::random(GetParam(), 7);
  TempDir tmp;
  const std::string dir = tmp.file("model");
  save_model(*model, dir);
  auto loaded = LlamaModel::load(dir);
  EXPECT_EQ(loaded->config.to_json(), model->config.to_json());
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_EQ(SafetensorsFile::open(dir + "/model.safetensors")->contains("lm_head.weight"),
            !GetParam().tie_word_embeddings);
  EXPECT_EQ(loaded->tokenizer_json, model->tokenizer_json);
  EXPECT_EQ(loaded->tokenizer->encode("héllo", true), model->tokenizer->encode("héllo", true));
  EXPECT_TRUE(at::equal(prompt_logits(*loaded), prompt_logits(*model)));
}

std::string config_name(const ::testing::TestParamInfo<ModelConfig>& info) {
  if (info.param.attention_bias) return "qwen2_bias";
  return info.param.tie_word_embeddings ? "tiny" : "untied";
}

INSTANTIATE_TEST_SUITE_P(Configs, RoundTrip,
                         ::testing::Values(random_tiny_config(), qwen2_config(), untied_config()),
                         config_name);

// chat_template.jinja replaces tokenizer_config.json's chat_template, as transformers reads it;
// it changes the checkpoint's fingerprint only where present.
TEST(LoadModel, ReadsChatTemplateJinjaAsTransformers) {
  TempDir tmp;
  const std::string dir = tmp.file("model");
  save_model(*LlamaModel::random(random_tiny_config(), 7), dir);
  const std::string before = checkpoint_fingerprint(dir);
  auto plain = LlamaModel::load(dir, LoadOptions{.weights = false});
  EXPECT_FALSE(plain->tokenizer_config.contains("chat_template"));
  EXPECT_EQ(plain->chat_template_file, dir + "/tokenizer_config.json: chat_template");
  std::ofstream(dir + "/chat_template.jinja") << "{{ bos_token }}[{{ messages[0].content }}]";
  auto loaded = LlamaModel::load(dir, LoadOptions{.weights = false});
  EXPECT_EQ(loaded->tokenizer_config["chat_template"], "{{ bos_token }}[{{ messages[0].content }}]");
  EXPECT_EQ(loaded->chat_template_file, dir + "/chat_template.jinja");
  EXPECT_NE(checkpoint_fingerprint(dir), before);
  // An empty file, and a chat_template of no template's shape, are refused naming their file.
  std::ofstream(dir + "/chat_template.jinja", std::ios::trunc).close();
  try {
    LlamaModel::load(dir, LoadOptions{.weights = false});
    ADD_FAILURE() << "an empty chat_template.jinja loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/chat_template.jinja: empty (a chat template file with no template)");
  }
  std::filesystem::remove(dir + "/chat_template.jinja");
  json config = read_json_file(dir + "/tokenizer_config.json");
  config["chat_template"] = 5;
  std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << config.dump();
  try {
    LlamaModel::load(dir, LoadOptions{.weights = false});
    ADD_FAILURE() << "chat_template 5 loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(dir + "/tokenizer_config.json: chat_template: ", 0), 0u)
        << e.what();
  }
}

// A reference that is neither a folder nor a built-in lists the built-ins and the nearest one.
TEST(LoadModel, UnknownReferenceNamesTheNearestBuiltin) {
  try {
    LlamaModel::from_reference("kvbench-tiny-v3");
    ADD_FAILURE() << "no error for a mistyped built-in";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kvbench-tiny-v3: model folder not found"), std::string::npos) << m;
    EXPECT_NE(m.find("random-llama3-8b"), std::string::npos) << "built-ins not listed: " << m;
    EXPECT_NE(m.find("(did you mean kvbench-tiny-v2?)"), std::string::npos) << m;
  }
}

TEST(SaveModel, ThreeShardsLoadBackIdentically) {
  auto model = LlamaModel::random(untied_config(), 3);
  TempDir tmp;
  const std::string dir = tmp.file("sharded");
  save_model(*model, dir, 3);
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  json index = read_json_file(dir + "/model.safetensors.index.json");
  std::set<std::string> files;
  for (const auto& item : index["weight_map"].items()) files.insert(item.value().get<std::string>());
  EXPECT_EQ(files, (std::set<std::string>{"model-00001-of-00003.safetensors",
                                          "model-00002-of-00003.safetensors",
                                          "model-00003-of-00003.safetensors"}));
  EXPECT_TRUE(at::equal(prompt_logits(*LlamaModel::load(dir)), prompt_logits(*model)));
}

TEST(SaveModel, LeavesNoTempFolderAndRefusesToOverwrite) {
  auto model = LlamaModel::random(random_tiny_config(), 0);
  TempDir tmp;
  save_model(*model, tmp.file("m"));
  expect_input_error([&] { save_model(*model, tmp.file("m")); }, {tmp.file("m"), "not an empty"});
  expect_input_error([&] { save_model(*model, tmp.file("n"), 1000); }, {"shards"});
  expect_input_error([&] { save_model(*model, tmp.file("n"), 1, at::kDouble); }, {"Double"});
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(tmp.path())) entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"m"});
}

// Half-precision checkpoints, computed in f32. The loaded weights must be exactly the rounded
// weights. The logits then differ from the f32 model's only through that rounding: each weight
// carries a relative error of at most u (2^-8 for BF16's 8-bit significand, 2^-11 for F16's
// 11 bits; the random weights ~N(0, 0.02) sit far above F16's subnormal range), and a logit
// passes through 2 * layers + 1 = 9 rounded matrices in sequence, each adding about u of
// relative error to the signal it carries, so |dlogits| / max|logits| <= ~9u. The bound
// asserted is 16u: BF16 6.3e-2, F16 7.8e-3 (observed: 0.8u and 1.0u). A decoding mistake
// (wrong dtype, byte order, offsets) gives errors of order 1, far above it.
struct HalfCase {
  at::ScalarType dtype;
  double unit_roundoff;
};

class HalfPrecision : public ::testing::TestWithParam<HalfCase> {};

TEST_P(HalfPrecision, LoadsWithF32ComputeWithinRoundingTolerance) {
  auto model = LlamaModel::random(qwen2_config(), 11);
  TempDir tmp;
  save_model(*model, tmp.file("half"), 1, GetParam().dtype);
  auto loaded = LlamaModel::load(tmp.file("half"));
  EXPECT_EQ(read_json_file(tmp.file("half/config.json"))["torch_dtype"],
            GetParam().dtype == at::kHalf ? "float16" : "bfloat16");
  ASSERT_EQ(loaded->layers[0].wq().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(loaded->layers[0].wq(), model->layers[0].wq().to(GetParam().dtype).to(at::kFloat)));
  EXPECT_TRUE(at::equal(loaded->layers[3].bv(), model->layers[3].bv().to(GetParam().dtype).to(at::kFloat)));
  const at::Tensor want = prompt_logits(*model);  // [L + 3, V]
  const at::Tensor got = prompt_logits(*loaded);
  const double error = (got - want).abs().max().item<double>() / want.abs().max().item<double>();
  EXPECT_LT(error, 16 * GetParam().unit_roundoff);
  EXPECT_GT(error, 0.0);  // the rounding did happen
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfPrecision,
                         ::testing::Values(HalfCase{at::kBFloat16, std::ldexp(1.0, -8)},
                                           HalfCase{at::kHalf, std::ldexp(1.0, -11)}),
                         [](const auto& info) {
                           return info.param.dtype == at::kHalf ? "F16" : "BF16";
                         });

// A saved random-tiny folder, broken by each test.
class BrokenFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LlamaModel::random(random_tiny_config(), 0);
    save_model(*model_, dir_);
  }
  // Rewrites model.safetensors through `edit` of its tensors.
  template <typename F>
  void edit_weights(F edit) {
    auto file = SafetensorsFile::open(dir_ + "/model.safetensors");
    std::map<std::string, at::Tensor> tensors;
    for (const auto& entry : file->entries()) tensors[entry.first] = file->load(entry.first);
    edit(tensors);
    write_safetensors(dir_ + "/model.safetensors", tensors);
  }
  void load() { LlamaModel::load(dir_); }

  std::shared_ptr<LlamaModel> model_;
  TempDir tmp_;
  const std::string dir_ = tmp_.file("model");
};

TEST_F(BrokenFolder, MissingTensorNamesFileAndTensor) {
  edit_weights([](auto& t) { t.erase("model.layers.2.mlp.up_proj.weight"); });
  expect_input_error([&] { load(); },
                     {dir_ + "/model.safetensors", "missing tensor model.layers.2.mlp.up_proj.weight"});
}

TEST_F(BrokenFolder, MissingTensorInShardedIndexNamesIndexAndTensor) {
  remove_tree(dir_);
  save_model(*model_, dir_, 2);
  json index = read_json_file(dir_ + "/model.safetensors.index.json");
  const std::string shard = index["weight_map"]["model.norm.weight"].get<std::string>();
  index["weight_map"].erase("model.norm.weight");
  std::ofstream(dir_ + "/model.safetensors.index.json") << index.dump();
  // Still in its shard, which transformers loads whole: refused rather than left out.
  expect_input_error([&] { load(); }, {dir_ + "/" + shard, "tensor model.norm.weight",
                                       "not listed for this shard"});
  // Gone from the shard too: missing, as the index says.
  auto file = SafetensorsFile::open(dir_ + "/" + shard);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : file->entries())
    if (entry.first != "model.norm.weight") tensors[entry.first] = file->load(entry.first);
  file.reset();
  write_safetensors(dir_ + "/" + shard, tensors);
  expect_input_error([&] { load(); },
                     {dir_ + "/model.safetensors.index.json", "missing tensor model.norm.weight"});
}

TEST_F(BrokenFolder, TensorOfAShardTheIndexLeavesOutIsRefused) {
  remove_tree(dir_);
  save_model(*model_, dir_, 2);
  const std::string shard = dir_ + "/model-00002-of-00002.safetensors";
  auto file = SafetensorsFile::open(shard);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : file->entries()) tensors[entry.first] = file->load(entry.first);
  file.reset();
  tensors["model.layers.0.self_attn.o_proj.bias"] = at::ones({64});
  write_safetensors(shard, tensors);
  expect_input_error([&] { load(); }, {shard, "model.layers.0.self_attn.o_proj.bias",
                                       "not listed for this shard"});
}

TEST_F(BrokenFolder, TokenizerBeyondTheEmbeddingIsRefused) {
  json config = read_json_file(dir_ + "/config.json");
  config["vocab_size"] = 200;  // the byte tokenizer has 260 ids
  std::ofstream(dir_ + "/config.json") << config.dump();
  expect_input_error([&] { load(); }, {dir_ + "/tokenizer.json", "token ids up to 259",
                                       "vocab_size 200"});
}

TEST_F(BrokenFolder, NanWeightsGiveNoGreedyToken) {
  edit_weights([](auto& t) { t["model.norm.weight"].fill_(std::nan("")); });
  auto loaded = LlamaModel::load(dir_);
  expect_input_error([&] { prompt_logits(*loaded); }, {"logits: NaN", "no greedy token"});
}

TEST_F(BrokenFolder, WrongShapeNamesFileTensorAndShapes) {
  edit_weights([](auto& t) { t["model.layers.1.self_attn.k_proj.weight"] = at::zeros({16, 64}); });
  expect_input_error([&] { load(); }, {dir_ + "/model.safetensors", "model.layers.1.self_attn.k_proj.weight",
                                       "[16, 64]", "expected [32, 64]"});
}

TEST_F(BrokenFolder, UnsupportedArchitectureNamesConfigAndField) {
  json config = read_json_file(dir_ + "/config.json");
  config["model_type"] = "gpt2";
  config["architectures"] = {"GPT2LMHeadModel"};
  std::ofstream(dir_ + "/config.json") << config.dump();
  expect_input_error([&] { load(); }, {dir_ + "/config.json", "model_type", "gpt2"});
}

TEST_F(BrokenFolder, IndexPointingToMissingShardNamesIndexTensorAndShard) {
  remove_tree(dir_);
  save_model(*model_, dir_, 3);
  fs::remove(dir_ + "/model-00002-of-00003.safetensors");
  json index = read_json_file(dir_ + "/model.safetensors.index.json");
  std::string tensor;  // the first (in name order) of the missing shard: the one reported
  for (const auto& item : index["weight_map"].items())
    if (tensor.empty() && item.value() == "model-00002-of-00003.safetensors") tensor = item.key();
  expect_input_error([&] { load(); }, {dir_ + "/model.safetensors.index.json", "weight_map." + tensor,
                                       "model-00002-of-00003.safetensors", "does not exist"});
}

TEST_F(BrokenFolder, TensorTheModelDoesNotUseIsRefused) {
  // Llama with attention_bias false has no o_proj bias: ignoring it would change the math.
  edit_weights([](auto& t) { t["model.layers.0.self_attn.o_proj.bias"] = at::ones({64}); });
  expect_input_error([&] { load(); }, {dir_ + "/model.safetensors",
                                       "model.layers.0.self_attn.o_proj.bias", "not part of a llama"});
}

TEST_F(BrokenFolder, TiedModelWithADifferentHeadIsRefused) {
  edit_weights([](auto& t) { t["lm_head.weight"] = t["model.embed_tokens.weight"] * 2.0; });
  expect_input_error([&] { load(); }, {dir_ + "/config.json", "tie_word_embeddings",
                                       "lm_head.weight differs"});
}

TEST_F(BrokenFolder, TiedModelWithAnEqualHeadLoads) {
  edit_weights([](auto& t) { t["lm_head.weight"] = t["model.embed_tokens.weight"].clone(); });
  EXPECT_TRUE(at::equal(prompt_logits(*LlamaModel::load(dir_)), prompt_logits(*model_)));
}

TEST_F(BrokenFolder, NoModelFileNamesFolder) {
  fs::remove(dir_ + "/model.safetensors");
  expect_input_error([&] { load(); }, {dir_ + ": no model.safetensors or model.safetensors.index.json"});
}

// The same checkpoint with its config.json written by transformers >= 5 (rope_parameters)
// gives the same logits as with the older layout, for every supported rope type.
TEST(ConfigGenerations, RopeParametersAndRopeScalingGiveIdenticalLogits) {
  const json scalings[] = {
      nullptr,
      {{"rope_type", "linear"}, {"factor", 4.0}},
      {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}}};
  for (const json& scaling : scalings) {
    SCOPED_TRACE(scaling.dump());
    TempDir tmp;
    ModelConfig c = random_tiny_config();
    c.rope_theta = 5e5;
    c.rope_scaling = ModelConfig::from_json(
        [&] { json j = c.to_json(); j["rope_scaling"] = scaling; return j; }(), "x").rope_scaling;
    auto model = LlamaModel::random(c, 5);
    save_model(*model, tmp.file("old"));
    save_model(*model, tmp.file("new"));
    json config = read_json_file(tmp.file("new/config.json"));
    json parameters = scaling.is_null() ? json{{"rope_type", "default"}} : scaling;
    parameters["rope_theta"] = config["rope_theta"];
    config.erase("rope_theta");
    config.erase("rope_scaling");
    config["rope_parameters"] = parameters;
    std::ofstream(tmp.file("new/config.json")) << config.dump(2);
    const at::Tensor old_logits = prompt_logits(*LlamaModel::load(tmp.file("old")));
    EXPECT_TRUE(at::equal(prompt_logits(*LlamaModel::load(tmp.file("new"))), old_logits));
    // The rope settings matter: a default-rope reading of the same weights differs.
    if (!scaling.is_null()) {
      config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
      std::ofstream(tmp.file("new/config.json")) << config.dump(2);
      EXPECT_FALSE(at::allclose(prompt_logits(*LlamaModel::load(tmp.file("new"))), old_logits));
    }
  }
}

// Sliding-window attention is not implemented: contexts that would reach past the window are
// refused; shorter ones are exact (the window removes nothing from them).
TEST(SlidingWindow, ContextsBeyondTheWindowAreRefused) {
  ModelConfig c = random_tiny_config();
  c.model_type = "mistral";
  c.sliding_window = 26;  // prompt_logits: 24 prompt tokens + 3 decode steps = 27 keys
  auto model = LlamaModel::random(c, 1);
  expect_input_error([&] { prompt_logits(*model); }, {"27 tokens", "sliding_window (26)"});
  model->config.sliding_window = 27;
  auto full = LlamaModel::random(random_tiny_config(), 1);
  EXPECT_TRUE(at::equal(prompt_logits(*model), prompt_logits(*full)));
}

TEST(SaveModel, WritesGenerationConfigWithEveryStopId) {
  ModelConfig c = random_tiny_config();
  c.eos_token_ids = {2, 7};
  TempDir tmp;
  save_model(*LlamaModel::random(c, 0), tmp.file("m"));
  const json gen = read_json_file(tmp.file("m/generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], json({2, 7}));
  EXPECT_EQ(gen["bos_token_id"], 1);
  EXPECT_EQ(LlamaModel::load(tmp.file("m"))->tokenizer->eos_ids(), (std::vector<int>{2, 7}));
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

// The embedded model (models/kvbench-tiny) resolves from its built-in name and is usable.
TEST(EmbeddedModel, KvbenchTinyLoadsByName) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  EXPECT_TRUE(model->trained);
  EXPECT_EQ(model->source, "kvbench-tiny");
  EXPECT_EQ(model->config.vocab_size, model->tokenizer->vocab_size());
  const std::string text = "The pass key is 71432. Remember it.";
  EXPECT_EQ(model->tokenizer->decode(model->tokenizer->encode(text, true)), text);
}

}  // namespace
}  // namespace kvb
