// Malformed or unsupported tokenizer files: one InputError naming the file and the field.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixtures.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using nlohmann::json;

// Loads `tokenizer_json` from a temporary folder; returns the InputError's message.
std::string load_error(const std::string& tokenizer_json, const json& config = json::object()) {
  test::TempDir dir;
  tokenizer_test::write_file(dir.file("tokenizer.json"), tokenizer_json);
  tokenizer_test::write_file(dir.file("tokenizer_config.json"), config.dump());
  try {
    Tokenizer::load(dir.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

void expect_error(const std::string& message, const std::string& file,
                  const std::string& field) {
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
}

json sentencepiece() { return tokenizer_test::sentencepiece_tokenizer_json(false); }

TEST(TokenizerErrors, MissingModel) {
  json t = sentencepiece();
  t.erase("model");
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "model: missing");
}

TEST(TokenizerErrors, UnknownModelType) {
  json t = sentencepiece();
  t["model"]["type"] = "Unigram";
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "model.type: unsupported model type \"Unigram\"");
}

TEST(TokenizerErrors, MergesNeitherStringsNorPairs) {
  for (const json& bad : {json(42), json("a"), json("a b c"), json::array({"a"}),
                          json::array({"a", 1})}) {
    json t = sentencepiece();
    t["model"]["merges"][1] = bad;
    expect_error(load_error(t.dump()), "/tokenizer.json: ", "model.merges[1]");
  }
}

TEST(TokenizerErrors, MergeOfUnknownTokens) {
  json t = sentencepiece();
  t["model"]["merges"].push_back("a q");
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "model.merges[4]");
}

TEST(TokenizerErrors, VocabIdOutOfRange) {
  json t = sentencepiece();
  t["model"]["vocab"]["zz"] = 9999;
  const std::string message = load_error(t.dump());
  expect_error(message, "/tokenizer.json: ", "model.vocab[\"zz\"]");
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
  t["model"]["vocab"]["zz"] = "5";
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "model.vocab[\"zz\"]: expected an integer");
}

TEST(TokenizerErrors, AddedTokenIdOutOfRange) {
  json t = sentencepiece();
  t["added_tokens"][0]["id"] = -1;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "added_tokens[0].id");
}

TEST(TokenizerErrors, UnknownSplitRegex) {
  json t = tokenizer_test::byte_level_tokenizer_json(true);
  t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  expect_error(load_error(t.dump()), "/tokenizer.json: ",
               "pre_tokenizer.pretokenizers[0].pattern.Regex: unsupported regex \"\\w+\"");
}

TEST(TokenizerErrors, UnsupportedPipelineParts) {
  json t = sentencepiece();
  t["normalizer"] = {{"type", "NFKC"}};
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "normalizer.type");
  t = sentencepiece();
  t["decoder"]["decoders"][1] = {{"type", "WordPiece"}};
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "decoder.decoders[1].type");
  t = sentencepiece();
  t["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "pre_tokenizer.type");
}

TEST(TokenizerErrors, BadConfigTokens) {
  expect_error(load_error(sentencepiece().dump(), {{"bos_token", "<nope>"}}),
               "/tokenizer_config.json: ", "bos_token");
  expect_error(load_error(sentencepiece().dump(), {{"eos_token", 3}}),
               "/tokenizer_config.json: ", "eos_token");
  expect_error(load_error(sentencepiece().dump(), {{"add_bos_token", true}}),
               "/tokenizer_config.json: ", "add_bos_token");
  expect_error(load_error(sentencepiece().dump(), {{"add_eos_token", true}}),
               "/tokenizer_config.json: ", "add_eos_token");
}

// A BOS in tokenizer_config.json other than the template's: which one transformers adds
// depends on its tokenizer class, unless add_bos_token is set (then the file's, rebuilt).
TEST(TokenizerErrors, ABosOtherThanTheTemplatesNeedsAddBosToken) {
  const std::string llama3 = tokenizer_test::byte_level_tokenizer_json(true).dump();
  const std::string message = load_error(llama3, {{"bos_token", "<|eot_id|>"}});
  expect_error(message, "/tokenizer_config.json: ", "bos_token");
  EXPECT_NE(message.find("set add_bos_token"), std::string::npos) << message;
  EXPECT_EQ(load_error(llama3, {{"bos_token", "<|eot_id|>"}, {"add_bos_token", true}}),
            "no error");
  EXPECT_EQ(load_error(llama3, {{"bos_token", "<|endoftext|>"}}), "no error");  // the same one
}

// Settings that make transformers encode otherwise than tokenizer.json says: refused where true.
TEST(TokenizerErrors, UnreproducedSettings) {
  for (const char* key : {"split_special_tokens", "from_slow", "add_prefix_space", "do_lower_case"}) {
    const std::string m = load_error(sentencepiece().dump(), {{key, true}});
    expect_error(m, "/tokenizer_config.json: ", key);
    EXPECT_NE(m.find("not reproduced"), std::string::npos) << m;
    EXPECT_EQ(load_error(sentencepiece().dump(), {{key, false}}), "no error") << key;
  }
  json t = sentencepiece();
  t["model"]["dropout"] = 0.1;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "model.dropout");
  t["model"]["dropout"] = nullptr;
  EXPECT_EQ(load_error(t.dump()), "no error");
}

