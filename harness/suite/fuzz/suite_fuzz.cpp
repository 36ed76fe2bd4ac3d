// libFuzzer entry for suite files: any byte string is a candidate suite JSON. parse_suite must
// return or throw kvb::InputError (a crash, a sanitizer report or another exception type is a
// finding); a suite it accepts must list its cells, and each cell's key must parse back as
// JSON. Run with ci/fuzz.sh (seeded from suites/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "harness/suite/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;  // not JSON: read_json_file's own error, tested elsewhere
  try {
    const kvb::Suite suite = kvb::parse_suite(j, "fuzz/suite.json");
    size_t listed = 0;
    for (const kvb::Cell& cell : suite.cells()) {
      if (nlohmann::json::parse(cell.key(), nullptr, false).is_discarded()) std::abort();
      if (++listed > 100000) break;  // a suite may multiply into many cells: enough seen
    }
  } catch (const kvb::InputError&) {
  }
  return 0;
}
