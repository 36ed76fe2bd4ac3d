// The datasets' extension point: a dataset is one class that produces samples (prompt text and
// reference answers) for a model's tokenizer, and scores a prediction.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/config_fields.h"
#include "engine/common/registry.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb {

using json = nlohmann::json;

struct Sample {
  std::string id;
  std::string prompt;                // the full prompt text (template applied)
  std::vector<std::string> answers;  // reference answers
  int max_new_tokens = 32;
  json meta = json::object();        // e.g. needle depth
  // Teacher-forced datasets (Dataset::teacher_forced()): the text whose tokens are fed one by
  // one after the prompt and scored by their negative log-likelihood instead of generating.
  std::string reference_continuation;
  // Teacher-forced datasets may give the tokens themselves (perplexity: windows of one
  // tokenisation of the whole text). The runner then feeds the tokenizer's prefix (BOS) and
  // `prompt_ids`, and scores `continuation_ids`, instead of encoding `prompt` and
  // `reference_continuation` (their text, decoded from a window, need not encode back to it:
  // a window may begin inside a word or a character).
  std::vector<int> prompt_ids, continuation_ids;
  // "none": `prompt` is final. "auto": the runner wraps `prompt` in the model's own chat
  // template (apply_model_chat_template: its Jinja rendered) before encoding.
  std::string chat_template = "none";
  // With "auto": the built-in template the dataset's reference scripts wrap a family's models
  // in (detect_chat_template's family), where it is not the model's own ("none": left
  // unwrapped; LongBench's pred.py: Mistral).
  std::map<std::string, std::string> auto_chat_as;
  // Extra stop texts besides EOS (LongBench samsum stops at "\n"): generation also stops at the
  // last token id of tokenizer.encode(text, /*add_special=*/false), as LongBench does.
  std::vector<std::string> stop_texts;
  // Tokens generated before a stop id may end the answer (LongBench samsum: 1, its pred.py's
  // min_length of the prompt + 1 keeps the first token from being EOS or "\n").
  int min_new_tokens = 0;
  // Generation stops at the tokenizer's eos_token (tokenizer_config.json's) and `stop_texts`
  // alone, not at the model's other EOS ids (config.json's, generation_config.json's): the
  // reference passes eos_token_id=[tokenizer.eos_token_id] or compares with it.
  bool stops_at_eos_token_only = false;
  // Chat families (detect_chat_template's names) whose models stop at every EOS id all the
  // same (ClusterKV's pred.py: GLM-4 at its three ids, every other model at eos_token alone).
  std::vector<std::string> every_eos_id_families;
  // Generated tokens not compared with the stop ids (Quest's and ClusterKV's decode loops
  // compare from the second on): a stop id among them is generated on, and its text dropped
  // from the answer as a special token's. Unlike min_new_tokens, nothing is suppressed.
  int unchecked_new_tokens = 0;
  // Where the question begins in `prompt` (npos: the dataset does not say): the text before it
  // is the context, which context_sharing "per_sample" prefills and compresses without the
  // question. Samples with the same non-empty `context_id` are questions about one context:
  // the same text before their question_offset.
  size_t question_offset = std::string::npos;
  std::string context_id;
  // Where the prompt is encoded in pieces (offsets into `prompt`, ascending, the first > 0;
  // question_offset one of them): the text before the first with BOS, each piece from one
  // offset to the next (the last to the end) apart without it, the ids joined, as SCBench
  // encodes its turns. A tokenizer merging across a boundary then cuts one context's turns at
  // the same tokens, and reads an answer as SCBench does. Empty: the prompt is one text.
  std::vector<size_t> encoded_apart_at;
  // The end of the prompt the reference reads through decode steps, one token each, not the
  // prefill (Quest's and ClusterKV's LongBench pred.py, "simulate decoding in the question
  // stage"): of the prompt text as the model reads it (chat template applied), the part from
  // the last `decoded_anchor` when that lies within its last `decoded_chars` characters (code
  // points), else its last `decoded_chars`; encoded apart, its first token (BOS) dropped.
  // 0: all prefilled.
  size_t decoded_chars = 0;
  std::string decoded_anchor;
  // Questions asked after this sample's answer in the same session, in order, as a chat's next
  // turns: each turn's text is read right after the previous answer (the model's own), and its
  // answer generated and scored like the sample's with the turn's answers.
  struct Turn {
    std::string text;
    std::vector<std::string> answers;
    int max_new_tokens = 32;
  };
  std::vector<Turn> follow_ups;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // The samples for `tokenizer` (lengths are measured in its tokens), deterministic for `seed`.
  virtual std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const = 0;
  // Score of one prediction in [0, 100].
  virtual double score(const Sample& sample, const std::string& prediction) const = 0;
  virtual std::string metric_name() const = 0;
  // True when samples are scored by teacher forcing `reference_continuation` (perplexity)
  // rather than by generating; score() is then not called.
  virtual bool teacher_forced() const { return false; }
  // Cell metrics beside the mean score, from the samples and each one's answer (its
  // follow-ups' not included), in order. LongBench-E: each length range's score and record
  // count.
  struct CellMetric {
    std::string name;
    double value = 0;
    std::string unit;
  };
  virtual std::vector<CellMetric> score_breakdown(
      const std::vector<Sample>& /*samples*/, const std::vector<std::string>& /*answers*/) const {
    return {};
  }
};

