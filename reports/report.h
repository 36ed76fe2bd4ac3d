// kvbench report: Markdown tables, gnuplot plots and one self-contained index.html of a run.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "reports/plots.h"
#include "reports/report_data.h"

namespace kvb {

struct ReportOptions {
  std::string db, out;
  std::optional<int64_t> run;  // none: the latest run
  bool plots = true;
  PlotOptions plot;
  std::string command;  // this report's command line, shown beside the run's own
};

struct ReportFiles {
  std::string markdown, html;
  std::vector<PlotFile> plots;  // under <out>/plots/
};

ReportFiles write_report(const ReportOptions& options);

// The Markdown document: provenance, the reproducing commands, every table, plot links.
std::string report_markdown(const ReportData& data, const std::vector<PlotFile>& plots,
                            const std::string& report_command);
// The HTML page: the same, with the PNGs embedded so it opens offline from anywhere.
std::string report_html(const ReportData& data, const std::vector<PlotFile>& plots,
                        const std::string& plot_dir, const std::string& report_command);

}  // namespace kvb
