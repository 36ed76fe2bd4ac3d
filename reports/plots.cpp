#include "reports/plots.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <utility>

#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/format.h"
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

// A tic label: gnuplot reads it as a printf format, so a '%' is written '%%'.
std::string tic_label(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '%' ? std::string("%%") : std::string(1, c);
  return quoted(std::as_const(out));
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

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
  write_file_atomically(dir + "/" + name + ".gp", wrap(name, script));
  const std::string log = dir + "/" + name + ".log";
  const std::string command = "cd " + shell_quote(dir) + " && " + shell_quote(gnuplot) + " " +
                              shell_quote(name + ".gp") + " > " + shell_quote(log) + " 2>&1";
  const int rc = std::system(command.c_str());
  for (const char* ext : {".png", ".svg"}) {
    const fs::path out = dir + "/" + name + ext;
    if (rc == 0 && fs::exists(out) && fs::file_size(out) > 0) continue;
    std::ifstream in(log);
    std::string said;
    while (said.empty() && std::getline(in, said)) said.erase(0, said.find_first_not_of(" \t"));
    throw InputError(gnuplot + " failed on plot " + name + ": " +
                     (said.empty() ? "no output, exit status " + std::to_string(rc) : said) +
                     " (--gnuplot names another, --no-plots skips the plots)");
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

// The line of a method: its colour and dash (references always dashed).
std::string line_style(const MethodStyle& style, bool reference, int width = 2) {
  return " lw " + std::to_string(width) + " lc rgb " + quoted(style.colour) + " dt " +
         (reference ? "2" : style.dash);
}

std::string point_style(const MethodStyle& style, const std::string& size = "1.3") {
  return " pt " + std::to_string(style.point) + " ps " + size;
}

// A note in the bottom-left corner of the figure.
std::string corner_note(const std::string& text) {
  return "set label " + quoted(text) + " at screen 0.01, screen 0.025 font ',9' tc rgb '#555555'\n";
}

// One method's values over the budgets; a reference method's level repeats at every budget.
struct Series {
  std::string method;
  bool reference = false;
  std::vector<std::pair<int64_t, double>> points;
};

std::vector<Series> series_of(const MetricTable& t) {
  std::vector<Series> out;
  for (const std::string& m : t.methods) {
    Series s{m, t.is_reference(m), {}};
    for (int64_t b : t.budgets)
      if (auto v = t.at(m, b)) s.points.push_back({b, v->mean});
    if (!s.points.empty()) out.push_back(s);
  }
  return out;
}

bool same_values(const Series& a, const Series& b) {
  if (a.points.size() != b.points.size()) return false;
  for (size_t i = 0; i < a.points.size(); ++i) {
    const double x = a.points[i].second, y = b.points[i].second;
    if (a.points[i].first != b.points[i].first || std::abs(x - y) > 1e-9 * std::max(1.0, std::abs(x)))
      return false;
  }
  return true;
}

// The legend entry of series i; one drawn over an identical earlier series says so
// ("h2o_prefill = snapkv"), since the earlier one is hidden under it.
std::string legend(const std::vector<Series>& all, size_t i) {
  const std::string title = all[i].method + (all[i].reference ? " (reference)" : "");
  for (size_t j = 0; j < i; ++j)
    if (same_values(all[i], all[j])) return title + " = " + all[j].method;
  return title;
}

bool has_reference(const std::vector<Series>& all) {
  return std::any_of(all.begin(), all.end(), [](const Series& s) { return s.reference; });
}

// The datablocks and the `plot` command of `all`: a line with markers per series, dashed for
// references (a level when `references_as_levels`); a series over an identical earlier one
// is drawn thinner, so that both show, and named as such in the legend.
std::string plot_series(const std::vector<Series>& all, const std::map<std::string, MethodStyle>& styles,
                        bool references_as_levels) {
  std::string blocks, clauses;
  for (size_t i = 0; i < all.size(); ++i) {
    const Series& s = all[i];
    const MethodStyle& style = styles.at(s.method);
    const std::string title = legend(all, i);
    const bool over_another = title.find(" = ") != std::string::npos;
    std::string clause;
    if (s.reference && references_as_levels) {
      clause = number(s.points.front().second) + " with lines" + line_style(style, true);
    } else {
      std::vector<std::vector<double>> rows;
      for (const auto& [x, value] : s.points) rows.push_back({double(x), value});
      const std::string block = "s" + std::to_string(i);
      blocks += datablock(block, rows);
      clause = "$" + block + " using 1:2 with linespoints" +
               point_style(style, over_another ? "0.8" : "1.3") +
               line_style(style, s.reference, over_another ? 1 : 2);
    }
    clauses += (clauses.empty() ? "" : ", ") + clause + " title " + quoted(title);
  }
  return blocks + "plot " + clauses + "\n";
}

// One line per budgeted method over the budgets, each reference method a dashed level.
std::string line_plot(const MetricTable& t, const std::map<std::string, MethodStyle>& styles,
                      const std::string& ylabel) {
  const std::vector<Series> all = series_of(t);
  return kStyle + std::string("set title ") + quoted(t.heading) + "\nset ylabel " + quoted(ylabel) +
         "\n" + (has_reference(all) ? "" : corner_note("No Full (reference) row in this run.")) +
         axes_for_budgets(t.budgets) + plot_series(all, styles, /*references_as_levels=*/true);
}

// "perplexity (lower is better)": the unit of a table's values and which way is better.
std::string axis_label(const MetricTable& t, const std::string& unit) {
  return unit + " (" + better_direction(t.spec, t.unit) + ")";
}

// The average across groups when there is one, else the first group's table.
std::optional<MetricTable> summary_table(const ReportData& data, const MetricSpec& spec) {
  if (auto avg = average_table(data, spec)) return avg;
  for (const std::string& g : groups_of(data))
    if (auto t = group_table(data, g, spec)) return t;
  return std::nullopt;
}

bool every_cell_has(const ReportData& data, const std::string& metric) {
  for (const CellData& c : data.cells)
    if (!c.metrics.count(metric)) return false;
  return true;
}

const MetricSpec* spec_named(const std::string& name) {
  for (const MetricSpec& s : report_metrics())
    if (s.name == name) return &s;
  return nullptr;
}

std::string method_tics(const std::vector<std::string>& methods) {
  std::string tics;
  for (size_t i = 0; i < methods.size(); ++i)
    tics += (i ? ", " : "") + tic_label(methods[i]) + " " + std::to_string(i);
  return "set xtics (" + tics + ") rotate by -30\nset xrange [-0.6:" +
         number(double(methods.size()) - 0.4) + "]\n";
}

// Stacked bars per method at `budget`: selection, attention, the rest of the step; the methods
// are named on the x axis, and the parts have one colour each, the legend's.
std::optional<std::string> latency_plot(const ReportData& data, int64_t budget) {
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
    rows.push_back({double(shown.size()), s->mean, a->mean, rest});
    shown.push_back(m);
  }
  if (rows.empty()) return std::nullopt;
  // Drawn tallest first, each part over the one below it; the legend lists them top down.
  return datablock("lat", rows) + kStyle + "set title \"Decode latency per token at budget " +
         std::to_string(budget) + " (lower is better)\\nbudget-less methods (Full) attend the "
         "whole KV\"\nset ylabel 'ms per token (lower is better)'\nset yrange [0:*]\nset boxwidth 0.6\n"
         "set style fill solid 1.0 border lc rgb 'black'\n" + method_tics(shown) +
         "plot $lat using 1:($2+$3+$4) with boxes lc rgb '#cccccc' title 'rest of the step', "
         "$lat using 1:($2+$3) with boxes lc rgb '#4c72b0' title 'attention', "
         "$lat using 1:2 with boxes lc rgb '#dd8452' title 'selection'\n";
}

// Per method at `budget`, two bars side by side: the score on `window_group` (the question in
// the window) and on `shared_group` (the context compressed before the question).
std::optional<std::string> sharing_plot(const ReportData& data, const std::string& window_group,
                                        const std::string& shared_group, int64_t budget) {
  const MetricSpec& score = *spec_named("score");
  auto window = group_table(data, window_group, score), shared = group_table(data, shared_group, score);
  if (!window || !shared) return std::nullopt;
  std::vector<std::vector<double>> rows;
  std::vector<std::string> shown;
  for (const std::string& m : window->methods) {
    auto w = window->at(m, budget), s = shared->at(m, budget);
    if (!w || !s) continue;
    rows.push_back({double(shown.size()), w->mean, s->mean});
    shown.push_back(m);
  }
  if (rows.empty()) return std::nullopt;
  return datablock("share", rows) + kStyle + "set key outside top center horizontal\n" +
         "set title " +
         quoted(window_group + " at budget " + std::to_string(budget) + " (higher is better)") +
         "\nset ylabel " + quoted(std::as_const(window->unit)) +
         "\nset yrange [0:*]\nset boxwidth 0.38\nset style fill solid 1.0 border lc rgb 'black'\n" +
         method_tics(shown) +
         "plot $share using ($1-0.2):2 with boxes lc rgb '#4c72b0' title 'question in the window', "
         "$share using ($1+0.2):3 with boxes lc rgb '#dd8452' title 'context shared (per_sample)'\n";
}

bool at_budget(const CellData& c, int64_t budget) { return !c.budget || *c.budget == budget; }

// Mean recall of each layer per method at `budget`, over groups and seeds.
std::optional<std::string> recall_layer_plot(const ReportData& data, int64_t budget,
                                             const std::map<std::string, MethodStyle>& styles) {
  std::vector<Series> all;
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
    const bool reference = std::none_of(data.cells.begin(), data.cells.end(), [&](const CellData& c) {
      return c.method == methods[i] && c.budget;
    });
    Series s{methods[i], reference, {}};
    for (const auto& [layer, acc] : layers) s.points.push_back({layer, acc.first / acc.second});
    all.push_back(s);
  }
  if (all.empty()) return std::nullopt;
  return kStyle + std::string("set title ") +
         quoted("Recall of the true top-B keys per layer at budget " + std::to_string(budget) +
                " (higher is better)") +
         "\nset xlabel 'layer'\nset ylabel 'recall (higher is better)'\nset yrange [0:1.05]\n"
         "set xtics 1\n" +
         (has_reference(all) ? "" : corner_note("No Full row in this run (its recall is 1 at every layer).")) +
         plot_series(all, styles, /*references_as_levels=*/false);
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

// The depth a heatmap row shows: the sample's own where the samples have at most 11 distinct
// depths (passkey's evenly spread ones, RULER's 40 under kvbench_v1 at few samples), else the
// nearest tenth (RULER's random places give each sample its own depth).
std::function<double(double)> heatmap_depth(const ReportData& data, const std::string& dataset) {
  std::set<double> depths;
  for (const CellData& c : data.cells)
    if (c.dataset == dataset)
      for (const SampleScore& s : c.samples)
        if (s.depth) depths.insert(*s.depth);
  if (depths.size() <= 11) return [](double d) { return d; };
  return [](double d) { return std::round(d * 10) / 10; };
}

// Accuracy over context length x needle depth for one method at `budget`.
std::optional<std::string> heatmap_plot(const ReportData& data, const std::string& dataset,
                                        const std::string& method, int64_t budget) {
  std::map<std::pair<int64_t, double>, std::pair<double, int>> acc;  // (context, depth)
  const std::function<double(double)> row_of = heatmap_depth(data, dataset);
  for (const CellData& c : data.cells) {
    if (c.dataset != dataset || c.method != method || !at_budget(c, budget)) continue;
    const int64_t context = c.dataset_params.value("context_length", int64_t(0));
    for (const SampleScore& s : c.samples)
      if (s.depth) {
        auto& a = acc[{context, row_of(*s.depth)}];
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
    xtics += (x ? ", " : "") + tic_label(std::to_string(xs[x])) + " " + std::to_string(x);
    for (size_t y = 0; y < ys.size(); ++y) {
      auto it = acc.find({xs[x], ys[y]});
      if (it != acc.end()) rows.push_back({double(x), double(y), it->second.first / it->second.second});
    }
  }
  for (size_t y = 0; y < ys.size(); ++y)
    ytics += (y ? ", " : "") + tic_label(std::to_string(int(ys[y] * 100 + 0.5)) + "%") + " " +
             std::to_string(y);
  return datablock("h", rows) + "set title " +
         quoted(dataset + " accuracy: " + method + " at budget " + std::to_string(budget) +
                (data.only_model.empty() ? "" : " on " + data.only_model)) +
         "\nset xlabel 'context length (tokens)'\nset ylabel 'needle depth'\nset xtics (" +
         xtics + ")\nset ytics (" + ytics + ")\nset xrange [-0.5:" + number(xs.size() - 0.5) +
         "]\nset yrange [-0.5:" + number(ys.size() - 0.5) + "]\nset cbrange [0:100]\n"
         "set cblabel 'accuracy (%)'\nset palette defined (0 '#d73027', 50 '#fee08b', 100 '#1a9850')\n"
         "set tics nomirror\nplot $h using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder "
         "lc palette notitle, $h using 1:2:(sprintf('%.0f', $3)) with labels notitle\n";
}

}  // namespace

std::map<std::string, MethodStyle> method_styles(const std::vector<std::string>& methods) {
  // Colours: Okabe-Ito's and Paul Tol's colour-blind-safe sets, chosen so that any two are at
  // least 20 CIEDE2000 apart for normal vision and 10 under simulated deuteranopia, protanopia
  // and tritanopia (tests/reports/report_test.cpp checks it). Markers: filled for eviction,
  // open for retrieval. Dashes: "(dash, gap, ...)"; "2" is kept for references.
  static const std::map<std::string, MethodStyle> known = {
      {"full", {"#000000", 7, "2"}},
      {"oracle_topk", {"#800000", 3, "1"}},
      {"streaming_llm", {"#777777", 2, "1"}},
      {"h2o", {"#0072b2", 5, "1"}},
      {"snapkv", {"#e69f00", 7, "1"}},
      {"pyramidkv", {"#669966", 9, "(6,3)"}},
      {"ada_snapkv", {"#d55e00", 11, "(8,3,2,3)"}},
      {"kv_compress", {"#cc79a7", 13, "(2,2)"}},
      {"quest", {"#56b4e9", 4, "(12,4)"}},
      {"infinigen", {"#332288", 6, "(6,3)"}},
      {"clusterkv", {"#882255", 8, "(8,3,2,3)"}},
      {"pqcache", {"#006633", 12, "(2,2)"}}};
  // Further labels: colours picked to stay apart from those above.
  static const std::vector<std::string> colours = {"#cc0044", "#6688ee", "#6600ee",
                                                   "#886688", "#ee8888", "#cc00aa"};
  static const std::vector<int> points = {15, 14, 10, 1, 5, 6};
  static const std::vector<std::string> dashes = {"(4,2)", "(10,3,3,3)", "(3,5)", "1", "(12,4)"};
  std::map<std::string, MethodStyle> out;
  std::set<std::string> taken(methods.begin(), methods.end());  // known styles in use
  size_t next = 0;
  for (const std::string& m : methods) {
    if (known.count(m)) {
      out[m] = known.at(m);
      continue;
    }
    // A config of a method ("ada_snapkv_w8", "quest:evaluation") looks like the method when
    // the method itself is not drawn.
    std::string parent;
    for (const auto& [name, style] : known) {
      const bool config_of = m.rfind(name + "_", 0) == 0 || m.rfind(name + ":", 0) == 0;
      if (config_of && !taken.count(name) && name.size() > parent.size()) parent = name;
    }
    if (!parent.empty()) {
      out[m] = known.at(parent);
      taken.insert(parent);
      continue;
    }
    out[m] = {colours[next % colours.size()], points[next % points.size()], dashes[next % dashes.size()]};
    ++next;
  }
  return out;
}

std::string find_gnuplot(const std::string& name) {
  const std::string hint = " (install Debian's gnuplot-nox, or pass --gnuplot PATH, or --no-plots)";
  auto executable = [](const fs::path& p) {
    return fs::is_regular_file(p) && access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    const fs::path path = fs::absolute(name);
    if (!executable(path)) throw InputError(name + ": no executable gnuplot there" + hint);
    return path.string();
  }
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "", ':'))
    if (!dir.empty() && executable(fs::path(dir) / name))
      return fs::absolute(fs::path(dir) / name).string();
  throw InputError(name + ": gnuplot not found in PATH" + hint);
}

