// libFuzzer entry for tokenizer.json: any byte string is a candidate file. Tokenizer::from_json
// must return or throw kvb::InputError; a tokenizer it accepts must encode and decode a fixed
// text without crashing (a crash, a sanitizer report or another exception type is a finding).
// Run with ci/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    auto tokenizer = kvb::Tokenizer::from_json(j, nlohmann::json::object(), "fuzz");
    const std::vector<int> ids = tokenizer->encode("Hello, world! 1234 \xc3\xa9t\xc3\xa9\n", true);
    tokenizer->decode(ids);
  } catch (const kvb::InputError&) {
  }
  return 0;
}
