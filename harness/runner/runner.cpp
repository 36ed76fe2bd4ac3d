#include "harness/runner/runner.h"

#include <ATen/Parallel.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>

#include "datasets/dataset.h"
#include "harness/engine/session.h"
#include "harness/runner/progress.h"
#include "methods/method.h"

namespace kvb {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe(const Cell& c) {
  return c.method.label + " @ " + c.budget_text() + " on " + c.dataset.name + " (" + c.model +
         ", seed " + std::to_string(c.seed) + ")";
}

// Per-cell aggregates of the sessions' counters.
struct CellTotals {
  std::vector<double> attended_sum;  // per layer * Hkv
  std::vector<int64_t> attended_min, attended_max;
  int64_t decode_steps = 0;
  double prefill_s = 0, prefill_method_s = 0, decode_s = 0, select_s = 0, attention_s = 0;
  double kv_bytes = 0, fragmentation = 0;
  int64_t prompt_tokens = 0;

  void add(const Session& s) {
    const AttendedCounts& a = s.attended();
    if (attended_sum.empty()) {
      attended_sum.assign(a.sum.size(), 0.0);
      attended_min.assign(a.sum.size(), INT64_MAX);
      attended_max.assign(a.sum.size(), 0);
    }
    for (size_t i = 0; i < a.sum.size() && a.steps > 0; ++i) {
      attended_sum[i] += a.sum[i];
      attended_min[i] = std::min(attended_min[i], a.min[i]);
      attended_max[i] = std::max(attended_max[i], a.max[i]);
    }
    decode_steps += a.steps;
    const SessionTimings& t = s.timings();
    prefill_s += t.prefill_s;
    prefill_method_s += t.prefill_method_s;
    decode_s += t.decode_s;
    select_s += t.select_s;
    attention_s += t.attention_s;
    kv_bytes += double(s.kv_allocated_bytes());
    double frag = 0;
    for (const LayerKV& layer : s.kv()) frag += layer.fragmentation();
    fragmentation += s.kv().empty() ? 0 : frag / double(s.kv().size());
  }

  void emit(std::vector<MetricRow>& out, int samples, int num_layers, int num_kv_heads) const {
    auto metric = [&](const std::string& name, double value, const std::string& unit) {
      out.push_back(MetricRow{std::nullopt, name, value, unit});
    };
    metric("prompt_tokens", double(prompt_tokens) / samples, "tokens");
    metric("kv_resident_bytes", kv_bytes / samples, "bytes");
    metric("kv_fragmentation", fragmentation / samples, "ratio");
    metric("prefill_s", prefill_s / samples, "s");
    metric("prefill_method_share", prefill_s > 0 ? prefill_method_s / prefill_s : 0, "ratio");
    if (decode_steps == 0) return;
    metric("decode_ms_per_token", 1e3 * decode_s / decode_steps, "ms");
    metric("select_ms_per_token", 1e3 * select_s / decode_steps, "ms");
    metric("attention_ms_per_token", 1e3 * attention_s / decode_steps, "ms");
    // Measured budget: attended entries per KV head per layer per decode step.
    double total = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (int l = 0; l < num_layers; ++l) {
      double layer_sum = 0;
      for (int h = 0; h < num_kv_heads; ++h) {
        const size_t i = size_t(l * num_kv_heads + h);
        layer_sum += attended_sum[i];
        lo = std::min(lo, attended_min[i]);
        hi = std::max(hi, attended_max[i]);
      }
      total += layer_sum;
      metric("attended_mean.layer" + std::to_string(l),
             layer_sum / num_kv_heads / double(decode_steps), "entries");
    }
    metric("attended_mean", total / double(num_layers * num_kv_heads) / double(decode_steps),
           "entries");
    metric("attended_min", double(lo), "entries");
    metric("attended_max", double(hi), "entries");
  }
};

std::vector<int> stop_ids(const LlamaModel& model) {
  std::vector<int> ids = model.tokenizer->eos_ids();
  for (int id : model.config.eos_token_ids)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

}  // namespace

CellResult run_cell(const Cell& cell, const LlamaModel& model,
                    const std::function<void(int, int)>& on_sample) {
  const MethodInfo& method_info = method_registry().get(cell.method.name, "cell");
  std::unique_ptr<Dataset> dataset =
      dataset_registry().get(cell.dataset.name, "cell").create(cell.dataset.params);
  const std::vector<Sample> samples = dataset->samples(*model.tokenizer, cell.seed);
  const ModelConfig& c = model.config;
  CellResult result;
  CellTotals totals;
  double score_sum = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& sample = samples[i];
    std::unique_ptr<Method> method = method_info.create(cell.method.config);
    Session session(model, *method, SessionOptions{cell.budget.value_or(0), cell.seed});
    const std::vector<int> prompt = model.tokenizer->encode(sample.prompt, /*add_bos=*/true);
    const int max_new = cell.max_new_tokens > 0 ? cell.max_new_tokens : sample.max_new_tokens;
    const std::string prediction =
        model.tokenizer->decode(session.generate(prompt, max_new, stop_ids(model)));
    const double score = dataset->score(sample, prediction);
    score_sum += score;
    totals.prompt_tokens += int64_t(prompt.size());
    totals.add(session);
    result.samples.push_back(SampleRow{sample.id, int64_t(prompt.size()), prediction,
                                       json(sample.answers).dump(), score});
    on_sample(int(i + 1), int(samples.size()));
  }
  const int n = std::max<int>(1, int(samples.size()));
  result.metrics.push_back(MetricRow{std::nullopt, "score", score_sum / n, dataset->metric_name()});
  result.metrics.push_back(MetricRow{std::nullopt, "samples", double(samples.size()), "count"});
  result.metrics.push_back(MetricRow{std::nullopt, "model_trained", model.trained ? 1.0 : 0.0, "bool"});
  totals.emit(result.metrics, n, c.num_hidden_layers, c.num_key_value_heads);
  return result;
}

RunInfo current_run_info(const Suite& suite, const std::string& command, int threads) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  RunInfo info;
  info.suite = suite.name;
  info.suite_json = suite.source.dump();
  info.command = command;
  info.git_commit = KVBENCH_GIT_COMMIT;
  info.build_type = KVBENCH_BUILD_TYPE;
  info.torch_version = TORCH_VERSION;
  info.device = "cpu";
  info.threads = threads;
  info.host = host;
  return info;
}

std::string default_db_path(const std::string& suite_name) {
  return "results/runs/" + suite_name + ".db";
}

RunSummary run_suite(const Suite& suite, const RunOptions& options, std::ostream& progress_out) {
  ResultStore store(options.db_path);
  if (options.fresh) store.forget_suite(suite.name);
  const std::vector<Cell> cells = suite.cells();
  RunSummary summary;
  summary.run_id = store.begin_run(current_run_info(suite, options.command, at::get_num_threads()));
  Progress progress(progress_out, int(cells.size()), options.interactive_progress);
  std::map<std::string, std::shared_ptr<LlamaModel>> models;
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    const std::string key = cell.key();
    if (store.cell_complete(key)) {
      progress.cell_skipped(describe(cell));
      ++summary.skipped;
      continue;
    }
    progress.cell_started(int(i), describe(cell));
    const int64_t cell_id = store.start_cell(summary.run_id, key, cell.model, cell.dataset.name,
                                             cell.method.label, cell.budget, int64_t(cell.seed));
    auto start = Clock::now();
    try {
      auto& model = models[cell.model];
      if (!model) model = LlamaModel::from_reference(cell.model);
      CellResult result = run_cell(cell, *model, [&](int done, int total) {
        progress.sample_done(done, total);
      });
      store.complete_cell(cell_id, result.samples, result.metrics, seconds_since(start));
      progress.cell_finished("complete", seconds_since(start));
      ++summary.ran;
    } catch (const std::exception& e) {
      store.fail_cell(cell_id, e.what(), seconds_since(start));
      progress.cell_finished(std::string("FAILED: ") + e.what(), seconds_since(start));
      ++summary.failed;
    }
  }
  store.finish_run(summary.run_id, summary.failed > 0 ? "failures" : "complete");
  return summary;
}

}  // namespace kvb
