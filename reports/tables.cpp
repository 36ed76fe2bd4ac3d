#include "reports/tables.h"

#include <algorithm>

#include "engine/common/format.h"

namespace kvb {
namespace {

int64_t budget_key(const CellData& c) { return c.budget.value_or(MetricTable::kNoBudget); }

MetricTable empty_table(const ReportData& data, const MetricSpec& spec) {
  MetricTable t;
  t.spec = spec;
  t.methods = methods_of(data);
  t.budgets = budgets_of(data);
  return t;
}

std::string score_unit(const ReportData& data, const std::string& group) {
  for (const CellData& c : data.cells)
    if ((group.empty() || c.group == group) && !c.score_unit.empty()) return c.score_unit;
  return "";
}

// "Score (perplexity, lower is better)", "Recall of the true top-B keys (ratio, higher is
// better) on passkey", "... , average across datasets": the dataset is not repeated when the
// unit already names it.
std::string unit_of(const ReportData& data, const MetricSpec& spec, const std::string& group) {
  return spec.unit.empty() ? score_unit(data, group) : spec.unit;
}

std::string heading(const ReportData& data, const MetricSpec& spec, const std::string& group) {
  const std::string unit = unit_of(data, spec, group);
  const std::string what = spec.title + " (" + (unit.empty() ? "" : unit + ", ") +
                           better_direction(spec, unit) + ")";
  if (group.empty())
    return what + ", average across datasets" + (data.only_model.empty() ? "" : " on " + data.only_model);
  return group == unit ? what : what + " on " + group;
}

}  // namespace

const std::vector<MetricSpec>& report_metrics() {
  static const std::vector<MetricSpec> specs = {
      {"score", "Score", "", 1.0, 2},
      // LongBench-E datasets' length ranges (eval.py --e), in the records' `length` (words).
      {"score_0-4k", "Score of the LongBench-E records under 4k words", "", 1.0, 2, false, "records_0-4k"},
      {"score_4-8k", "Score of the LongBench-E records of 4k-8k words", "", 1.0, 2, false, "records_4-8k"},
      {"score_8k+", "Score of the LongBench-E records of 8k words or more", "", 1.0, 2, false, "records_8k+"},
      {"recall", "Recall of the true top-B keys", "ratio", 1.0, 3},
      {"decode_ms_per_token", "Decode latency", "ms/token", 1.0, 3, /*lower_is_better=*/true},
      {"kv_resident_bytes", "Resident KV", "KiB", 1.0 / 1024, 1, /*lower_is_better=*/true},
      // The pools grow by a quarter, so two methods a fifth apart in what their heads hold can
      // show one resident size: what the heads hold compares methods.
      {"kv_used_bytes", "KV the heads hold", "KiB", 1.0 / 1024, 1, /*lower_is_better=*/true},
  };
  return specs;
}

bool lower_is_better(const MetricSpec& spec, const std::string& unit) {
  return spec.lower_is_better || unit == "perplexity";
}

std::string better_direction(const MetricSpec& spec, const std::string& unit) {
  return lower_is_better(spec, unit) ? "lower is better" : "higher is better";
}

std::optional<Stat> MetricTable::at(const std::string& method, int64_t budget) const {
  auto it = values.find({method, is_reference(method) ? kNoBudget : budget});
  if (it == values.end()) return std::nullopt;
  return it->second;
}

bool MetricTable::is_reference(const std::string& method) const {
  return values.count({method, kNoBudget}) > 0;
}

std::optional<MetricTable> group_table(const ReportData& data, const std::string& group,
                                       const MetricSpec& spec) {
  MetricTable t = empty_table(data, spec);
  t.heading = heading(data, spec, group);
  t.unit = unit_of(data, spec, group);
  std::map<std::pair<std::string, int64_t>, int> seeds;
  for (const CellData& c : data.cells) {
    auto m = c.metrics.find(spec.name);
    if (c.group != group || m == c.metrics.end()) continue;
    const auto key = std::make_pair(c.method, budget_key(c));
    Stat& s = t.values[key];
    s.mean += m->second * spec.scale;  // a sum until divided below
    const auto count = spec.count_metric.empty() ? c.metrics.end() : c.metrics.find(spec.count_metric);
    s.samples += count == c.metrics.end() ? int64_t(c.samples.size()) : int64_t(count->second);
    ++seeds[key];
  }
  if (t.values.empty()) return std::nullopt;
  for (auto& [key, stat] : t.values) stat.mean /= seeds[key];
  return t;
}

std::optional<MetricTable> average_table(const ReportData& data, const MetricSpec& spec) {
  std::vector<MetricTable> per_group;
  for (const std::string& g : groups_of(data))
    if (auto t = group_table(data, g, spec)) per_group.push_back(*t);
  if (per_group.size() < 2) return std::nullopt;
  MetricTable avg = empty_table(data, spec);
  avg.heading = heading(data, spec, "");
  avg.unit = unit_of(data, spec, "");
  for (const auto& [key, first] : per_group[0].values) {
    Stat sum;
    bool everywhere = true;
    for (const MetricTable& t : per_group) {
      auto it = t.values.find(key);
      if (it == t.values.end()) {
        everywhere = false;
        break;
      }
      sum.mean += it->second.mean;
      sum.samples += it->second.samples;
    }
    if (!everywhere) continue;
    sum.mean /= double(per_group.size());
    avg.values[key] = sum;
  }
  return avg;
}

std::string format_stat(const std::optional<Stat>& stat, int decimals) {
  if (!stat) return "-";
  return fixed(stat->mean, decimals) + " (n=" + std::to_string(stat->samples) + ")";
}

std::vector<std::pair<std::string, std::string>> shared_context_groups(const ReportData& data) {
  const std::string shared = " (shared context)";
  const std::vector<std::string> groups = groups_of(data);
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& g : groups) {
    const size_t at = g.find(shared);
    if (at == std::string::npos) continue;
    const std::string window = g.substr(0, at) + g.substr(at + shared.size());
    if (std::find(groups.begin(), groups.end(), window) != groups.end())
      out.emplace_back(window, g);
  }
  return out;
}

