#include "engine/model/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "engine/common/error.h"
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
  j["vocab_size"] = 128256;         // the ids above are tokens
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
      {"eos beyond the vocabulary", [](json& j) { j["eos_token_id"] = {2, 512}; }, "eos_token_id",
       "512 is outside the vocabulary [0, 512)"},
      {"bos beyond the vocabulary", [](json& j) { j["bos_token_id"] = 99999; }, "bos_token_id",
       "outside the vocabulary"},
      {"architectures a string", [](json& j) { j["architectures"] = "LlamaForCausalLM"; },
       "architectures", "expected a list of class names"},
      {"architectures of numbers", [](json& j) { j["architectures"] = {1}; }, "architectures",
       "expected a list of class names"},
      {"no model_type, unknown class", [](json& j) {
         j.erase("model_type");
         j["architectures"] = {"FooForCausalLM"};
       }, "architectures", "names no supported class"},
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
      {"rope dynamic", [](json& j) { j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; },
       "rope_scaling.type", "unsupported 'dynamic'"},
      {"v5 yarn", [](json& j) {
         j.erase("rope_theta");
         j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
       }, "rope_parameters.rope_type", "unsupported 'yarn'"},
      {"theta inside legacy rope_scaling", [](json& j) {
         j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}, {"rope_theta", 5e5}};
       }, "rope_scaling.rope_theta", "not understood for rope_type 'linear'"},
      {"type and rope_type disagree", [](json& j) {
         j["rope_scaling"] = {{"type", "linear"}, {"rope_type", "llama3"}, {"factor", 2.0}};
       }, "rope_scaling.type", "disagrees with rope_type"},
      {"partial rotary in two places", [](json& j) {
         j["model_type"] = "glm";
         j.erase("rope_theta");
         j["partial_rotary_factor"] = 0.5;
         j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
       }, "partial_rotary_factor", "disagrees with rope_parameters.partial_rotary_factor"},
      {"v5 unknown rope key", [](json& j) {
         j.erase("rope_theta");
         j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 2.0},
                                 {"beta_fast", 32}};
       }, "rope_parameters.beta_fast", "not understood for rope_type 'linear'"},
      {"unknown top-level key", [](json& j) { j["quantization_config"] = json::object(); },
       "quantization_config", "--allow-unknown-config-keys"},
      {"gelu", [](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act", "unsupported 'gelu'"},
      {"mlp bias", [](json& j) { j["mlp_bias"] = true; }, "mlp_bias", "not implemented"},
      {"mistral bias", [](json& j) { j["model_type"] = "mistral"; j["attention_bias"] = true; },
       "attention_bias", "not implemented for mistral"},
      {"llama partial rotary", [](json& j) { j["partial_rotary_factor"] = 0.5; },
       "partial_rotary_factor", "only glm"},
      {"llama sliding window", [](json& j) { j["sliding_window"] = 256; }, "sliding_window",
       "no sliding-window attention"},
      {"unknown layer type", [](json& j) { j["layer_types"] = {"full_attention", "chunked"}; },
       "layer_types", "unsupported layer type"},
      {"llama sliding layer", [](json& j) {
         j["layer_types"] = {"full_attention", "sliding_attention"};
       }, "layer_types", "no sliding-window attention"},
      {"glm null kv heads", [](json& j) {
         j["model_type"] = "glm";
         j["num_key_value_heads"] = nullptr;
       }, "num_key_value_heads", "null is not accepted for glm"},
      {"encoder-decoder", [](json& j) { j["is_encoder_decoder"] = true; }, "is_encoder_decoder",
       "must be false"},
      {"model_type vs nothing", [](json& j) { j["model_type"] = "qwen3_moe"; }, "model_type",
       "unsupported architecture 'qwen3_moe'"},
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

// transformers >= 5 writes the rope settings as rope_parameters; the older layout writes
// rope_theta + rope_scaling. Both forms of each rope type read to the same config.
struct RopeForms {
  const char* what;
  json legacy_scaling;  // rope_scaling (null: none)
  json parameters;      // rope_parameters
  double theta;
};

std::vector<RopeForms> rope_forms() {
  return {{"default", nullptr, {{"rope_type", "default"}, {"rope_theta", 1e6}}, 1e6},
          {"linear", {{"type", "linear"}, {"factor", 4.0}},
           {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 4.0}}, 1e4},
          {"llama3",
           {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}},
           {{"rope_type", "llama3"}, {"rope_theta", 5e5}, {"factor", 8.0}, {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}},
           5e5}};
}

