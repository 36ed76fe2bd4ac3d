// kvbench report --db DB --out DIR: Markdown tables, gnuplot plots and a self-contained
// index.html of a stored run.
#include <iostream>

#include "cli/commands.h"
#include "reports/report.h"

namespace kvb {

void add_report_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line) {
  auto o = std::make_shared<ReportOptions>();
  auto run = std::make_shared<int64_t>(0);
  auto budget = std::make_shared<int64_t>(0);
  auto no_plots = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "report", "Write a run's report: Markdown tables (report.md), plots (plots/*.png, *.svg, "
                "*.gp) and a self-contained index.html");
  cmd->add_option("--db", o->db, "Results database")->required();
  cmd->add_option("--out", o->out, "Output folder (created; files in it are overwritten)")->required();
  cmd->add_option("--run", *run, "Run id (default: the latest run); the report covers every "
                                 "complete cell of that run's suite")->check(positive());
  cmd->add_option("--budget", *budget, "Budget of the latency breakdown, per-layer recall and "
                                       "needle heatmaps (default: the largest)")
      ->check(positive());
  cmd->add_option("--gnuplot", o->plot.gnuplot,
                  "gnuplot binary: a path, or a name looked up in PATH")
      ->capture_default_str();
  cmd->add_flag("--no-plots", *no_plots, "Tables and HTML only");
  out.push_back({cmd, [o, run, budget, no_plots, command_line] {
    if (*run > 0) o->run = *run;
    if (*budget > 0) o->plot.budget = *budget;
    o->plots = !*no_plots;
    o->command = command_line;
    const ReportFiles files = write_report(*o);
    std::cout << files.markdown << "\n" << files.html << "\n";
    for (const PlotFile& p : files.plots) std::cout << o->out << "/plots/" << p.name << ".png\n";
    return 0;
  }});
}

}  // namespace kvb
