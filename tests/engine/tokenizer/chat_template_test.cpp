#include <gtest/gtest.h>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixtures.h"

namespace kvb {
namespace {

using nlohmann::json;

TEST(TokenizerChatTemplate, Apply) {
  EXPECT_EQ(apply_chat_template("none", "Hi"), "Hi");
  EXPECT_EQ(apply_chat_template("llama2", "Hi"), "[INST] Hi [/INST]");
  EXPECT_EQ(apply_chat_template("mistral", "Hi"), "[INST] Hi [/INST]");
  EXPECT_EQ(apply_chat_template("llama3", "Hi"),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::string chatml = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(apply_chat_template("qwen2", "Hi"), chatml);
  EXPECT_EQ(apply_chat_template("chatml", "Hi"), chatml);
  // GLM-4: "[gMASK]<sop>" is the tokenizer's BOS prefix, not part of the text.
  EXPECT_EQ(apply_chat_template("glm4", "Hi"), "<|user|>\nHi<|assistant|>");
}

// LongBench pred.py's build_chat forms: Llama-2 without spaces, and FastChat's vicuna_v1.1
// (what FastChat's conversation.py get_prompt() returns for one user message "P" and an empty
// assistant turn); SnapKV's Llama-3 form (vllm-kvcompress's experiments/util.py).
TEST(TokenizerChatTemplate, LongBenchsForms) {
  EXPECT_EQ(apply_chat_template("llama2_longbench", "P"), "[INST]P[/INST]");
  EXPECT_EQ(apply_chat_template("llama3_snapkv", "P"),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nP<|eot_id|>\n"
            "<|start_header_id|>assistant<|end_header_id|>");
  EXPECT_EQ(apply_chat_template("vicuna", "P"),
            "A chat between a curious user and an artificial intelligence assistant. The "
            "assistant gives helpful, detailed, and polite answers to the user's questions. "
            "USER: P ASSISTANT:");
}

// Llama-3.1's template always writes its system block with the default date, and trims the
// message (Jinja's trim: Python's str.strip(), Unicode whitespace too, not U+200B); PQCache
// renders the model's own template with a system message as text, its BOS written out.
TEST(TokenizerChatTemplate, Llama31AndPqcacheFormsTrimAsJinja) {
  const std::string message = "\xc2\xa0 Hi  there\t\n\xe3\x80\x80";  // NBSP ... U+3000
  EXPECT_EQ(apply_chat_template("llama3_1", message),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
            "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nHi  there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(apply_chat_template("llama3_1_pqcache", "The answer is: "),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a helpful assistant."
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThe answer is:<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(apply_chat_template("llama3_pqcache", "P\xe2\x80\x8b "),  // U+200B is no space
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
            "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nP\xe2\x80\x8b"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(apply_chat_template("llama3_1", " \xff "), apply_chat_template("llama3_1", "\xff"));
  EXPECT_EQ(chat_template_parts("llama3_1").after,
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Where a prompt begins in its wrapped text, also where the template trimmed it: an offset
// past the trimmed front maps into the wrapped text.
TEST(TokenizerChatTemplate, WrappedPromptStartSurvivesATrim) {
  const std::string prompt = " \nContext. Question: ";
  const std::string plain = apply_chat_template("llama3", prompt);
  EXPECT_EQ(wrapped_prompt_start(plain, prompt), plain.find(prompt));
  const std::string trimmed = apply_chat_template("llama3_1", prompt);
  const size_t at = wrapped_prompt_start(trimmed, prompt);
  ASSERT_NE(at, std::string::npos);
  const size_t question = prompt.find("Question:");
  EXPECT_EQ(trimmed.substr(at + question, 9), "Question:");
  EXPECT_EQ(trimmed.substr(at + 2, 8), "Context.");
  EXPECT_EQ(wrapped_prompt_start("other text", prompt), std::string::npos);
  EXPECT_EQ(wrapped_prompt_start("<|eot_id|>", "  "), std::string::npos);  // nothing but spaces
}

TEST(TokenizerChatTemplate, PartsAreWhatComesBeforeAndAfterTheMessage) {
  EXPECT_EQ(chat_template_parts("llama2").before, "[INST] ");
  EXPECT_EQ(chat_template_parts("llama2").after, " [/INST]");
  EXPECT_EQ(chat_template_parts("none").before, "");
  EXPECT_EQ(chat_template_parts("none").after, "");
  EXPECT_EQ(chat_template_parts("chatml").after, "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(TokenizerChatTemplate, UnknownNameListsTheKnownOnes) {
  try {
    apply_chat_template("alpaca", "Hi");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("alpaca"), std::string::npos) << message;
    for (const char* name : {"none", "llama2", "mistral", "llama3", "qwen2", "chatml"}) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
}

TEST(TokenizerChatTemplate, Detect) {
  EXPECT_EQ(detect_chat_template(json::object()), "none");
  EXPECT_EQ(detect_chat_template({{"chat_template", nullptr}}), "none");
  EXPECT_EQ(detect_chat_template(
                {{"chat_template",
                  "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                  "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"}}),
            "llama3");
  EXPECT_EQ(detect_chat_template(
                {{"chat_template",
                  "{{- bos_token }}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
                  "{{- \"Cutting Knowledge Date: December 2023\\n\" }}"}}),
            "llama3_1");
  EXPECT_EQ(detect_chat_template({{"chat_template",
                                   "{% if messages[0]['role'] == 'system' %}<<SYS>>\\n{% endif %}"
                                   "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"}}),
            "llama2");
  EXPECT_EQ(detect_chat_template(
                {{"chat_template", "{{ bos_token }}{% for m in messages %}{{ '[INST] ' + "
                                   "m['content'] + ' [/INST]' }}{% endfor %}"}}),
            "mistral");
  const std::string chatml = "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n'}}{% endfor %}";
  EXPECT_EQ(detect_chat_template({{"chat_template", chatml}}), "chatml");
  EXPECT_EQ(detect_chat_template({{"chat_template", chatml}, {"tokenizer_class", "Qwen2Tokenizer"}}),
            "qwen2");
  EXPECT_EQ(detect_chat_template(
                {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}},
                                                {{"name", "default"}, {"template", chatml}}})}}),
            "chatml");
  EXPECT_EQ(detect_chat_template(
                {{"chat_template", "[gMASK]<sop>{% for item in messages %}{% if item['role'] == "
                                   "'user' %}<|user|>\n{{ item['content'] }}{% endif %}{% endfor %}"
                                   "{% if add_generation_prompt %}<|assistant|>{% endif %}"}}),
            "glm4");
  EXPECT_EQ(detect_chat_template({{"chat_template", "{{ messages }}"}}), "other");
  EXPECT_THROW(detect_chat_template({{"chat_template", ""}}), InputError);  // no template
  EXPECT_THROW(detect_chat_template({{"chat_template", json::array({{{"name", "tool_use"},
                                                                      {"template", "x"}}})}}),
               InputError);  // no "default" one
}

// The model's own template as transformers renders it for one user message (the generation
// prompt added, the special tokens tokenizer_config.json sets), less the BOS the tokenizer
// adds at encoding; refused where the text does not begin with that BOS.
TEST(TokenizerChatTemplate, TheModelsOwnTemplateRenderedLessItsBos) {
  const auto tokenizer = Tokenizer::load(std::string(KVBENCH_SOURCE_DIR) + "/models/kvbench-tiny");
  json config = {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}, {"lstrip", false}}},
                 {"chat_template",
                  "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content | trim }} "
                  "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
                  "{{ tools is none }}{{ documents is none }}{{ pad_token is defined }}"}};
  EXPECT_EQ(apply_model_chat_template(config, *tokenizer, " Hi ", "m/tokenizer_config.json: chat_template"),
            "[user] Hi </s>[assistant]TrueTrueFalse");
  config["chat_template"] = "[{{ messages[0].content }}]";  // no BOS written
  try {
    apply_model_chat_template(config, *tokenizer, "Hi", "m/tokenizer_config.json: chat_template");
    ADD_FAILURE() << "a template without the tokenizer's BOS was taken";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "m/tokenizer_config.json: chat_template: the text it renders does not begin with "
              "<s>, which the tokenizer adds (transformers' apply_chat_template would feed "
              "none): name a template");
  }
  config["chat_template"] = "{{ bos_token }}{% macro x() %}{% endmacro %}";
  EXPECT_THROW(apply_model_chat_template(config, *tokenizer, "Hi", "m"), InputError);
  EXPECT_THROW(apply_model_chat_template(json::object(), *tokenizer, "Hi", "m"), InputError);
}

// A prefix of two special tokens (GLM-4's [gMASK] <sop>, here the fixture's two) that the
// template writes out as text: both given up to the tokenizer.
TEST(TokenizerChatTemplate, TheModelsOwnTemplateLessATwoTokenPrefix) {
  nlohmann::json j = tokenizer_test::byte_level_tokenizer_json(true);
  auto special = [](const char* id) {
    return nlohmann::json{{"SpecialToken", {{"id", id}, {"type_id", 0}}}};
  };
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {special("<|endoftext|>"), special("<|eot_id|>"),
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  const auto tokenizer = Tokenizer::from_json(j, json::object(), "glm");
  const json config = {{"chat_template", "<|endoftext|><|eot_id|>{% for m in messages %}<|user|>\n"
                                         "{{ m.content }}{% endfor %}<|assistant|>"}};
  EXPECT_EQ(apply_model_chat_template(config, *tokenizer, "ok", "glm"), "<|user|>\nok<|assistant|>");
}

}  // namespace
}  // namespace kvb