TEST(ModelConfig, BothRopeFormsReadTheSame) {
  for (const RopeForms& f : rope_forms()) {
    SCOPED_TRACE(f.what);
    json legacy = llama();
    legacy["rope_theta"] = f.theta;
    legacy["rope_scaling"] = f.legacy_scaling;
    json modern = llama();
    modern.erase("rope_theta");
    modern["rope_parameters"] = f.parameters;
    const ModelConfig a = ModelConfig::from_json(legacy, kPath), b = ModelConfig::from_json(modern, kPath);
    EXPECT_EQ(a.to_json(), b.to_json());
    EXPECT_DOUBLE_EQ(b.rope_theta, f.theta);
    EXPECT_EQ(b.rope_scaling.type, std::string(f.what) == "default" ? "none" : f.what);
    // Both present and equal is fine too.
    json both = modern;
    both["rope_theta"] = f.theta;
    both["rope_scaling"] = f.legacy_scaling;
    EXPECT_EQ(ModelConfig::from_json(both, kPath).to_json(), a.to_json());
  }
}

TEST(ModelConfig, DisagreeingRopeFormsAreRefusedNamingBoth) {
  json j = llama();
  j["rope_theta"] = 10000.0;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  std::string msg = error_of(j);
  EXPECT_NE(msg.find("'rope_parameters'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rope_theta/rope_scaling"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1e+06"), std::string::npos) << msg;
  j = llama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  msg = error_of(j);
  EXPECT_NE(msg.find("factor 4 vs rope_theta 10000, type linear, factor 2"), std::string::npos) << msg;
}

TEST(ModelConfig, UnknownKeysAllowedOnRequestAreListed) {
  json j = llama();
  j["quantization_config"] = {{"bits", 4}};
  j["my_flag"] = true;
  ModelConfig c = ModelConfig::from_json(j, kPath, /*allow_unknown_keys=*/true);
  EXPECT_EQ(c.unknown_keys, (std::vector<std::string>{"my_flag", "quantization_config"}));
}

TEST(ModelConfig, KnownInertKeysOfRealCheckpointsAreAccepted) {
  json j = llama();  // keys transformers writes for Llama 3.1 / Qwen3 / GLM-4 checkpoints
  j.update({{"transformers_version", "5.17.0"}, {"dtype", "bfloat16"}, {"use_cache", true},
            {"initializer_range", 0.02}, {"attention_dropout", 0.0}, {"pretraining_tp", 1},
            {"mlp_bias", false}, {"hidden_act", "silu"}, {"pad_token_id", nullptr},
            {"torch_dtype", "bfloat16"}, {"_name_or_path", "x"}});
  EXPECT_TRUE(ModelConfig::from_json(j, kPath).unknown_keys.empty());
  for (const ConfigKey& k : config_key_table()) EXPECT_TRUE(k.why && *k.why) << k.key;
}

TEST(ModelConfig, StorageDtypeMustBeATorchDtypeAndAgree) {
  json j = llama();
  j["torch_dtype"] = nullptr;  // transformers writes null for a config made without one
  EXPECT_NO_THROW(ModelConfig::from_json(j, kPath));
  j["torch_dtype"] = "banana";
  std::string msg = error_of(j);
  EXPECT_NE(msg.find("torch_dtype"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'banana' is no torch dtype name"), std::string::npos) << msg;
  j["torch_dtype"] = 16;
  EXPECT_NE(error_of(j).find("must be a string"), std::string::npos);
  j["torch_dtype"] = "float16";
  j["dtype"] = "bfloat16";
  msg = error_of(j);
  EXPECT_NE(msg.find("field 'dtype'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("disagrees with torch_dtype 'float16'"), std::string::npos) << msg;
  j["dtype"] = "float16";
  EXPECT_NO_THROW(ModelConfig::from_json(j, kPath));
}

TEST(ModelConfig, Qwen3AndGlmArchitectures) {
  json q = llama();
  q["model_type"] = "qwen3";
  q["head_dim"] = 16;
  q["attention_bias"] = false;
  q["use_sliding_window"] = false;
  q["sliding_window"] = nullptr;
  q["max_window_layers"] = 28;
  q["layer_types"] = {"full_attention", "full_attention"};
  ModelConfig c = ModelConfig::from_json(q, kPath);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.rotary_dim(), 16);
  expect_round_trip(c);

  json g = llama();
  g["model_type"] = "glm";
  g["head_dim"] = 16;
  g["eos_token_id"] = {151329, 151336, 151338};
  g["vocab_size"] = 151552;
  ModelConfig glm = ModelConfig::from_json(g, kPath);  // GlmConfig's defaults
  EXPECT_TRUE(glm.attention_bias);
  EXPECT_FALSE(glm.output_bias);
  EXPECT_DOUBLE_EQ(glm.partial_rotary_factor, 0.5);
  EXPECT_EQ(glm.rotary_dim(), 8);
  EXPECT_TRUE(glm.has_interleaved_rope());
  EXPECT_TRUE(glm.has_fused_gate_up());
  expect_round_trip(glm);
  g.erase("rope_theta");  // transformers >= 5 may put the factor inside rope_parameters
  g["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  EXPECT_EQ(ModelConfig::from_json(g, kPath).rotary_dim(), 4);
}

// A key the file leaves out takes the default of transformers' config class for the model
// type, not Llama's (GlmConfig: 2 KV heads, head_dim 128, eps 1.5625e-07, three EOS ids).
TEST(ModelConfig, OmittedKeysTakeTheirClassDefaults) {
  json g = llama();
  g["model_type"] = "glm";
  for (const char* key : {"num_key_value_heads", "rms_norm_eps", "eos_token_id"}) g.erase(key);
  const ModelConfig glm = ModelConfig::from_json(g, kPath);
  EXPECT_EQ(glm.num_key_value_heads, 2);
  EXPECT_EQ(glm.head_dim, 128);
  EXPECT_DOUBLE_EQ(glm.rms_norm_eps, 1.5625e-07);
  EXPECT_EQ(glm.eos_token_ids, (std::vector<int>{151329, 151336, 151338}));
  json q = llama();
  q["model_type"] = "qwen3";
  q["num_attention_heads"] = 32;
  q.erase("num_key_value_heads");
  const ModelConfig qwen3 = ModelConfig::from_json(q, kPath);
  EXPECT_EQ(qwen3.num_key_value_heads, 32);
  EXPECT_EQ(qwen3.head_dim, 128);
  json m = llama();
  m["model_type"] = "mistral";
  m.erase("num_key_value_heads");
  EXPECT_EQ(ModelConfig::from_json(m, kPath).num_key_value_heads, 8);
  EXPECT_EQ(ModelConfig::from_json(m, kPath).head_dim, 8);  // hidden / heads, as Llama
  // null is not absent: every class but GlmConfig turns it into num_attention_heads.
  for (const char* type : {"mistral", "qwen2", "qwen3", "llama"}) {
    json n = llama();
    n["model_type"] = type;
    n["num_key_value_heads"] = nullptr;
    EXPECT_EQ(ModelConfig::from_json(n, kPath).num_key_value_heads, n["num_attention_heads"])
        << type;
  }
}

TEST(ModelConfig, SwishIsSilu) {
  json j = llama();
  j["hidden_act"] = "swish";  // transformers' ACT2FN: the same SiLU
  EXPECT_NO_THROW(ModelConfig::from_json(j, kPath));
}

TEST(ModelConfig, SlidingWindowOnlyWhereALayerSlides) {
  json m = llama();
  m["model_type"] = "mistral";
  m["sliding_window"] = 4096;
  EXPECT_EQ(ModelConfig::from_json(m, kPath).sliding_window, 4096);
  expect_round_trip(ModelConfig::from_json(m, kPath));
  m.erase("sliding_window");  // absent: MistralConfig's default window
  EXPECT_EQ(ModelConfig::from_json(m, kPath).sliding_window, 4096);
  m["sliding_window"] = nullptr;  // null: none
  EXPECT_EQ(ModelConfig::from_json(m, kPath).sliding_window, 0);
  expect_round_trip(ModelConfig::from_json(m, kPath));
  json q = llama();
  q["model_type"] = "qwen2";
  q["sliding_window"] = 4096;
  q["use_sliding_window"] = false;
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 0);
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 2;  // == num_hidden_layers: no layer slides
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 0);
  q["max_window_layers"] = 1;
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 4096);
  expect_round_trip(ModelConfig::from_json(q, kPath));
  // Qwen2Config's window where the key is absent is 4096 (null: none).
  q["sliding_window"] = 1024;
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 1024);
  q.erase("sliding_window");
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 4096);
  q["sliding_window"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 0);
  // layer_types, where given, say which layers slide; without use_sliding_window none does.
  q.erase("sliding_window");
  q["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 4096);
  q["max_window_layers"] = 0;
  q["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 0);
  q["layer_types"] = {"sliding_attention", "sliding_attention"};
  q["use_sliding_window"] = false;
  EXPECT_EQ(ModelConfig::from_json(q, kPath).sliding_window, 0);
  // MistralConfig has no layer_types: every layer slides whatever a list says.
  m["sliding_window"] = 16;
  m["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(ModelConfig::from_json(m, kPath).sliding_window, 16);
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
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvb
