// The report's plots: gnuplot scripts written from C++ (data inline as datablocks, so each
// script re-renders on its own) and rendered to PNG and SVG.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reports/report_data.h"

namespace kvb {

struct PlotOptions {
  std::string gnuplot = "gnuplot";  // a path, or a name looked up in PATH (find_gnuplot)
  // The budget of the per-budget plots (latency breakdown, recall per layer, needle
  // heatmaps); none: the largest budget in the data.
  std::optional<int64_t> budget;
};

struct PlotFile {
  std::string name;   // <dir>/<name>.png, .svg and .gp
  std::string title;
};

// How a method label is drawn, the same in every plot: a colour, a gnuplot point type and a
// dash type, so that lines stay apart where colours are hard to tell (colour-blind readers,
// grey-scale prints) and where two series coincide.
struct MethodStyle {
  std::string colour;  // "#rrggbb"
  int point = 7;       // gnuplot `pt`: filled markers for eviction, open ones for retrieval
  std::string dash;    // gnuplot `dt`: "1" solid, "2" dashed (references), or "(a,b,...)"
};

// Fixed styles for the registered methods (a palette whose colours stay apart, also under
// simulated deuteranopia, protanopia and tritanopia), then, for other labels, further colours,
// markers and dashes in order of appearance.
std::map<std::string, MethodStyle> method_styles(const std::vector<std::string>& methods);

// The absolute path of the gnuplot `name` names: a path (relative to the current folder) or,
// without a '/', the first executable of that name in PATH. InputError where there is none.
std::string find_gnuplot(const std::string& name);

// Writes and renders every plot the data supports into `dir`. Throws InputError when gnuplot
// is missing or fails (naming the plot and the first line gnuplot printed).
std::vector<PlotFile> write_plots(const ReportData& data, const std::string& dir,
                                  const PlotOptions& options);

}  // namespace kvb
