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
  std::string gnuplot = "/usr/bin/gnuplot";
  // The budget of the per-budget plots (latency breakdown, recall per layer, needle
  // heatmaps); none: the largest budget in the data.
  std::optional<int64_t> budget;
};

struct PlotFile {
  std::string name;   // <dir>/<name>.png, .svg and .gp
  std::string title;
};

// One colour per method label, the same in every plot: fixed for the known methods, then a
// palette in order of appearance for other labels.
std::map<std::string, std::string> method_colours(const std::vector<std::string>& methods);

// Writes and renders every plot the data supports into `dir`. Throws InputError when gnuplot
// is missing, std::runtime_error when it fails (naming the script and its log).
std::vector<PlotFile> write_plots(const ReportData& data, const std::string& dir,
                                  const PlotOptions& options);

}  // namespace kvb
