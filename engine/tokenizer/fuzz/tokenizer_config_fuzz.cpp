// libFuzzer entry for tokenizer_config.json: any byte string is a candidate file, read beside a
// fixed, valid tokenizer.json (KVBENCH_FUZZ_TOKENIZER_JSON, set by ci/fuzz.sh to
// stories260K's). Tokenizer::from_json and detect_chat_template must return or throw
// kvb::InputError; an accepted pair must encode (BOS as configured), render its chat template
// (render_jinja's parser and renderer on any text), and decode without crashing. Run with
// ci/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"

namespace {
nlohmann::json tokenizer_json;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("KVBENCH_FUZZ_TOKENIZER_JSON");
  std::ifstream in(path ? path : "");
  tokenizer_json = nlohmann::json::parse(in, nullptr, false);
  if (!path || tokenizer_json.is_discarded()) {
    std::fprintf(stderr, "set KVBENCH_FUZZ_TOKENIZER_JSON to a valid tokenizer.json\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, false);
  if (config.is_discarded()) return 0;
  try {
    const std::string family = kvb::detect_chat_template(config);
    auto tokenizer = kvb::Tokenizer::from_json(tokenizer_json, config, "fuzz");
    const std::string prompt =
        family == "none" ? "Where is the key? 42"
                         : kvb::apply_model_chat_template(config, *tokenizer, "Where is the key? 42",
                                                          "fuzz: chat_template");
    tokenizer->decode(tokenizer->encode(prompt, tokenizer->add_bos_by_default()));
  } catch (const kvb::InputError&) {
  }
  return 0;
}