std::vector<MetricTable> sharing_drop_tables(const ReportData& data) {
  const MetricSpec& score = report_metrics().front();
  std::vector<MetricTable> out;
  for (const auto& [window_group, shared_group] : shared_context_groups(data)) {
    const auto with_shared = group_table(data, shared_group, score);
    const auto in_window = group_table(data, window_group, score);
    if (!with_shared || !in_window) continue;
    MetricTable drop = empty_table(data, score);
    drop.unit = in_window->unit;
    drop.heading = "Score drop when the context is compressed before the question (" +
                   drop.unit + " in the window minus with the context shared; higher: the "
                   "method needs to see the question) on " + window_group;
    for (const auto& [key, stat] : with_shared->values)
      if (auto it = in_window->values.find(key); it != in_window->values.end())
        drop.values[key] = Stat{.mean = it->second.mean - stat.mean, .samples = stat.samples};
    if (!drop.values.empty()) out.push_back(drop);
  }
  return out;
}

std::string markdown_text(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '\\': out += "\\\\"; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string to_markdown(const MetricTable& t) {
  std::string out = "| method |";
  std::string rule = "|---|";
  for (int64_t b : t.budgets) {
    out += " " + std::to_string(b) + " |";
    rule += "---:|";
  }
  if (t.budgets.empty()) {  // only budget-less methods: one value column
    out += " value |";
    rule += "---:|";
  }
  out += "\n" + rule + "\n";
  for (const std::string& method : t.methods) {
    bool any = false;
    std::string row = "| " + markdown_text(method) + (t.is_reference(method) ? " (reference)" : "") + " |";
    const std::vector<int64_t> columns =
        t.budgets.empty() ? std::vector<int64_t>{MetricTable::kNoBudget} : t.budgets;
    for (int64_t b : columns) {
      const std::optional<Stat> s = t.at(method, b);
      any = any || s.has_value();
      row += " " + format_stat(s, t.spec.decimals) + " |";
    }
    if (any) out += row + "\n";
  }
  return out;
}

}  // namespace kvb
