// Small helpers for method config structs.
#pragma once
#include "engine/common/config_fields.h"

namespace kvb {

// A config with no fields: accepts only {} (or null).
struct EmptyConfig {
  static const ConfigFields<EmptyConfig>& fields() {
    static const ConfigFields<EmptyConfig> f;
    return f;
  }
  void check_budget(int64_t, const std::string&) const {}
};

}  // namespace kvb
