#include "engine/common/json_fields.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/nearest_name.h"

namespace kvb {

std::string json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

JsonFields::JsonFields(const json& object, std::string where)
    : object_(object.is_null() ? json::object() : object), where_(std::move(where)) {
  if (!object_.is_object())
    throw InputError(where_ + ": expected an object, got " + json_type_name(object_));
}

const json* JsonFields::raw(const std::string& key) {
  seen_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

void JsonFields::finish() const {
  for (const auto& item : object_.items()) {
    if (seen_.count(item.key())) continue;
    std::string known;
    for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
    throw InputError(where_ + ": unknown key \"" + item.key() + "\"" +
                     did_you_mean(item.key(), {seen_.begin(), seen_.end()}) +
                     (known.empty() ? std::string(" (it takes none)")
                                    : " (expected one of: " + known + ")"));
  }
}

void JsonFields::type_error(const json& v, const std::string& key, const char* expected) const {
  throw InputError(path(key) + ": expected " + expected + ", got " + json_type_name(v));
}

void JsonFields::read(const json& v, const std::string& key, int64_t& out) {
  if (!v.is_number_integer()) type_error(v, key, "an integer");
  out = v.get<int64_t>();
}

void JsonFields::read(const json& v, const std::string& key, int& out) {
  int64_t wide = 0;
  read(v, key, wide);
  if (wide < INT32_MIN || wide > INT32_MAX) type_error(v, key, "a 32-bit integer");
  out = static_cast<int>(wide);
}

void JsonFields::read(const json& v, const std::string& key, double& out) {
  if (!v.is_number()) type_error(v, key, "a number");
  out = v.get<double>();
}

void JsonFields::read(const json& v, const std::string& key, bool& out) {
  if (!v.is_boolean()) type_error(v, key, "a boolean");
  out = v.get<bool>();
}

void JsonFields::read(const json& v, const std::string& key, std::string& out) {
  if (!v.is_string()) type_error(v, key, "a string");
  out = v.get<std::string>();
}

void JsonFields::read(const json& v, const std::string& key, std::vector<int64_t>& out) {
  if (!v.is_array()) type_error(v, key, "an array of integers");
  out.clear();
  for (const auto& item : v) {
    if (!item.is_number_integer()) type_error(item, key, "an array of integers");
    out.push_back(item.get<int64_t>());
  }
}

void JsonFields::read(const json& v, const std::string& key, std::vector<std::string>& out) {
  if (!v.is_array()) type_error(v, key, "an array of strings");
  out.clear();
  for (const auto& item : v) {
    if (!item.is_string()) type_error(item, key, "an array of strings");
    out.push_back(item.get<std::string>());
  }
}

json read_json_file(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error && error != std::errc::no_such_file_or_directory)
    throw InputError(path + ": " + error.message());  // a symbolic link loop, say
  if (std::filesystem::is_directory(status)) throw InputError(path + ": is a folder, not a file");
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw InputError(path + ": not a regular file");  // a FIFO would block the read
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    throw InputError(path + ": malformed JSON: " + e.what());
  }
}

json parse_json_object(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    throw InputError(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError(where + ": expected a JSON object, got " + json_type_name(j));
  return j;
}

std::vector<std::string> unknown_config_keys(const json& object, const std::string& file,
                                             const std::function<bool(const std::string&)>& is_known,
                                             const std::string& what_it_may_change,
                                             bool allow_unknown) {
  std::vector<std::string> unknown;
  for (const auto& item : object.items()) {
    if (is_known(item.key())) continue;
    if (!allow_unknown)
      throw InputError(file + ": field '" + item.key() + "': unknown key: kvbench cannot tell " +
                       "whether it changes " + what_it_may_change + ", so it refuses to guess " +
                       "(pass --allow-unknown-config-keys to run anyway; the run records it)");
    unknown.push_back(item.key());
  }
  return unknown;
}

json stored_object(const std::string& text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_object() ? value : json::object();
}

std::string indented_json(const std::string& text) {
  const json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? text : value.dump(2);
}

}  // namespace kvb
