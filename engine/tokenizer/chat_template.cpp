// Built-in chat templates: the single-user-turn prompt of each model family, without Jinja.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/tokenizer/jinja.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace kvb {
namespace {

// chat_template_names(), joined for messages.
std::string known_templates() {
  std::string out;
  for (const std::string& name : chat_template_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// chat_template is a string, or a list of {"name", "template"} (the "default" one is used).
std::string template_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return "";
  for (const nlohmann::json& entry : value) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return entry["template"].get<std::string>();
    }
  }
  return "";
}

// What transformers passes a chat template besides the messages: tools and documents (None)
// and the tokenizer's special_tokens_map, the tokens that are set.
nlohmann::ordered_json template_variables(const nlohmann::json& tokenizer_config,
                                          const std::string& user_message) {
  nlohmann::ordered_json variables;
  variables["messages"] = nlohmann::ordered_json::array(
      {nlohmann::ordered_json{{"role", "user"}, {"content", user_message}}});
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = true;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!tokenizer_config.contains(key)) continue;
    if (const auto token = special_token_text(tokenizer_config[key])) variables[key] = *token;
  }
  if (tokenizer_config.contains("additional_special_tokens") &&
      tokenizer_config["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
    for (const nlohmann::json& t : tokenizer_config["additional_special_tokens"])
      if (const auto token = special_token_text(t)) tokens.push_back(*token);
    variables["additional_special_tokens"] = tokens;
  }
  return variables;
}

bool contains(const std::string& text, const char* marker) {
  return text.find(marker) != std::string::npos;
}

// Llama-3.1-Instruct's template (tokenizer_config.json) for one user message: its system block
// always, with its default date and `system` ("" without a system message), the message
// trimmed.
std::string llama3_1_turn(const std::string& system, const std::string& user_message) {
  return "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
         "2023\nToday Date: 26 Jul 2024\n\n" + system +
         "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" +
         unicode::python_strip(user_message) +
         "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
}

}  // namespace

std::optional<std::string> special_token_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

void check_chat_template_tokens(const std::string& template_name, const Tokenizer& tokenizer,
                                const std::string& where) {
  static const std::vector<std::string> markers = {
      "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",  // llama3
      "<|im_start|>", "<|im_end|>",                             // qwen2, chatml
      "<|user|>", "<|assistant|>"};                             // glm4
  const ChatTemplateParts parts = chat_template_parts(template_name);
  const std::string added = parts.before + parts.after;
  for (const std::string& marker : markers)
    if (added.find(marker) != std::string::npos &&
        tokenizer.encode(marker, /*add_special=*/false).size() != 1)
      throw InputError(where + ": " + template_name + "'s " + marker + " is no token of this "
                       "model's tokenizer (it would be read as text; a template of another "
                       "model family?)");
}

