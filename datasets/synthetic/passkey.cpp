// Passkey retrieval in InfiniteBench's format: a 5-digit pass key hidden at some depth in a
// repeated noise text; the model must repeat it.
#include <algorithm>
#include <cmath>
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
  int keys = 1;                   // pass keys per context, each asked separately

  static const ConfigFields<PasskeyParams>& fields() {
    using P = PasskeyParams;
    static const auto f =
        ConfigFields<P>()
            .field("context_length", &P::context_length,
                   "prompt length in the model's tokens (BOS included)", check::at_least(16))
            .field("samples", &P::samples, "needle depths, spread evenly over [0, 1]",
                   check::at_least(1))
            .field("max_new_tokens", &P::max_new_tokens, "tokens generated per sample",
                   check::at_least(1))
            .added_field("keys", &P::keys,
                   "pass keys per context, of doors of different colours, each its own question "
                   "about the one context (1: InfiniteBench's single key and wording)",
                   check::in_interval("[1, 8]"));
    return f;
  }
};

// The doors whose pass keys a context holds when it holds several.
const char* const kDoors[8] = {"red", "blue", "green", "yellow",
                               "white", "black", "orange", "purple"};

class Passkey : public Dataset {
 public:
  explicit Passkey(const PasskeyParams& p) : params_(p) {}

  // Sample i hides its first key at depth i / (samples - 1), the others evenly after it
  // (wrapping around); with several keys each key is a sample "passkey-i.<door>" of context
  // "passkey-i".
  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const double depth = params_.samples == 1 ? 0.5 : double(i) / (params_.samples - 1);
      std::vector<Needle> needles;
      for (int k = 0; k < params_.keys; ++k)
        needles.push_back({.key = std::to_string(uniform_int(rng, 10000, 99999)),
                           .door = params_.keys == 1 ? "" : kDoors[k],
                           .depth = std::fmod(depth + double(k) / params_.keys, 1.0 + 1e-9)});
      // One step of the search is one noise sentence, so the prompt lands within a few
      // tokens below context_length (with the first question).
      const std::string context = fit_to_tokens(
          tokenizer, params_.context_length, params_.context_length, [&](int64_t sentences) {
            return render_context(needles, sentences) + question(needles[0]);
          });
      const std::string shared = context.substr(0, context.size() - question(needles[0]).size());
      for (const Needle& needle : needles) {
        Sample s;
        s.id = "passkey-" + std::to_string(i) + (needle.door.empty() ? "" : "." + needle.door);
        s.answers = {needle.key};
        s.max_new_tokens = params_.max_new_tokens;
        s.meta = {{"depth", needle.depth}};
        s.prompt = shared + question(needle);
        s.question_offset = shared.size();
        if (params_.keys > 1) s.context_id = "passkey-" + std::to_string(i);
        out.push_back(std::move(s));
      }
    }
    return out;
  }

  double score(const Sample& sample, const std::string& prediction) const override {
    return prediction.find(sample.answers[0]) != std::string::npos ? 100.0 : 0.0;
  }
  std::string metric_name() const override { return "passkey_accuracy"; }

 private:
  struct Needle {
    std::string key, door;  // door: "" for the single key
    double depth = 0;
  };
  static std::string name_of(const Needle& n) {
    return n.door.empty() ? "pass key" : "pass key of the " + n.door + " door";
  }
  // `sentences` noise sentences with each key line at its depth (between sentences).
  static std::string render_context(const std::vector<Needle>& needles, int64_t sentences) {
    std::vector<Insert> inserts;
    for (const Needle& n : needles)
      inserts.push_back({int64_t(n.depth * double(sentences) + 0.5),
                         "The " + name_of(n) + " is " + n.key + ". Remember it. " + n.key +
                             " is the " + name_of(n) + "."});
    std::stable_sort(inserts.begin(), inserts.end(),
                     [](const Insert& a, const Insert& b) { return a.position < b.position; });
    return "There is an important info hidden inside a lot of irrelevant text. Find it and "
           "memorize it. I will quiz you about the important information there.\n\n" +
           noise_haystack(sentences, inserts);
  }
  static std::string question(const Needle& n) {
    return "\n\nWhat is the " + name_of(n) + "? The " + name_of(n) + " is";
  }
  PasskeyParams params_;
};

KVB_REGISTER_DATASET(make_dataset_info<Passkey, PasskeyParams>({
    .name = "passkey",
    .description = "pass key hidden in repeated noise text, depths spread evenly",
    .source = "InfiniteBench passkey format",
    .questions_per_context = "`keys` (one question per pass key)",
}));

}  // namespace
}  // namespace kvb
