// Helpers for the dataset tests: registry lookup, the two test tokenizers.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/common/error.h"
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

// The message of the InputError `f` throws, or "no error".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
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

// RULER's sizing seen in its samples (NVIDIA/RULER's prepare scripts): a task's samples hold
// its size or whole steps less. Counts, over the tasks checked, the samples that held less.
struct StepDrops {
  int dropped = 0, total = 0;

  // One task's samples and each one's haystack units (`what`: "units", "words"...): each is
  // the largest or whole `step`s below it. Returns, per sample, whether it held less.
  std::vector<bool> check(const std::vector<Sample>& samples, const std::vector<int64_t>& sizes,
                          int64_t step, const std::string& what, uint64_t seed) {
    const int64_t size = *std::max_element(sizes.begin(), sizes.end());
    std::vector<bool> less;
    for (size_t i = 0; i < samples.size(); ++i, ++total) {
      EXPECT_EQ((size - sizes[i]) % step, 0) << "seed " << seed << " " << samples[i].id << ": "
                                             << sizes[i] << " " << what << ", task " << size;
      less.push_back(sizes[i] < size);
      dropped += less.back();
    }
    return less;
  }
  // Some sample held less (else the seeds test no step), not all.
  void expect_some_dropped() const {
    EXPECT_GT(dropped, 0) << "no sample overflowed the task's size: the seeds test nothing";
    EXPECT_LT(dropped, total);
  }
};

}  // namespace kvb::test
