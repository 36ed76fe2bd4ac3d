#include "reports/plots.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "harness/common/error.h"
#include "reports/tables.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

std::string slug(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c));
    if (keep) out += char(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "x" : out;
}

// A gnuplot single-quoted string ('' is an escaped quote).
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

// "#1f77b4" -> 0x1f77b4, for `lc rgb variable`.
std::string colour_int(const std::string& hex) { return std::to_string(std::stol(hex.substr(1), nullptr, 16)); }

std::string datablock(const std::string& name, const std::vector<std::vector<double>>& rows) {
  std::string out = "$" + name + " << EOD\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? " " : "") + number(row[i]);
    out += "\n";
  }
  return out + "EOD\n";
}

// The body renders once to PNG, then `replot` renders the same figure to SVG.
std::string wrap(const std::string& name, const std::string& body) {
  const std::string font = " noenhanced size 860,520 font 'DejaVu Sans,11'";
  return "# Written by kvbench report; re-render with: gnuplot " + name + ".gp\n" +
         "set terminal pngcairo" + font + "\nset output " + quoted(name + ".png") + "\n" + body +
         "set terminal svg" + font + " background rgb 'white'\nset output " +
         quoted(name + ".svg") + "\nreplot\nunset output\n";
}

void render(const std::string& dir, const std::string& name, const std::string& script,
            const std::string& gnuplot) {
  std::ofstream(dir + "/" + name + ".gp") << wrap(name, script);
  const std::string log = dir + "/" + name + ".log";
  const std::string command = "cd " + shell_quoted(dir) + " && " + shell_quoted(gnuplot) + " " +
                              shell_quoted(name + ".gp") + " > " + shell_quoted(log) + " 2>&1";
  const int rc = std::system(command.c_str());
  for (const char* ext : {".png", ".svg"}) {
    const fs::path out = dir + "/" + name + ext;
    if (rc != 0 || !fs::exists(out) || fs::file_size(out) == 0) {
      std::ifstream in(log);
      std::string first_error;
      std::getline(in, first_error);
      throw std::runtime_error("gnuplot failed on " + dir + "/" + name + ".gp: " + first_error +
                               " (log: " + log + ")");
    }
  }
  fs::remove(log);
}

std::string axes_for_budgets(const std::vector<int64_t>& budgets) {
  std::string tics;
  for (int64_t b : budgets) tics += (tics.empty() ? "" : ", ") + std::to_string(b);
  const double lo = double(budgets.front()) / 1.3, hi = double(budgets.back()) * 1.3;
  return "set logscale x 2\nset xtics (" + tics + ")\nset xrange [" + number(lo) + ":" +
         number(hi) + "]\nset xlabel 'budget B (KV entries attended per head)'\n";
}

const char* kStyle = "set grid\nset key outside right top\nset border 3\nset tics nomirror\n";

// One line per budgeted method over the budgets, each reference method a dashed level.
std::string line_plot(const MetricTable& t, const std::map<std::string, std::string>& colours,
                      const std::string& ylabel) {
  std::string blocks, clauses;
  for (size_t i = 0; i < t.methods.size(); ++i) {
    const std::string& m = t.methods[i];
    const std::string style = " lw 2 lc rgb " + quoted(colours.at(m));
    if (t.is_reference(m)) {
      clauses += (clauses.empty() ? "" : ", ") + number(t.at(m, 0)->mean) + " with lines dt 2" +
                 style + " title " + quoted(m + " (reference)");
      continue;
    }
    std::vector<std::vector<double>> rows;
    for (int64_t b : t.budgets)
      if (auto s = t.at(m, b)) rows.push_back({double(b), s->mean});
    if (rows.empty()) continue;
    const std::string block = "m" + std::to_string(i);
    blocks += datablock(block, rows);
    clauses += (clauses.empty() ? "" : ", ") + ("$" + block) + " using 1:2 with linespoints pt 7" +
               style + " title " + quoted(m);
  }
  return blocks + kStyle + "set title " + quoted(t.heading) + "\nset ylabel " + quoted(ylabel) +
         "\n" + axes_for_budgets(t.budgets) + "plot " + clauses + "\n";
}