std::vector<PlotFile> write_plots(const ReportData& data, const std::string& out_dir,
                                  const PlotOptions& options) {
  const std::string dir = fs::absolute(out_dir).string();  // gnuplot runs inside it
  const std::string gnuplot = find_gnuplot(options.gnuplot);
  fs::create_directories(dir);
  const auto styles = method_styles(methods_of(data));
  const std::vector<int64_t> budgets = budgets_of(data);
  std::vector<PlotFile> out;
  std::set<std::string> names;  // two titles may slug alike ("on m-a", "on m_a"): numbered then
  auto emit = [&](const std::string& slugged, const std::string& title,
                  const std::optional<std::string>& script) {
    if (!script) return;
    std::string name = slugged;
    for (int n = 2; !names.insert(name).second; ++n) name = slugged + "_" + std::to_string(n);
    render(dir, name, *script, gnuplot);
    out.push_back({name, title});
  };
  if (budgets.empty()) return out;  // only reference methods: nothing varies with the budget
  const MetricSpec& score = *spec_named("score");
  for (const std::string& g : groups_of(data))
    if (auto t = group_table(data, g, score))
      emit("score_" + slug(g), "Score vs budget: " + g, line_plot(*t, styles, axis_label(*t, t->unit)));
  const int64_t budget = options.budget.value_or(budgets.back());
  for (const auto& [window_group, shared_group] : shared_context_groups(data))
    emit("shared_context_" + slug(window_group),
         window_group + ": the question in the window vs the context shared",
         sharing_plot(data, window_group, shared_group, budget));
  // Summaries across datasets: one set per model where the run has several (never averaged
  // across models), named and titled with it.
  for (const ReportData& one : per_model(data)) {
    const std::string name_end = one.only_model.empty() ? "" : "_" + slug(one.only_model);
    const std::string title_end = one.only_model.empty() ? "" : " on " + one.only_model;
    if (auto avg = average_table(one, score))
      emit("score_average" + name_end, "Score vs budget, average across datasets" + title_end,
           line_plot(*avg, styles, axis_label(*avg, "mean score")));
    if (auto t = summary_table(one, *spec_named("recall")))
      emit("recall_vs_budget" + name_end, "Recall vs budget" + title_end,
           line_plot(*t, styles, axis_label(*t, "recall")));
    // What the heads hold; the pools' capacity where a cell was stored before kv_used_bytes
    // existed (a resumed run mixing both would otherwise plot only its newer cells).
    if (auto t = every_cell_has(one, "kv_used_bytes")
                     ? summary_table(one, *spec_named("kv_used_bytes")) : std::nullopt)
      emit("kv_memory_vs_budget" + name_end, "KV the heads hold vs budget" + title_end,
           "set yrange [0:*]\n" + line_plot(*t, styles, axis_label(*t, t->unit)));
    else if (auto t = summary_table(one, *spec_named("kv_resident_bytes")))
      emit("kv_memory_vs_budget" + name_end, "Resident KV memory vs budget" + title_end,
           "set yrange [0:*]\n" + line_plot(*t, styles, axis_label(*t, t->unit)));
    emit("latency_breakdown" + name_end,
         "Decode latency breakdown at budget " + std::to_string(budget) + title_end,
         latency_plot(one, budget));
    emit("recall_per_layer" + name_end,
         "Recall per layer at budget " + std::to_string(budget) + title_end,
         recall_layer_plot(one, budget, styles));
    for (const std::string& dataset : needle_datasets(one))
      for (const std::string& m : methods_of(one))
        emit("needle_" + slug(dataset) + "_" + slug(m) + name_end,
             dataset + " accuracy heatmap: " + m + title_end, heatmap_plot(one, dataset, m, budget));
  }
  return out;
}

}  // namespace kvb