// Keys read or known to leave the ids unchanged are accepted; any other is refused naming it,
// or, let through, listed.
TEST(TokenizerErrors, UnknownConfigKeysAreRefusedUnlessLetThrough) {
  const json known = {{"model_max_length", 512},       {"padding_side", "left"},
                      {"legacy", false},               {"tokenizer_class", "LlamaTokenizer"},
                      {"sp_model_kwargs", json::object()}, {"unk_token", "<unk>"},
                      {"pad_token", nullptr},          {"use_default_system_prompt", false}};
  EXPECT_EQ(load_error(sentencepiece().dump(), known), "no error");
  for (const char* key : {"auto_map", "normalize_digits", "tokenizer_type"}) {
    const std::string m = load_error(sentencepiece().dump(), {{key, "x"}});
    expect_error(m, "/tokenizer_config.json: ", key);
    EXPECT_NE(m.find("--allow-unknown-config-keys"), std::string::npos) << m;
  }
  // THUDM/glm-4-9b-chat-hf's keys (its tokens replaced by the fixture's), and what
  // transformers 5 adds when it saves a tokenizer.
  const json glm4 = {{"added_tokens_decoder", {{"1", {{"content", "<s>"}, {"special", true}}}}},
                     {"additional_special_tokens", {"<s>", "</s>"}},
                     {"chat_template", nullptr},
                     {"clean_up_tokenization_spaces", false},
                     {"do_lower_case", false},
                     {"eos_token", "</s>"},
                     {"model_input_names", {"input_ids", "attention_mask"}},
                     {"model_max_length", 128000},
                     {"pad_token", "<unk>"},
                     {"padding_side", "left"},
                     {"remove_space", false},
                     {"tokenizer_class", "PreTrainedTokenizer"},
                     {"backend", "tokenizers"},
                     {"is_local", false},
                     {"model_specific_special_tokens", json::object()},
                     {"special_tokens_map_file", nullptr}};
  EXPECT_EQ(load_error(sentencepiece().dump(), glm4), "no error");
  expect_error(load_error(sentencepiece().dump(), {{"backend", "sentencepiece"}}),
               "/tokenizer_config.json: ", "backend");
  auto tokenizer = Tokenizer::from_json(sentencepiece(), {{"auto_map", "x"}, {"padding_side", "left"}},
                                        "mini", /*allow_unknown_keys=*/true);
  EXPECT_EQ(tokenizer->unknown_config_keys(), std::vector<std::string>{"auto_map"});
}

// transformers adds a named special token tokenizer.json lacks as a new token (new ids), and
// an added_tokens_decoder entry must agree with tokenizer.json.
TEST(TokenizerErrors, NamedSpecialTokensMustBeTokenizerJsonsOwn) {
  expect_error(load_error(sentencepiece().dump(), {{"pad_token", "<pad>"}}),
               "/tokenizer_config.json: ", "pad_token");
  expect_error(load_error(sentencepiece().dump(),
                          {{"additional_special_tokens", {"<s>", {{"content", "<tool>"}}}}}),
               "/tokenizer_config.json: ", "additional_special_tokens[1]");
  expect_error(load_error(sentencepiece().dump(), {{"extra_special_tokens", {{"image", "<img>"}}}}),
               "/tokenizer_config.json: ", "extra_special_tokens.image");
  const json same = {{"1", {{"content", "<s>"}, {"special", true}}}};
  EXPECT_EQ(load_error(sentencepiece().dump(), {{"added_tokens_decoder", same}}), "no error");
  const json other_id = {{"2", {{"content", "<s>"}, {"special", true}}}};
  expect_error(load_error(sentencepiece().dump(), {{"added_tokens_decoder", other_id}}),
               "/tokenizer_config.json: ", "added_tokens_decoder.2");
  const json missing = {{"3", {{"content", "<pad>"}}}};
  expect_error(load_error(sentencepiece().dump(), {{"added_tokens_decoder", missing}}),
               "/tokenizer_config.json: ", "added_tokens_decoder.3");
}

// What transformers would read otherwise than kvbench encodes is refused, naming the field.
TEST(TokenizerErrors, AddedTokensKvbenchDoesNotMatchAsTransformers) {
  json t = sentencepiece();
  t["added_tokens"][1]["lstrip"] = true;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "added_tokens[1].lstrip: true");
  t = sentencepiece();
  t["added_tokens"][2]["single_word"] = true;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "added_tokens[2].single_word");
  t = sentencepiece();
  t["added_tokens"][1]["id"] = 0;  // <s> at <unk>'s id
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "added_tokens[1].id: 0 is also");
  t = sentencepiece();
  t["added_tokens"].push_back(t["added_tokens"][1]);
  t["added_tokens"].back()["id"] = 5;  // "<s>" again, at a vocabulary id of another token
  const std::string twice = load_error(t.dump());
  expect_error(twice, "/tokenizer.json: ", "added_tokens[3].content: \"<s>\" is also");
}

