// Strict reading of JSON objects into config structs: wrong types and unknown keys are
// InputErrors that name the file, the JSON path and what was expected.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/common/error.h"

namespace kvb {

using json = nlohmann::json;

// Human name of a JSON value's type, for messages ("a string", "an array", ...).
std::string json_type_name(const json& value);

// Reads the fields of one JSON object (null reads as {}: every field at its default).
// `where` is "file.json: $.path" and prefixes every error.
// Usage: JsonFields f(j, where); f.get("window", cfg.window); ...; f.finish();
class JsonFields {
 public:
  JsonFields(const json& object, std::string where);

  template <typename T>
  bool get(const std::string& key, T& out) {  // optional field: leaves `out` when absent
    seen_.insert(key);
    auto it = object_.find(key);
    if (it == object_.end()) return false;
    read(*it, key, out);
    return true;
  }
  template <typename T>
  void require(const std::string& key, T& out) {
    if (!get(key, out)) throw InputError(where_ + ": missing required field \"" + key + "\"");
  }
  const json* raw(const std::string& key);  // any type, nullptr when absent
  std::string path(const std::string& key) const { return where_ + "." + key; }
  // Fails on keys that were never asked for, listing the known ones.
  void finish() const;

 private:
  void read(const json& v, const std::string& key, int& out);
  void read(const json& v, const std::string& key, int64_t& out);
  void read(const json& v, const std::string& key, double& out);
  void read(const json& v, const std::string& key, bool& out);
  void read(const json& v, const std::string& key, std::string& out);
  void read(const json& v, const std::string& key, std::vector<int64_t>& out);
  void read(const json& v, const std::string& key, std::vector<std::string>& out);
  [[noreturn]] void type_error(const json& v, const std::string& key, const char* expected) const;

  json object_;  // a copy: callers often pass temporaries
  std::string where_;
  std::set<std::string> seen_;
};

// Reads a JSON file; a missing file or a parse error is an InputError naming the file.
json read_json_file(const std::string& path);

// Parses one JSON object (a jsonl line, say); anything else is an InputError at `where`.
json parse_json_object(const std::string& text, const std::string& where);

// A stored JSON object read back for display (a results database's config): {} where the text
// is not one, so a damaged row is shown, not a crash.
json stored_object(const std::string& text);
// `text` indented when it is JSON, else as it is.
std::string indented_json(const std::string& text);

// The keys of a model file's `object` (config.json, tokenizer_config.json) that `is_known`
// refuses. Unless `allow_unknown`, the first is an InputError "<file>: field '<key>': unknown
// key: kvbench cannot tell whether it changes <what_it_may_change>, ..." that names the flag
// letting it through.
std::vector<std::string> unknown_config_keys(const json& object, const std::string& file,
                                             const std::function<bool(const std::string&)>& is_known,
                                             const std::string& what_it_may_change,
                                             bool allow_unknown);

}  // namespace kvb
