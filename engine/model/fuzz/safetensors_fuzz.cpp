// libFuzzer entry: any byte string is a candidate safetensors file. parse_safetensors must
// either return or throw kvb::InputError; anything else (a crash, a sanitizer report, another
// exception type) is a finding. Build and run with ci/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "engine/common/error.h"
#include "engine/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kvb::parse_safetensors(data, size, "fuzz.safetensors");
  } catch (const kvb::InputError&) {
  }
  return 0;
}
