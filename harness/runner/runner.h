// Runs a suite's cells against a result store: skips complete cells, records failures and
// goes on, commits each cell in one transaction.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "datasets/dataset.h"
#include "engine/model/llama_model.h"
#include "engine/model_view.h"
#include "harness/runner/progress.h"
#include "harness/scaleout/shard.h"
#include "harness/store/result_store.h"
#include "harness/suite/suite.h"

namespace kvb {

struct RunOptions {
  std::string db_path;
  bool fresh = false;
  int threads = 0;
  std::string command;  // the command line, for provenance
  Progress::Style progress = Progress::Style::lines;
  // Join this run (a --workers group's, begun by its supervisor) instead of beginning one;
  // the supervisor finishes it. `fresh` is then the supervisor's to apply.
  std::optional<int64_t> join_run;
  std::optional<ShardSpec> shard;  // run only this shard's share of the cells (scaleout/shard.h)
  // Unknown config.json keys are warnings (stored in the run's provenance), not errors.
  bool allow_unknown_config_keys = false;
  // Where methods keep files derived from a model, e.g. InfiniGen's calibrations ("": none).
  // They do not change results, so they are not part of any cell's config.
  std::string cache_dir;
  // Decode steps on a GPU replay CUDA graphs where the method allows (SessionOptions); a cell
  // that did records the metric cuda_graph_steps_share. Timing only, not part of the config.
  bool cuda_graphs = false;
  // Cells whose stored result ran another model under the name they give it are redone (the
  // results forgotten first) instead of refused (settle_changed_models).
  bool redo_changed_models = false;
  // A line for the progress stream once the run's checks have passed, before its first cell
  // (the CLI's "suite NAME: N cells -> DB"); none where empty.
  std::string header;
};

struct RunSummary {
  int64_t run_id = 0;
  int ran = 0, skipped = 0, failed = 0;
  // Cells another process was running (claimed), left to it, or that a fellow worker of the
  // same run failed (not tried again in that run).
  int elsewhere = 0;
  // The signal that stopped the run before all its cells were done (StopSignals), else 0.
  int stopped_by = 0;
};

// Samples and metrics of one cell, not yet stored.
struct CellResult {
  std::vector<SampleRow> samples;
  std::vector<MetricRow> metrics;
};

// The chat template a sample's prompt gets: its own, or for "auto" the model's own template,
// which a dataset may replace by a built-in one or leave out for the model's family
// (Sample::auto_chat_as).
struct ChatTemplateChoice {
  std::string name;    // the built-in template the prompt is wrapped in; "none": not wrapped;
                       // "" where `own`
  bool own = false;    // the model's own template (apply_model_chat_template)
  bool as_text = false;  // own, rendered as text with the BOS it writes (kOwnTemplateAsText)
  bool automatic = false;  // the sample asked for "auto"
  std::string family;  // for "auto": the model's family (detect_chat_template), else ""
  bool applied() const { return own || name != "none"; }
};
ChatTemplateChoice chat_template_choice(const LlamaModel& model, const Sample& sample);
// Whether generation stops at tokenizer_config.json's eos_token alone: the sample says so, and
// the model's chat family is not among its every_eos_id_families.
bool stops_at_eos_token_alone(const LlamaModel& model, const Sample& sample);
// The ids generation stops at: the model's EOS ids (the tokenizer's, config.json's and
// generation_config.json's), or tokenizer_config.json's eos_token alone where
// stops_at_eos_token_alone (an InputError where it sets none), and the last token of each of
// its stop_texts.
std::vector<int> stop_ids(const LlamaModel& model, const Sample& sample);
// A sample's prompt text as the model reads it: its chat template applied (before BOS); an
// InputError where a built-in template's markers are no tokens of the model's tokenizer
// (check_chat_template_tokens) or where the model's own does not render
// (apply_model_chat_template).
std::string prompt_text(const LlamaModel& model, const Sample& sample);
// A sample's prompt as the runner feeds it: its chat template applied, BOS added (or BOS and
// its prompt_ids, where the dataset gives the tokens).
std::vector<int> encode_prompt(const LlamaModel& model, const Sample& sample);

// encode_prompt's tokens split where context_sharing "per_sample" compresses: the context
// (BOS and any chat-template prefix included) and the question (the rest), so that context +
// question is exactly the prompt. A prompt encoded in pieces (Sample::encoded_apart_at) splits
// between them; a prompt encoded whole after the longest run of its tokens that the context
// text's own encoding begins with. InputError when the sample does not mark its question
// (Sample::question_offset).
struct SplitPrompt {
  std::vector<int> context, question;
};
SplitPrompt split_prompt(const LlamaModel& model, const Sample& sample);

// A sample with a decoded end (Sample::decoded_chars > 0) split as its reference splits it:
// the prompt text before that end, encoded with BOS, and the end encoded apart, its first
// token dropped (BOS; its tokens need not be the prompt's own: a tokenizer may begin a text
// with a space).
SplitPrompt split_decoded_end(const LlamaModel& model, const Sample& sample);

// A method counter of a cell from its samples' (`sums`: by name, the sum and the number of
// samples that reported it): the mean over those samples, except a rate, which is the cell's
// numerator over its denominator: the cache hit rate its hits over its lookups, the bytes
// fetched per step its bytes over its steps (a mean of the samples' rates would weigh a sample
// of few lookups or steps as one of many).
double pooled_counter(const std::map<std::string, std::pair<double, int>>& sums,
                      const std::string& name);

// Runs one cell on `model`; `on_sample(done, total)` reports progress. Throws on failure, and
// RunStopped before a sample once StopSignals has a stop request.
// `view`: what methods see of the model, kept across cells (null: one per sample).
// `cuda_graphs`: SessionOptions::cuda_graphs of its sessions.
CellResult run_cell(const Cell& cell, const LlamaModel& model,
                    const std::function<void(int, int)>& on_sample,
                    const ModelView* view = nullptr, bool cuda_graphs = false);

RunSummary run_suite(const Suite& suite, const RunOptions& options, std::ostream& progress);

// Each model reference's checkpoint_fingerprint, computed once: a stored result is the cell's
// only while the model under its name is the one it ran with (ResultStore::cell_complete).
class ModelFingerprints {
 public:
  const std::string& of(const std::string& model);

 private:
  std::map<std::string, std::string> known_;
};

// Before a run begins: the `cells` whose only complete results in `store` ran another model
// under the name they give it (their fingerprints differ) are an InputError naming them and the
// way out, or with `redo` those results are forgotten (said on `progress`) so the run redoes
// them. A stored result is thus never silently another model's.
void settle_changed_models(ResultStore& store, const std::vector<Cell>& cells, bool redo,
                           ModelFingerprints& fingerprints, std::ostream& progress);

// --fresh: forgets the suite's runs and cells and any other suite's stored result of one of its
// cells (ResultStore::forget_suite), saying on `progress` how many of those there were.
void forget_for_fresh(ResultStore& store, const Suite& suite, std::ostream& progress);

// Reads the config.json, the tokenizer and the safetensors headers of every model folder of the
// suite, so that a config or a checkpoint kvbench refuses is an InputError before anything
// runs (not a failed cell).
void check_model_configs(const Suite& suite, bool allow_unknown_config_keys);

// The devices `cells` run on, in suite order ("cpu", "cuda:0", ...).
std::vector<std::string> devices_of(const std::vector<Cell>& cells);
// InputError when a device or dtype of `cells` is not usable here (no CUDA in this build, no
// such GPU, f16 without a half matmul on this device); `suite` names the file.
void check_devices(const Suite& suite, const std::vector<Cell>& cells);

// Provenance of this process: commit, build type, LibTorch, the devices `cells` run on (GPU
// name, CUDA runtime and driver), threads, host.
RunInfo current_run_info(const Suite& suite, const std::vector<Cell>& cells,
                         const std::string& command, int threads);

// Default database of a suite: results/runs/<suite>.db under the current directory.
std::string default_db_path(const std::string& suite_name);

}  // namespace kvb