struct DatasetInfo {
  std::string name;
  std::string description;
  std::string source;  // where its format comes from
  // What is not faithful to that source yet ("" where nothing is known), for `kvbench list`.
  std::string fidelity;
  // How many questions its samples ask about one context under context_sharing "per_sample"
  // (kvbench list datasets); "" when its samples do not mark their question (question_offset),
  // so it cannot share contexts.
  std::string questions_per_context;
  // Whether its reference prefills (and compresses) a context before reading the questions
  // about it (SCBench): a suite must then state context_sharing, since the default "none"
  // prefills each question with its context, which the reference never does.
  bool reference_shares_context = false;
  // Params without a default, which a suite must give (shown by `kvbench list datasets`).
  std::vector<std::string> required_params;
  // Every other param with its default (`kvbench list datasets`).
  std::function<json()> default_params;
  // Every param: name, type, default, what it does (`kvbench list datasets`).
  std::vector<FieldDoc> param_fields;
  // Validates `params` (defaults filled in) and returns them normalised; InputError naming
  // `where` and the field.
  std::function<json(const json& params, const std::string& where)> normalise_params;
  std::function<std::unique_ptr<Dataset>(const json& params)> create;
  // The revision of the samples the normalised `params` give, bumped whenever a generator fix
  // changes them: from 1 on it is part of each cell's config (Cell::to_json), so a result of
  // an earlier revision is redone, never mixed with the new one. Null: 0. History, under
  // generator ruler: niah 1 (2026-11-29, niah.py's essay joins and depths, its singular
  // template); niah 2, vt, cwe and fwe 1 (2026-11-30, RULER's sizing of a task); perplexity 1
  // (2026-11-29, a cell's score pooled over its tokens, not its windows' mean); scbench 1
  // (2026-11-30, multi_turn's first question in the shared context, each question encoded
  // apart, no cut where max_length leaves no room for one, as run_scbench.py), scbench 2
  // (2026-11-30, each later turn encoded apart, as SCBench, in every context_sharing);
  // longbench with chat_template auto 1 (2026-11-30, Llama-3.1 in its own template), auto 2
  // and reference 1 (2026-11-30, the model's own template rendered from its Jinja), +1 where
  // the stops or the chat forms of its pred_script changed (2026-11-30: samsum under longbench
  // and pqcache, every quest and clusterkv cell); passkey
  // and multi_turn 1 (2026-11-30, scored by the answer's first number, as InfiniteBench).
  std::function<int(const json& params)> revision;
  int sort_key() const { return 0; }
};

Registry<DatasetInfo>& dataset_registry();

// A params struct's to_json() without the params that have no real default.
inline json optional_params(json params, const std::vector<std::string>& required) {
  for (const std::string& name : required) params.erase(name);
  return params;
}

// Registers a dataset whose params type `Params` has
//   static const ConfigFields<Params>& fields()  (engine/common/config_fields.h)
// and whose class has a constructor taking `const Params&`.
template <typename DatasetClass, typename Params>
DatasetInfo make_dataset_info(DatasetInfo info) {
  info.param_fields = Params::fields().docs();
  info.required_params = Params::fields().required_names();
  info.default_params = [required = info.required_params] {
    return optional_params(Params::fields().write(Params{}), required);
  };
  info.normalise_params = [](const json& params, const std::string& where) {
    return Params::fields().write(Params::fields().read(params, where));
  };
  info.create = [](const json& params) -> std::unique_ptr<Dataset> {
    return std::make_unique<DatasetClass>(Params::fields().read(params, "params"));
  };
  return info;
}

#define KVB_REGISTER_DATASET(...)                                        \
  static const bool KVB_CONCAT(kvb_dataset_registered_, __LINE__) = [] { \
    ::kvb::dataset_registry().add(__VA_ARGS__);                          \
    return true;                                                         \
  }()

}  // namespace kvb
