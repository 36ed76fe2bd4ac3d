// Reading fields of Hugging Face's tokenizer.json / tokenizer_config.json (nested objects of
// many versions' formats) with errors that name the file and the field, e.g.
// "/m/tokenizer.json: model.merges[3]: expected a string "a b" or a pair [a, b]".
// (engine/common/json_fields.h reads kvbench's own configs, strictly.)
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace kvb::tok {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& field,
                       const std::string& problem);

// obj[key], which must exist (and not be null); `field` is obj's own path ("" at the top).
const json& required(const json& obj, const std::string& key, const std::string& file,
                     const std::string& field);
std::string required_string(const json& obj, const std::string& key, const std::string& file,
                            const std::string& field);
// obj[key] when present and not null, else `fallback`; a value of the wrong type is an error.
bool optional_bool(const json& obj, const std::string& key, bool fallback,
                   const std::string& file, const std::string& field);
std::string optional_string(const json& obj, const std::string& key, const std::string& fallback,
                            const std::string& file, const std::string& field);

// "field.key", or "key" at the top level.
std::string join_field(const std::string& field, const std::string& key);

}  // namespace kvb::tok