// The average across groups when there is one, else the first group's table.
std::optional<MetricTable> summary_table(const ReportData& data, const MetricSpec& spec) {
  if (auto avg = average_table(data, spec)) return avg;
  for (const std::string& g : groups_of(data))
    if (auto t = group_table(data, g, spec)) return t;
  return std::nullopt;
}

const MetricSpec* spec_named(const std::string& name) {
  for (const MetricSpec& s : report_metrics())
    if (s.name == name) return &s;
  return nullptr;
}

std::string method_tics(const std::vector<std::string>& methods) {
  std::string tics;
  for (size_t i = 0; i < methods.size(); ++i)
    tics += (i ? ", " : "") + quoted(methods[i]) + " " + std::to_string(i);
  return "set xtics (" + tics + ") rotate by -30\nset xrange [-0.6:" +
         number(double(methods.size()) - 0.4) + "]\n";
}

// Stacked bars per method at `budget`: selection (solid), attention, the rest of the step.
std::optional<std::string> latency_plot(const ReportData& data, int64_t budget,
                                        const std::map<std::string, std::string>& colours) {
  MetricSpec select{"select_ms_per_token", "", "", 1, 3}, attend{"attention_ms_per_token", "", "", 1, 3};
  auto sel = summary_table(data, select), att = summary_table(data, attend);
  auto dec = summary_table(data, *spec_named("decode_ms_per_token"));
  if (!sel || !att || !dec) return std::nullopt;
  std::vector<std::vector<double>> rows;
  std::vector<std::string> shown;
  for (const std::string& m : dec->methods) {
    auto s = sel->at(m, budget), a = att->at(m, budget), d = dec->at(m, budget);
    if (!s || !a || !d) continue;
    const double rest = std::max(0.0, d->mean - s->mean - a->mean);
    rows.push_back({double(shown.size()), s->mean, a->mean, rest,
                    double(std::stol(colour_int(colours.at(m))))});
    shown.push_back(m);
  }
  if (rows.empty()) return std::nullopt;
  const std::string bars = " with boxes lc rgb variable notitle";
  return datablock("lat", rows) + kStyle + "set title " +
         quoted("Decode latency per token at budget " + std::to_string(budget) +
                " (reference methods at full KV)") +
         "\nset ylabel 'ms per token'\nset yrange [0:*]\nset boxwidth 0.6\n"
         "set style fill solid border lc rgb 'black'\n" + method_tics(shown) +
         "plot $lat using 1:($2+$3+$4):5" + bars + " fs solid 0.2, $lat using 1:($2+$3):5" +
         bars + " fs solid 0.55, $lat using 1:2:5" + bars + " fs solid 1.0, "
         "keyentry with boxes fs solid 1.0 lc rgb 'gray30' title 'selection', "
         "keyentry with boxes fs solid 0.55 lc rgb 'gray30' title 'attention', "
         "keyentry with boxes fs solid 0.2 lc rgb 'gray30' title 'rest'\n";
}

bool at_budget(const CellData& c, int64_t budget) { return !c.budget || *c.budget == budget; }

