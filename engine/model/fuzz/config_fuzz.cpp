// libFuzzer entry for config.json: any byte string is a candidate file. ModelConfig::from_json
// must return or throw kvb::InputError (a crash, a sanitizer report or another exception type
// is a finding), and what it accepts must round-trip through to_json. Run with ci/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "engine/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;  // not JSON: the loader's own error, tested elsewhere
  for (bool allow_unknown : {false, true}) {
    try {
      const kvb::ModelConfig c = kvb::ModelConfig::from_json(j, "fuzz/config.json", allow_unknown);
      const kvb::ModelConfig again =
          kvb::ModelConfig::from_json(c.to_json(), "fuzz/round-trip.json", allow_unknown);
      if (again.to_json() != c.to_json()) std::abort();  // accepted but does not round-trip
    } catch (const kvb::InputError&) {
    }
  }
  return 0;
}
