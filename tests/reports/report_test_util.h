// A results database filled by the test itself: cells with known metrics and sample scores.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/store/result_store.h"

namespace kvb::test {

struct FakeCell {
  std::string dataset = "passkey";
  int64_t context = 256;
  std::string method;
  std::optional<int64_t> budget;
  int64_t seed = 0;
  std::vector<double> sample_scores;
  double recall = 0.5, decode_ms = 2.0, kv_bytes = 4096;
  std::string prediction = "12345";
  std::string unit = "passkey_accuracy";  // the score's unit (the dataset's metric)
  bool shared_context = false;            // context_sharing: per_sample
  std::vector<MetricRow> extra_metrics;   // stored beside the ones above
  std::string model = "random-tiny";
};

inline std::string fake_config(const FakeCell& c) {
  nlohmann::json params = {{"context_length", c.context}, {"samples", c.sample_scores.size()}};
  nlohmann::json config = {
      {"model", c.model},
      {"dataset", {{"name", c.dataset}, {"params", params}}},
      {"method", {{"name", c.method}, {"label", c.method}, {"config", nlohmann::json::object()}}},
      {"budget", c.budget ? nlohmann::json(*c.budget) : nlohmann::json()},
      {"seed", c.seed}};
  if (c.shared_context) config["context_sharing"] = "per_sample";
  return config.dump();
}

// Stores `cells` as one complete run of suite "fake"; returns the run id.
inline int64_t fill_store(ResultStore& store, const std::vector<FakeCell>& cells) {
  RunInfo info;
  info.suite = "fake";
  info.suite_json = R"({"name": "fake"})";
  info.command = "kvbench run fake";
  const int64_t run = store.begin_run(info);
  for (const FakeCell& c : cells) {
    const int64_t id = store.claim_cell(run, fake_config(c), c.model, c.dataset, c.method,
                                        c.budget, c.seed).cell_id;
    std::vector<SampleRow> samples;
    double sum = 0;
    for (size_t i = 0; i < c.sample_scores.size(); ++i) {
      samples.push_back({"passkey-" + std::to_string(i), c.context, c.prediction, "[\"1\"]",
                         c.sample_scores[i]});
      sum += c.sample_scores[i];
    }
    std::vector<MetricRow> metrics = {
        {std::nullopt, "score", sum / double(c.sample_scores.size()), c.unit},
        {std::nullopt, "samples", double(c.sample_scores.size()), "count"},
        {std::nullopt, "recall", c.recall, "ratio"},
        {std::nullopt, "recall.layer0", c.recall - 0.1, "ratio"},
        {std::nullopt, "recall.layer1", c.recall + 0.1, "ratio"},
        {std::nullopt, "kv_resident_bytes", c.kv_bytes, "bytes"},
        {std::nullopt, "decode_ms_per_token", c.decode_ms, "ms"},
        {std::nullopt, "select_ms_per_token", c.decode_ms / 4, "ms"},
        {std::nullopt, "attention_ms_per_token", c.decode_ms / 2, "ms"}};
    metrics.insert(metrics.end(), c.extra_metrics.begin(), c.extra_metrics.end());
    // Needle depths as the passkey generator spreads them: evenly over [0, 1].
    const size_t n = c.sample_scores.size();
    for (size_t i = 0; i < n; ++i)
      metrics.push_back({samples[i].sample_id, "meta.depth",
                         n == 1 ? 0.5 : double(i) / double(n - 1), ""});
    store.complete_cell(id, samples, metrics, 0.1);
  }
  store.finish_run(run, "complete");
  return run;
}

}  // namespace kvb::test
