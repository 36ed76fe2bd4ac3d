// Passkey retrieval: a 5-digit pass key hidden at some depth in a repeated noise text (the
// noise and key sentences of InfiniteBench's passkey task); the model must repeat it, scored as
// InfiniteBench scores it. The instruction is the one InfiniteBench's paper prints ("... Find it
// and memorize it. I will quiz you about the important information there."; its code drops
// "there", Quest's passkey.py says "memorize them"), the question and the answer's start
// Quest's ("What is the pass key? The pass key is"; InfiniteBench's code: "\n\nThe pass key is"
// after its question).
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
                   "about the one context (1: a single key, no door)",
                   check::in_interval("[1, 8]"));
    return f;
  }
};

// The doors whose pass keys a context holds when it holds several.
const char* const kDoors[8] = {"red", "blue", "green", "yellow",
                               "white", "black", "orange", "purple"};

// One pass key of a context: its door ("" for a single key, asked as "the pass key").
struct Needle {
  std::string key, door;
  double depth = 0;
};

std::string name_of(const Needle& n) {
  return n.door.empty() ? "pass key" : "pass key of the " + n.door + " door";
}

// `sentences` noise sentences with each key line at its depth (between sentences).
std::string render_context(const std::vector<Needle>& needles, int64_t sentences) {
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

std::string question(const Needle& n) {
  return "\n\nWhat is the " + name_of(n) + "? The " + name_of(n) + " is";
}

// `keys` needles for sample `index` of `samples`: the first at depth index / (samples - 1),
// the others evenly after it (wrapping around); doors named when there are several.
std::vector<Needle> draw_needles(std::mt19937_64& rng, int keys, int index, int samples) {
  const double depth = samples == 1 ? 0.5 : double(index) / (samples - 1);
  std::vector<Needle> needles;
  for (int k = 0; k < keys; ++k)
    needles.push_back({.key = std::to_string(uniform_int(rng, 10000, 99999)),
                       .door = keys == 1 ? "" : kDoors[k],
                       .depth = std::fmod(depth + double(k) / keys, 1.0 + 1e-9)});
  return needles;
}

// The context holding `needles`, sized so that it and the first question fill about
// `context_length` tokens (one step of the search is one noise sentence).
std::string fitted_context(const Tokenizer& tokenizer, int64_t context_length,
                           const std::vector<Needle>& needles) {
  const std::string prompt =
      fit_to_tokens(
          tokenizer, context_length, context_length,
          [&](int64_t sentences) { return render_context(needles, sentences) + question(needles[0]); },
          /*count_bos=*/true)
          .text;
  return prompt.substr(0, prompt.size() - question(needles[0]).size());
}

// The sample asking `needle`'s pass key after `context`: its question marked, `id` its name.
Sample asking(const std::string& id, const std::string& context, const Needle& needle,
              int max_new_tokens) {
  Sample s;
  s.id = id;
  s.answers = {needle.key};
  s.max_new_tokens = max_new_tokens;
  s.meta = {{"depth", needle.depth}};
  s.prompt = context + question(needle);
  s.question_offset = context.size();
  return s;
}

// The answer's first run of ASCII digits ("" when none), InfiniteBench's first_int_match:
// re.split("[^0-9]", pred)'s first non-empty piece.
std::string first_digit_run(const std::string& prediction) {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto begin = std::find_if(prediction.begin(), prediction.end(), is_digit);
  return std::string(begin, std::find_if_not(begin, prediction.end(), is_digit));
}

// Both datasets' scoring, InfiniteBench's get_score_one_passkey: 100 when the answer's first
// number is the pass key (Quest's passkey.py compares the first \d+ match likewise), so
// "714321", "1. 71432" or another door's key first score 0.
class PasskeyScored : public Dataset {
 public:
  double score(const Sample& sample, const std::string& prediction) const override {
    return first_digit_run(prediction) == sample.answers[0] ? 100.0 : 0.0;
  }
  std::string metric_name() const override { return "passkey_accuracy"; }
};

class Passkey : public PasskeyScored {
 public:
  explicit Passkey(const PasskeyParams& p) : params_(p) {}

  // With several keys each key is a sample "passkey-i.<door>" of context "passkey-i".
  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const std::vector<Needle> needles = draw_needles(rng, params_.keys, i, params_.samples);
      const std::string context = fitted_context(tokenizer, params_.context_length, needles);
      for (const Needle& needle : needles) {
        Sample s = asking(
            "passkey-" + std::to_string(i) + (needle.door.empty() ? "" : "." + needle.door),
            context, needle, params_.max_new_tokens);
        if (params_.keys > 1) s.context_id = "passkey-" + std::to_string(i);
        out.push_back(std::move(s));
      }
    }
    return out;
  }

 private:
  PasskeyParams params_;
};

KVB_REGISTER_DATASET(make_dataset_info<Passkey, PasskeyParams>({
    .name = "passkey",
    .description = "pass key hidden in repeated noise text, depths spread evenly",
    .source = "InfiniteBench's noise, key sentence, instruction (as its paper prints it) and "
              "scoring; Quest's question and answer start",
    .questions_per_context = "`keys` (one question per pass key)",
    .revision = [](const json&) { return 1; },  // 2026-11-30: scored by the first number
}));

struct MultiTurnParams {
  int64_t context_length = 1024;
  int samples = 8;
  int questions = 4;
  int max_new_tokens = 8;

  static const ConfigFields<MultiTurnParams>& fields() {
    using P = MultiTurnParams;
    static const auto f =
        ConfigFields<P>()
            .field("context_length", &P::context_length,
                   "prompt length in the model's tokens, first question included (BOS "
                   "included)", check::at_least(16))
            .field("samples", &P::samples, "conversations; the first key's depth spread evenly "
                   "over [0, 1]", check::at_least(1))
            .field("questions", &P::questions,
                   "pass keys of differently coloured doors in the context, asked one per turn",
                   check::in_interval("[1, 8]"))
            .field("max_new_tokens", &P::max_new_tokens, "tokens generated per answer",
                   check::at_least(1));
    return f;
  }
};

// A chat about one context: `questions` pass keys hidden in it, asked one after the other in
// one session, each question read after the model's previous answer (Sample::follow_ups).
class MultiTurn : public PasskeyScored {
 public:
  explicit MultiTurn(const MultiTurnParams& p) : params_(p) {}

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      // Doors named even for one question, so every turn reads alike.
      std::vector<Needle> needles = draw_needles(rng, params_.questions, i, params_.samples);
      for (size_t k = 0; k < needles.size(); ++k) needles[k].door = kDoors[k];
      const std::string context = fitted_context(tokenizer, params_.context_length, needles);
      Sample s = asking("multi_turn-" + std::to_string(i), context, needles[0],
                        params_.max_new_tokens);
      for (size_t k = 1; k < needles.size(); ++k)
        s.follow_ups.push_back({.text = question(needles[k]), .answers = {needles[k].key},
                                .max_new_tokens = params_.max_new_tokens});
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  MultiTurnParams params_;
};

KVB_REGISTER_DATASET(make_dataset_info<MultiTurn, MultiTurnParams>({
    .name = "multi_turn",
    .description = "a chat about one context: pass keys of coloured doors asked one per turn, "
                   "each after the previous answer",
    .source = "kvbench (passkey's text; SCBench's multi-turn mode with the model's own answers "
              "in the cache, its --disable_golden_context)",
    .questions_per_context = "`questions`, one per turn of one conversation",
    .revision = [](const json&) { return 1; },  // 2026-11-30: scored by the first number
}));

}  // namespace
}  // namespace kvb