TEST(TokenizerErrors, FileKeysVersionAndPostProcessors) {
  json t = sentencepiece();
  t["foo"] = 1;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "foo: not a key");
  t = sentencepiece();
  t["version"] = "2.0";
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "version: \"2.0\"");
  t = sentencepiece();
  t["decoder"] = nullptr;  // the library joins tokens with spaces then
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "decoder: none");
  t = sentencepiece();
  t["added_tokens"] = nullptr;
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "added_tokens: expected an array");
  t = sentencepiece();
  t["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "post_processor.type: \"RobertaProcessing\"");
  t = sentencepiece();
  t["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {2}}}}}}};
  expect_error(load_error(t.dump()), "/tokenizer.json: ", "post_processor.special_tokens.<s>.ids");
  t["post_processor"]["special_tokens"]["<s>"]["ids"] = {1};  // as the vocabulary: read
  EXPECT_EQ(load_error(t.dump()), "no error");
}

TEST(TokenizerErrors, NullAddBosAndGenerationSettingsThatChangeGreedyDecoding) {
  expect_error(load_error(sentencepiece().dump(), {{"add_bos_token", nullptr}}),
               "/tokenizer_config.json: ", "add_bos_token: null");
  expect_error(load_error(sentencepiece().dump(), {{"add_bos_token", true}, {"bos_token", nullptr}}),
               "/tokenizer_config.json: ", "bos_token: null while add_bos_token is true");
  for (const char* setting :
       {R"({"repetition_penalty": 1.2})", R"({"suppress_tokens": [5]})",
        R"({"min_new_tokens": 3})", R"({"num_beams": 4})", R"([])"}) {
    test::TempDir dir;
    tokenizer_test::write_file(dir.file("tokenizer.json"), sentencepiece().dump());
    tokenizer_test::write_file(dir.file("generation_config.json"), setting);
    try {
      Tokenizer::load(dir.path());
      ADD_FAILURE() << "no error for " << setting;
    } catch (const InputError& e) {
      expect_error(e.what(), "/generation_config.json: ", "");
    }
  }
  {  // let through, recorded with the file it came from
    test::TempDir dir;
    tokenizer_test::write_file(dir.file("tokenizer.json"), sentencepiece().dump());
    tokenizer_test::write_file(dir.file("generation_config.json"), R"({"repetition_penalty": 1.05})");
    const auto tokenizer = Tokenizer::load(dir.path(), /*allow_unknown_keys=*/true);
    EXPECT_EQ(tokenizer->unknown_config_keys(),
              std::vector<std::string>{"generation_config.json: repetition_penalty"});
  }
  // Sampling settings, which the references' scripts override to greedy, and no-op values load.
  test::TempDir dir;
  tokenizer_test::write_file(dir.file("tokenizer.json"), sentencepiece().dump());
  tokenizer_test::write_file(dir.file("generation_config.json"),
                             R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9,
                                 "repetition_penalty": 1.0, "eos_token_id": 2})");
  EXPECT_NO_THROW(Tokenizer::load(dir.path()));
}

TEST(TokenizerErrors, UnreadableFiles) {
  expect_error(load_error("{ not json"), "/tokenizer.json: ", "malformed JSON");
  {
    test::TempDir dir;
    tokenizer_test::write_file(dir.file("tokenizer.json"), sentencepiece().dump());
    std::filesystem::create_directories(dir.file("generation_config.json"));
    try {
      Tokenizer::load(dir.path());
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      expect_error(e.what(), "/generation_config.json", "is a folder");
    }
  }
  {  // a FIFO, whose read would wait for a writer forever
    test::TempDir dir;
    ASSERT_EQ(::mkfifo(dir.file("tokenizer.json").c_str(), 0600), 0);
    try {
      Tokenizer::load(dir.path());
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      expect_error(e.what(), "/tokenizer.json", "not a regular file");
    }
  }
  try {
    Tokenizer::load("/nonexistent/kvbench/model");
    FAIL() << "no error";
  } catch (const InputError& e) {
    expect_error(e.what(), "/nonexistent/kvbench/model/tokenizer.json", "cannot open");
  }
}

TEST(TokenizerErrors, DecodeOfAnIdOutOfRange) {
  auto tok = Tokenizer::from_json(sentencepiece(), json::object(), "mini");
  EXPECT_THROW(tok->decode({266}), InputError);
  EXPECT_THROW(tok->decode({-1}), InputError);
}

}  // namespace
}  // namespace kvb
