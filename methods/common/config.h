// Small helpers for method config structs.
#pragma once
#include "harness/common/json_fields.h"

namespace kvb {

// A config with no fields: accepts only {} (or null).
struct EmptyConfig {
  static EmptyConfig from_json(const json& j, const std::string& where) {
    JsonFields(j, where).finish();
    return {};
  }
  json to_json() const { return json::object(); }
  void check_budget(int64_t, const std::string&) const {}
};

}  // namespace kvb