// Mean recall of each layer per method at `budget`, over groups and seeds.
std::optional<std::string> recall_layer_plot(const ReportData& data, int64_t budget,
                                             const std::map<std::string, std::string>& colours) {
  std::string blocks, clauses;
  const std::vector<std::string> methods = methods_of(data);
  for (size_t i = 0; i < methods.size(); ++i) {
    std::map<int, std::pair<double, int>> layers;  // layer -> (sum, count)
    for (const CellData& c : data.cells) {
      if (c.method != methods[i] || !at_budget(c, budget)) continue;
      for (const auto& [name, value] : c.metrics)
        if (name.rfind("recall.layer", 0) == 0) {
          auto& acc = layers[std::stoi(name.substr(12))];
          acc.first += value;
          ++acc.second;
        }
    }
    if (layers.empty()) continue;
    std::vector<std::vector<double>> rows;
    for (const auto& [layer, acc] : layers) rows.push_back({double(layer), acc.first / acc.second});
    const std::string block = "r" + std::to_string(i);
    blocks += datablock(block, rows);
    const bool reference = std::none_of(data.cells.begin(), data.cells.end(), [&](const CellData& c) {
      return c.method == methods[i] && c.budget;
    });
    clauses += (clauses.empty() ? "" : ", ") + ("$" + block) + " using 1:2 with linespoints pt 7 lw 2" +
               (reference ? " dt 2" : "") + " lc rgb " + quoted(colours.at(methods[i])) +
               " title " + quoted(methods[i]);
  }
  if (clauses.empty()) return std::nullopt;
  return blocks + kStyle + "set title " +
         quoted("Recall of the true top-B keys per layer at budget " + std::to_string(budget)) +
         "\nset xlabel 'layer'\nset ylabel 'recall'\nset yrange [0:1.05]\nset xtics 1\nplot " +
         clauses + "\n";
}

// Datasets whose samples carry a needle depth (passkey, single-needle RULER tasks).
std::vector<std::string> needle_datasets(const ReportData& data) {
  std::vector<std::string> out;
  for (const CellData& c : data.cells)
    for (const SampleScore& s : c.samples)
      if (s.depth && std::find(out.begin(), out.end(), c.dataset) == out.end()) {
        out.push_back(c.dataset);
        break;
      }
  return out;
}

// Accuracy over context length x needle depth for one method at `budget`.
std::optional<std::string> heatmap_plot(const ReportData& data, const std::string& dataset,
                                        const std::string& method, int64_t budget) {
  std::map<std::pair<int64_t, double>, std::pair<double, int>> acc;  // (context, depth)
  for (const CellData& c : data.cells) {
    if (c.dataset != dataset || c.method != method || !at_budget(c, budget)) continue;
    const int64_t context = c.dataset_params.value("context_length", int64_t(0));
    for (const SampleScore& s : c.samples)
      if (s.depth) {
        auto& a = acc[{context, *s.depth}];
        a.first += s.score;
        ++a.second;
      }
  }
  if (acc.empty()) return std::nullopt;
  std::set<int64_t> contexts;
  std::set<double> depths;
  for (const auto& [key, a] : acc) contexts.insert(key.first), depths.insert(key.second);
  const std::vector<int64_t> xs(contexts.begin(), contexts.end());
  const std::vector<double> ys(depths.begin(), depths.end());
  std::vector<std::vector<double>> rows;
  std::string xtics, ytics;
  for (size_t x = 0; x < xs.size(); ++x) {
    xtics += (x ? ", " : "") + quoted(std::to_string(xs[x])) + " " + std::to_string(x);
    for (size_t y = 0; y < ys.size(); ++y) {
      auto it = acc.find({xs[x], ys[y]});
      if (it != acc.end()) rows.push_back({double(x), double(y), it->second.first / it->second.second});
    }
  }
  for (size_t y = 0; y < ys.size(); ++y)
    ytics += (y ? ", " : "") + quoted(std::to_string(int(ys[y] * 100 + 0.5)) + "%%") + " " +  // tic labels are formats
             std::to_string(y);
  return datablock("h", rows) + "set title " +
         quoted(dataset + " accuracy: " + method + " at budget " + std::to_string(budget)) +
         "\nset xlabel 'context length (tokens)'\nset ylabel 'needle depth'\nset xtics (" +
         xtics + ")\nset ytics (" + ytics + ")\nset xrange [-0.5:" + number(xs.size() - 0.5) +
         "]\nset yrange [-0.5:" + number(ys.size() - 0.5) + "]\nset cbrange [0:100]\n"
         "set cblabel 'accuracy (%)'\nset palette defined (0 '#d73027', 50 '#fee08b', 100 '#1a9850')\n"
         "set tics nomirror\nplot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder "
         "lc palette notitle, $h using 1:2:(sprintf('%.0f', $3)) with labels notitle\n";
}

}  // namespace

