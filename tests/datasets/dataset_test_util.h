// Helpers for the dataset tests: registry lookup, the two test tokenizers.
#pragma once
#include <memory>
#include <string>

#include "datasets/dataset.h"
#include "engine/model/llama_model.h"
#include "tests/test_util.h"

namespace kvb::test {

// The dataset `name` built from `params` through the registry, as a suite would.
inline std::unique_ptr<Dataset> make_dataset(const std::string& name, const json& params) {
  const DatasetInfo& info = dataset_registry().get(name, "test");
  return info.create(info.normalise_params(params, "test.params"));
}

// random-tiny's built-in byte tokenizer (one token per UTF-8 byte, plus BOS).
inline const Tokenizer& byte_tokenizer() {
  static const std::shared_ptr<LlamaModel> model = LlamaModel::from_reference("random-tiny");
  return *model->tokenizer;
}

inline int64_t token_count(const Tokenizer& t, const std::string& text) {
  return int64_t(t.encode(text, /*add_special=*/true).size());
}

// ${SHARED}/data, or "" when absent.
inline std::string shared_data_dir() {
  const std::string shared = shared_dir();
  return shared.empty() || !std::filesystem::exists(shared + "/data/wordlists/nounlist.txt")
             ? std::string()
             : shared + "/data";
}

#define KVB_REQUIRE_SHARED_DATA(dir_var)                  \
  std::string dir_var = ::kvb::test::shared_data_dir();   \
  if (dir_var.empty())                                    \
  GTEST_SKIP() << "skipped: "                             \
               << ::kvb::test::shared_absent("${SHARED}/data (haystack essays, word lists)")

}  // namespace kvb::test
