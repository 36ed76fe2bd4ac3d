// Passkey retrieval in InfiniteBench's format: a 5-digit pass key hidden at some depth in a
// repeated noise text; the model must repeat it.
#include <random>

#include "datasets/dataset.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

struct PasskeyParams {
  int64_t context_length = 1024;  // prompt length in the model's tokens (with BOS)
  int samples = 8;                // depths spread evenly over [0, 1]
  int max_new_tokens = 8;

  static const ConfigFields<PasskeyParams>& fields() {
    using P = PasskeyParams;
    static const auto f =
        ConfigFields<P>()
            .field("context_length", &P::context_length,
                   "prompt length in the model's tokens (BOS included)", check::at_least(16))
            .field("samples", &P::samples, "needle depths, spread evenly over [0, 1]",
                   check::at_least(1))
            .field("max_new_tokens", &P::max_new_tokens, "tokens generated per sample",
                   check::at_least(1));
    return f;
  }
};

class Passkey : public Dataset {
 public:
  explicit Passkey(const PasskeyParams& p) : params_(p) {}

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const double depth = params_.samples == 1 ? 0.5 : double(i) / (params_.samples - 1);
      const std::string key = std::to_string(uniform_int(rng, 10000, 99999));
      Sample s;
      s.id = "passkey-" + std::to_string(i);
      s.answers = {key};
      s.max_new_tokens = params_.max_new_tokens;
      s.meta = {{"depth", depth}};
      // One step of the search is one noise sentence, so the prompt lands within a few
      // tokens below context_length.
      s.prompt = fit_to_tokens(tokenizer, params_.context_length, params_.context_length,
                               [&](int64_t sentences) { return render(key, sentences, depth); });
      out.push_back(std::move(s));
    }
    return out;
  }

  double score(const Sample& sample, const std::string& prediction) const override {
    return prediction.find(sample.answers[0]) != std::string::npos ? 100.0 : 0.0;
  }
  std::string metric_name() const override { return "passkey_accuracy"; }

 private:
  // `sentences` noise sentences with the key line at `depth` (between sentences).
  static std::string render(const std::string& key, int64_t sentences, double depth) {
    const int64_t before = int64_t(depth * double(sentences) + 0.5);
    const std::string needle =
        "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
    return "There is an important info hidden inside a lot of irrelevant text. Find it and "
           "memorize it. I will quiz you about the important information there.\n\n" +
           noise_haystack(sentences, {{before, needle}}) +
           "\n\nWhat is the pass key? The pass key is";
  }
  PasskeyParams params_;
};

KVB_REGISTER_DATASET(make_dataset_info<Passkey, PasskeyParams>({
    .name = "passkey",
    .description = "pass key hidden in repeated noise text, depths spread evenly",
    .source = "InfiniteBench passkey format",
}));

}  // namespace
}  // namespace kvb