std::map<std::string, std::string> method_colours(const std::vector<std::string>& methods) {
  static const std::map<std::string, std::string> known = {
      {"full", "#000000"},       {"oracle_topk", "#7f7f7f"}, {"streaming_llm", "#bcbd22"},
      {"h2o", "#1f77b4"},        {"snapkv", "#ff7f0e"},      {"pyramidkv", "#2ca02c"},
      {"ada_snapkv", "#d62728"}, {"kv_compress", "#9467bd"}, {"quest", "#8c564b"},
      {"clusterkv", "#e377c2"},  {"pqcache", "#17becf"},     {"infinigen", "#6b6ecf"}};
  static const std::vector<std::string> palette = {"#393b79", "#637939", "#8c6d31", "#843c39",
                                                   "#7b4173", "#3182bd", "#e6550d", "#31a354"};
  std::map<std::string, std::string> out;
  size_t next = 0;
  for (const std::string& m : methods) {
    auto it = known.find(m);
    out[m] = it != known.end() ? it->second : palette[next++ % palette.size()];
  }
  return out;
}

std::vector<PlotFile> write_plots(const ReportData& data, const std::string& out_dir,
                                  const PlotOptions& options) {
  const std::string dir = fs::absolute(out_dir).string();  // gnuplot runs inside it
  if (!fs::exists(options.gnuplot))
    throw InputError(options.gnuplot + ": gnuplot not found (install Debian's gnuplot-nox, or "
                     "pass --gnuplot PATH, or --no-plots)");
  fs::create_directories(dir);
  const auto colours = method_colours(methods_of(data));
  const std::vector<int64_t> budgets = budgets_of(data);
  std::vector<PlotFile> out;
  auto emit = [&](const std::string& name, const std::string& title,
                  const std::optional<std::string>& script) {
    if (!script) return;
    render(dir, name, *script, options.gnuplot);
    out.push_back({name, title});
  };
  if (budgets.empty()) return out;  // only reference methods: nothing varies with the budget
  const MetricSpec& score = *spec_named("score");
  for (const std::string& g : groups_of(data))
    if (auto t = group_table(data, g, score))
      emit("score_" + slug(g), "Score vs budget: " + g, line_plot(*t, colours, t->heading));
  if (auto avg = average_table(data, score))
    emit("score_average", "Score vs budget, average across datasets",
         line_plot(*avg, colours, "mean score"));
  if (auto t = summary_table(data, *spec_named("recall")))
    emit("recall_vs_budget", "Recall vs budget", line_plot(*t, colours, "recall"));
  if (auto t = summary_table(data, *spec_named("kv_resident_bytes")))
    emit("kv_memory_vs_budget", "Resident KV memory vs budget",
         "set yrange [0:*]\n" + line_plot(*t, colours, "KiB"));
  const int64_t budget = options.budget.value_or(budgets.back());
  emit("latency_breakdown", "Decode latency breakdown at budget " + std::to_string(budget),
       latency_plot(data, budget, colours));
  emit("recall_per_layer", "Recall per layer at budget " + std::to_string(budget),
       recall_layer_plot(data, budget, colours));
  for (const std::string& dataset : needle_datasets(data))
    for (const std::string& m : methods_of(data))
      emit("needle_" + slug(dataset) + "_" + slug(m), dataset + " accuracy heatmap: " + m,
           heatmap_plot(data, dataset, m, budget));
  return out;
}

}  // namespace kvb
