#include "engine/tokenizer/tokenizer_json.h"

#include "engine/common/error.h"

namespace kvb::tok {

void fail(const std::string& file, const std::string& field, const std::string& problem) {
  throw InputError(file + ": " + (field.empty() ? "" : field + ": ") + problem);
}

std::string join_field(const std::string& field, const std::string& key) {
  return field.empty() ? key : field + "." + key;
}

const json& required(const json& obj, const std::string& key, const std::string& file,
                     const std::string& field) {
  if (!obj.is_object()) fail(file, field, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) fail(file, join_field(field, key), "missing");
  return *it;
}

std::string required_string(const json& obj, const std::string& key, const std::string& file,
                            const std::string& field) {
  const json& value = required(obj, key, file, field);
  if (!value.is_string()) fail(file, join_field(field, key), "expected a string");
  return value.get<std::string>();
}

bool optional_bool(const json& obj, const std::string& key, bool fallback,
                   const std::string& file, const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(file, join_field(field, key), "expected true or false");
  return it->get<bool>();
}

std::string optional_string(const json& obj, const std::string& key, const std::string& fallback,
                            const std::string& file, const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail(file, join_field(field, key), "expected a string");
  return it->get<std::string>();
}

}  // namespace kvb::tok
