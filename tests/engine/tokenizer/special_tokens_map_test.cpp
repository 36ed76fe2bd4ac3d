// special_tokens_map.json, as transformers reads it: its special tokens replace
// tokenizer_config.json's where that file has no added_tokens_decoder (written before
// transformers 4.34), and are ignored beside one that has it.
#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "engine/common/json_fields.h"
#include "engine/model/checkpoint_fingerprint.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixtures.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using nlohmann::json;

// A folder with the SentencePiece fixture (<unk> 0, <s> 1, </s> 2), `config` as
// tokenizer_config.json and, unless null, `map` as special_tokens_map.json.
void write_folder(const test::TempDir& dir, const json& config, const json& map) {
  tokenizer_test::write_file(dir.file("tokenizer.json"),
                             tokenizer_test::sentencepiece_tokenizer_json(false).dump());
  tokenizer_test::write_file(dir.file("tokenizer_config.json"), config.dump());
  if (!map.is_null()) tokenizer_test::write_file(dir.file("special_tokens_map.json"), map.dump());
}

std::string load_error(const test::TempDir& dir) {
  try {
    Tokenizer::load(dir.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SpecialTokensMap, ReplacesTheConfigsTokensWithoutAddedTokensDecoder) {
  test::TempDir dir;
  write_folder(dir, {{"bos_token", "<s>"}, {"eos_token", "<unk>"}},
               {{"eos_token", {{"content", "</s>"}, {"lstrip", false}}}, {"unk_token", "<unk>"}});
  EXPECT_EQ(Tokenizer::load(dir.path())->eos_ids(), std::vector<int>{2});
  EXPECT_EQ(read_tokenizer_config(dir.path()).at("eos_token").at("content"), "</s>");
  EXPECT_EQ(read_tokenizer_config(dir.path()).at("bos_token"), "<s>");  // the config's, not in the map
}

TEST(SpecialTokensMap, IgnoredBesideAddedTokensDecoder) {
  test::TempDir dir;
  const json decoder = {{"0", {{"content", "<unk>"}, {"special", true}}}};
  write_folder(dir, {{"eos_token", "<unk>"}, {"added_tokens_decoder", decoder}},
               {{"eos_token", "</s>"}});
  EXPECT_EQ(Tokenizer::load(dir.path())->eos_ids(), std::vector<int>{0});
}

TEST(SpecialTokensMap, ItsErrorsNameTheMap) {
  test::TempDir unknown_token, unknown_key;
  write_folder(unknown_token, json::object(), {{"eos_token", "<nope>"}});
  std::string message = load_error(unknown_token);
  EXPECT_NE(message.find("/special_tokens_map.json: eos_token"), std::string::npos) << message;
  write_folder(unknown_key, json::object(), {{"tokenizer_kind", "x"}});
  message = load_error(unknown_key);
  EXPECT_NE(message.find("/special_tokens_map.json: tokenizer_kind"), std::string::npos) << message;
}

TEST(SpecialTokensMap, MergesListsOfExtraTokensAndTakesKnownKeys) {
  test::TempDir dir, unknown;
  write_folder(dir, {{"additional_special_tokens", json::array({"<s>"})}},
               {{"additional_special_tokens", json::array({"</s>", json{{"content", "<s>"}}})},
                {"model_max_length", 512}});
  SpecialTokensMapKeys from_map;
  const json config = read_tokenizer_config(dir.path(), &from_map);
  EXPECT_EQ(config.at("additional_special_tokens"), json::array({"<s>", "</s>"}));
  EXPECT_EQ(config.at("model_max_length"), 512);
  EXPECT_EQ(from_map.replaced, std::vector<std::string>{"model_max_length"});
  EXPECT_EQ(from_map.merged, std::vector<std::string>{"additional_special_tokens"});
  write_folder(unknown, json::object(), {{"tokenizer_kind", "x"}});
  EXPECT_EQ(read_tokenizer_config(unknown.path(), nullptr, /*allow_unknown_keys=*/true)
                .at("tokenizer_kind"),
            "x");
}

// The fingerprint reads the map where it changes the tokenizer's settings, and only there.
TEST(SpecialTokensMap, CountsInTheFingerprintWhereItChangesTheConfig) {
  test::TempDir tmp;
  const std::string legacy = tmp.file("legacy"), current = tmp.file("current");
  save_model(*LlamaModel::random(random_tiny_config(), 1), legacy);
  save_model(*LlamaModel::random(random_tiny_config(), 1), current);
  json config = read_json_file(current + "/tokenizer_config.json");
  ASSERT_FALSE(config.contains("added_tokens_decoder"));
  const json eos = config.at("eos_token");
  config["added_tokens_decoder"] = json::object();
  tokenizer_test::write_file(current + "/tokenizer_config.json", config.dump());
  const std::string legacy_before = checkpoint_fingerprint(legacy);
  const std::string current_before = checkpoint_fingerprint(current);
  const std::string map_file = "/special_tokens_map.json";
  tokenizer_test::write_file(legacy + map_file, json{{"eos_token", eos}}.dump());  // the same
  EXPECT_EQ(checkpoint_fingerprint(legacy), legacy_before);
  // The same token written as an object with flags, as older files do.
  tokenizer_test::write_file(
      legacy + map_file,
      json{{"eos_token", {{"content", eos.get<std::string>()}, {"lstrip", false}}}}.dump());
  EXPECT_EQ(checkpoint_fingerprint(legacy), legacy_before);
  for (const std::string& dir : {legacy, current})
    tokenizer_test::write_file(dir + map_file, R"({"eos_token": "<unk>"})");
  EXPECT_NE(checkpoint_fingerprint(legacy), legacy_before);
  EXPECT_EQ(checkpoint_fingerprint(current), current_before);
}

}  // namespace
}  // namespace kvb