std::string apply_chat_template(const std::string& template_name, const std::string& user_message) {
  if (template_name == "none") return user_message;
  if (template_name == "llama2" || template_name == "mistral") {
    return "[INST] " + user_message + " [/INST]";
  }
  // THUDM/LongBench pred.py's build_chat for Llama-2 chat models: no spaces inside the tags.
  if (template_name == "llama2_longbench") return "[INST]" + user_message + "[/INST]";
  if (template_name == "vicuna") {
    // FastChat's vicuna_v1.1 conversation (system message, "USER: ", " ASSISTANT:"), which
    // LongBench's pred.py uses for LongChat and Vicuna models.
    return "A chat between a curious user and an artificial intelligence assistant. The "
           "assistant gives helpful, detailed, and polite answers to the user's questions. "
           "USER: " +
           user_message + " ASSISTANT:";
  }
  if (template_name == "llama3") {
    return "<|start_header_id|>user<|end_header_id|>\n\n" + user_message +
           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  // Llama-3.1's own, as transformers renders it (its BOS the tokenizer's).
  if (template_name == "llama3_1") return llama3_1_turn("", user_message);
  // PQCache's vq_pred.py: the model's own template with the system message "You are a helpful
  // assistant." rendered as text (tokenize=False: its <|begin_of_text|> written out, and the
  // tokenizer adds another), for Llama-3 and Llama-3.1.
  if (template_name == "llama3_pqcache") {
    return "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
           "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" +
           unicode::python_strip(user_message) +
           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  if (template_name == "llama3_1_pqcache")
    return "<|begin_of_text|>" + llama3_1_turn("You are a helpful assistant.", user_message);
  // SnapKV's build_chat for Llama-3 models (vllm-kvcompress's LongBench runner): its own BOS
  // written out (the tokenizer adds another), a newline after <|eot_id|>, none after the
  // assistant's header.
  if (template_name == "llama3_snapkv") {
    return "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + user_message +
           "<|eot_id|>\n<|start_header_id|>assistant<|end_header_id|>";
  }
  if (template_name == "qwen2" || template_name == "chatml") {
    return "<|im_start|>user\n" + user_message + "<|im_end|>\n<|im_start|>assistant\n";
  }
  if (template_name == "glm4") {
    // GLM-4's template starts with "[gMASK]<sop>", which its tokenizer's post-processor adds
    // as the BOS prefix (encode with add_bos), so the text here starts at the user turn.
    return "<|user|>\n" + user_message + "<|assistant|>";
  }
  throw InputError("chat template: unknown name \"" + template_name + "\" (known: " +
                   known_templates() + ")");
}

size_t wrapped_prompt_start(const std::string& wrapped, const std::string& prompt) {
  const size_t at = wrapped.find(prompt);
  if (at != std::string::npos) return at;
  const std::string trimmed = unicode::python_strip(prompt);
  const size_t in_wrapped = wrapped.find(trimmed), in_prompt = prompt.find(trimmed);
  if (trimmed.empty() || in_wrapped == std::string::npos || in_wrapped < in_prompt)
    return std::string::npos;
  return in_wrapped - in_prompt;
}

ChatTemplateParts chat_template_parts(const std::string& template_name) {
  const std::string marker = "\x01";  // in no template's own text
  const std::string wrapped = apply_chat_template(template_name, marker);
  const size_t at = wrapped.find(marker);
  return {wrapped.substr(0, at), wrapped.substr(at + marker.size())};
}

std::string detect_chat_template(const nlohmann::json& tokenizer_config) {
  if (!tokenizer_config.is_object() || !tokenizer_config.contains("chat_template")) return "none";
  const nlohmann::json& value = tokenizer_config["chat_template"];
  if (value.is_null()) return "none";
  const std::string text = template_text(value);
  if (text.empty())
    throw InputError("tokenizer_config.json: chat_template: neither a template's text nor a list "
                     "holding a \"default\" one");
  if (contains(text, "<|start_header_id|>"))
    return contains(text, "Cutting Knowledge Date") ? "llama3_1" : "llama3";
  if (contains(text, "<|im_start|>")) {
    const std::string cls = tokenizer_config.value("tokenizer_class", "");
    return cls.rfind("Qwen2", 0) == 0 ? "qwen2" : "chatml";
  }
  if (contains(text, "[gMASK]") && contains(text, "<|user|>")) return "glm4";
  if (contains(text, "[INST]")) return contains(text, "<<SYS>>") ? "llama2" : "mistral";
  return "other";
}

std::string render_model_chat_template(const nlohmann::json& tokenizer_config,
                                       const std::string& user_message, const std::string& where) {
  const std::string source = tokenizer_config.contains("chat_template")
                                 ? template_text(tokenizer_config["chat_template"])
                                 : "";
  if (source.empty())
    throw InputError(where + ": the model has no chat template (nor chat_template.jinja): name "
                     "one");
  return render_jinja(source, template_variables(tokenizer_config, user_message), where);
}

std::string apply_model_chat_template(const nlohmann::json& tokenizer_config,
                                      const Tokenizer& tokenizer, const std::string& user_message,
                                      const std::string& where) {
  const std::string text = render_model_chat_template(tokenizer_config, user_message, where);
  // transformers encodes the rendered text without adding special tokens; kvbench's encode
  // adds the tokenizer's prefix, so the text gives it up here.
  const std::vector<int> prefix = tokenizer.special_prefix();
  if (prefix.empty()) return text;
  const std::string written = tokenizer.decode(prefix, /*skip_special=*/false);
  if (text.compare(0, written.size(), written) != 0)
    throw InputError(where + ": the text it renders does not begin with " + written +
                     ", which the tokenizer adds (transformers' apply_chat_template would feed "
                     "none): name a template");
  return text.substr(written.size());
}

const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> names = {
      "none", "llama2", "mistral", "llama3", "qwen2", "chatml", "glm4", "vicuna",
      "llama2_longbench", "llama3_snapkv", "llama3_1", "llama3_pqcache", "llama3_1_pqcache"};
  return names;
}

}  // namespace kvb
