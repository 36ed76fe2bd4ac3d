#include "harness/model/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "harness/common/error.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using nlohmann::json;

const std::string kPath = "models/x/config.json";

// A minimal Llama 2-style config.json; tests edit fields of it.
json llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 172},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 4},
          {"vocab_size", 512},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"bos_token_id", 1},
          {"eos_token_id", 2}};
}

// The InputError message of from_json(j); fails the test when it parses.
std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, kPath);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << j.dump();
  return "";
}

void expect_round_trip(const ModelConfig& c) {
  json once = c.to_json();
  EXPECT_EQ(ModelConfig::from_json(once, kPath).to_json(), once);
}

TEST(ModelConfig, Llama2Defaults) {
  json j = llama();
  j.erase("num_key_value_heads");
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.num_key_value_heads, 8);  // defaults to num_attention_heads
  EXPECT_EQ(c.head_dim, 8);             // hidden / heads
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  expect_round_trip(c);
}

TEST(ModelConfig, Llama31RopeScalingAndEosList) {
  json j = llama();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192},
                       {"rope_type", "llama3"}};
  j["eos_token_id"] = {128001, 128008, 128009};
  j["tie_word_embeddings"] = true;  // Llama 3.2 1B/3B tie
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_TRUE(c.tie_word_embeddings);
  expect_round_trip(c);
}

TEST(ModelConfig, LinearRopeScalingWithLegacyTypeKey) {
  json j = llama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  expect_round_trip(c);
}

TEST(ModelConfig, NullFieldsMeanAbsent) {
  json j = llama();
  j["rope_scaling"] = nullptr;
  j["head_dim"] = nullptr;
  j["eos_token_id"] = nullptr;
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_TRUE(c.eos_token_ids.empty());
  expect_round_trip(c);
}

TEST(ModelConfig, Qwen2AlwaysHasAttentionBiases) {
  json j = llama();
  j["model_type"] = "qwen2";
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["tie_word_embeddings"] = true;
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  expect_round_trip(c);
}

TEST(ModelConfig, LlamaBiasesOnlyWhenAsked) {
  json j = llama();
  j["attention_bias"] = true;
  EXPECT_TRUE(ModelConfig::from_json(j, kPath).attention_bias);
  j["attention_bias"] = false;
  EXPECT_FALSE(ModelConfig::from_json(j, kPath).attention_bias);
}

TEST(ModelConfig, MistralFromArchitecturesAndExplicitHeadDim) {
  json j = llama();
  j.erase("model_type");
  j["architectures"] = {"MistralForCausalLM"};
  j["head_dim"] = 16;  // hidden != heads * head_dim is allowed when head_dim is explicit
  ModelConfig c = ModelConfig::from_json(j, kPath);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.head_dim, 16);
  expect_round_trip(c);
}

TEST(ModelConfig, Stories260K) {
  KVB_REQUIRE_STORIES260K(dir);
  ModelConfig c = ModelConfig::load(dir + "/config.json");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  expect_round_trip(c);
}

struct BadConfig {
  const char* what;
  std::function<void(json&)> edit;
  const char* field;     // must appear in the message
  const char* fragment;  // a piece of the expected message
};

TEST(ModelConfig, ErrorsNameFileAndField) {
  const BadConfig cases[] = {
      {"gpt2", [](json& j) { j["model_type"] = "gpt2"; j["architectures"] = {"GPT2LMHeadModel"}; },
       "model_type", "unsupported architecture 'gpt2'"},
      {"model_type number", [](json& j) { j["model_type"] = 3; }, "model_type", "must be a string"},
      {"missing hidden", [](json& j) { j.erase("hidden_size"); }, "hidden_size", "missing"},
      {"hidden string", [](json& j) { j["hidden_size"] = "64"; }, "hidden_size", "must be an integer"},
      {"hidden float", [](json& j) { j["hidden_size"] = 64.5; }, "hidden_size", "must be an integer"},
      {"hidden huge", [](json& j) { j["hidden_size"] = 1ull << 40; }, "hidden_size", "out of range"},
      {"zero layers", [](json& j) { j["num_hidden_layers"] = 0; }, "num_hidden_layers", "> 0"},
      {"negative vocab", [](json& j) { j["vocab_size"] = -5; }, "vocab_size", "> 0"},
      {"kv not dividing", [](json& j) { j["num_key_value_heads"] = 3; }, "num_key_value_heads",
       "must divide"},
      {"hidden not multiple", [](json& j) { j["hidden_size"] = 60; }, "hidden_size",
       "multiple of num_attention_heads"},
      {"zero head_dim", [](json& j) { j["head_dim"] = 0; }, "head_dim", "> 0"},
      {"eps string", [](json& j) { j["rms_norm_eps"] = "1e-5"; }, "rms_norm_eps", "must be a number"},
      {"tie string", [](json& j) { j["tie_word_embeddings"] = "true"; }, "tie_word_embeddings",
       "must be a boolean"},
      {"bias int", [](json& j) { j["attention_bias"] = 1; }, "attention_bias", "must be a boolean"},
      {"eos list of strings", [](json& j) { j["eos_token_id"] = {"2"}; }, "eos_token_id",
       "must be an integer"},
      {"rope not object", [](json& j) { j["rope_scaling"] = 8.0; }, "rope_scaling", "object"},
      {"rope yarn", [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
       "rope_scaling.rope_type", "unsupported 'yarn'"},
      {"rope without type", [](json& j) { j["rope_scaling"] = {{"factor", 4.0}}; },
       "rope_scaling.type", "missing"},
      {"linear without factor", [](json& j) { j["rope_scaling"] = {{"type", "linear"}}; },
       "rope_scaling.factor", "missing"},
      {"llama3 missing low", [](json& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}};
       }, "rope_scaling.low_freq_factor", "missing"},
      {"llama3 low >= high", [](json& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
       }, "rope_scaling.high_freq_factor", "low_freq_factor < high_freq_factor"},
  };
  for (const BadConfig& c : cases) {
    SCOPED_TRACE(c.what);
    json j = llama();
    c.edit(j);
    std::string msg = error_of(j);
    EXPECT_NE(msg.find(kPath), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + c.field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << msg;
  }
}

TEST(ModelConfig, NotAnObject) {
  EXPECT_NE(error_of(json::array()).find(kPath), std::string::npos);
}

TEST(ModelConfig, LoadErrorsNameTheFile) {
  test::TempDir dir;
  std::string missing = dir.file("absent.json");
  try {
    ModelConfig::load(missing);
    ADD_FAILURE() << "missing file accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  std::string broken = dir.file("config.json");
  std::ofstream(broken) << "{\"hidden_size\": 64,";
  try {
    ModelConfig::load(broken);
    ADD_FAILURE() << "broken JSON accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(broken), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvb
