// Methods x budgets tables of one metric, per dataset group and averaged across groups, and
// their Markdown form.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reports/report_data.h"

namespace kvb {

// A metric as reports show it: stored value * scale, printed with `decimals`.
struct MetricSpec {
  std::string name;   // metrics.name, e.g. "score"
  std::string title;  // e.g. "Score"
  std::string unit;   // shown in headings, e.g. "KiB"; empty: the score's own unit
  double scale = 1;
  int decimals = 2;
  bool lower_is_better = false;  // costs (latency, memory); the score's direction is its unit's
  // The cell metric counting the samples behind the value ("": all the cell's samples), for
  // the n= of a score over some of them (LongBench-E's length ranges).
  std::string count_metric;
};

// Whether lower values of `spec`, shown in `unit`, are better (perplexity, latency, memory).
bool lower_is_better(const MetricSpec& spec, const std::string& unit);
// "lower is better" or "higher is better".
std::string better_direction(const MetricSpec& spec, const std::string& unit);

// The four metrics of a report: score, recall, decode latency, resident KV.
const std::vector<MetricSpec>& report_metrics();

struct Stat {
  double mean = 0;
  int64_t samples = 0;  // samples behind the mean (summed over seeds and, in averages, groups)
};

struct MetricTable {
  std::string heading;  // e.g. "Score (passkey_accuracy, higher is better) on passkey"
  std::string unit;     // e.g. "passkey_accuracy", "KiB"
  MetricSpec spec;
  std::vector<std::string> methods;
  std::vector<int64_t> budgets;
  // Key: (method, budget); budget-less reference methods (Full) use kNoBudget.
  std::map<std::pair<std::string, int64_t>, Stat> values;
  static constexpr int64_t kNoBudget = -1;

  std::optional<Stat> at(const std::string& method, int64_t budget) const;
  bool is_reference(const std::string& method) const;
};

// Mean of `spec` over the seeds of each (method, budget) of `group`; none when no cell has it.
std::optional<MetricTable> group_table(const ReportData& data, const std::string& group,
                                       const MetricSpec& spec);
// Per (method, budget), the mean over groups of the groups' means; only entries every group has.
std::optional<MetricTable> average_table(const ReportData& data, const MetricSpec& spec);

// (group with the question in the window, the same group with its context shared) for each
// dataset run both ways (context_sharing none and per_sample).
std::vector<std::pair<std::string, std::string>> shared_context_groups(const ReportData& data);
// For each dataset group run both ways (context_sharing none and per_sample): per (method,
// budget) the score with the question in the window minus the score with the context shared.
std::vector<MetricTable> sharing_drop_tables(const ReportData& data);

std::string to_markdown(const MetricTable& table);
// Text from the suite or the results (labels, names, errors) as Markdown shows it literally,
// in a table cell too: '|' and '\\' escaped, '<', '>' and '&' as entities (no raw HTML).
std::string markdown_text(const std::string& text);
// "12.50 (n=3)" or "-".
std::string format_stat(const std::optional<Stat>& stat, int decimals);

}  // namespace kvb
