#include "reports/report.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/json_fields.h"
#include "reports/tables.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

// Every table of the report in order: per metric, each group, then the average; after the
// scores, the drop of each dataset run with its context shared.
std::vector<MetricTable> all_tables(const ReportData& data) {
  std::vector<MetricTable> out;
  const std::vector<ReportData> models = per_model(data);  // an average never mixes models
  for (const MetricSpec& spec : report_metrics()) {
    for (const std::string& g : groups_of(data))
      if (auto t = group_table(data, g, spec)) out.push_back(*t);
    for (const ReportData& model : models)
      if (auto avg = average_table(model, spec)) out.push_back(*avg);
    if (&spec == &report_metrics().front())  // after the scores: what sharing the context cost
      for (MetricTable& drop : sharing_drop_tables(data)) out.push_back(std::move(drop));
  }
  return out;
}

std::string models_of(const ReportData& data) {
  std::set<std::string> models;
  for (const CellData& c : data.cells) models.insert(c.model);
  std::string out;
  for (const std::string& m : models) out += (out.empty() ? "" : ", ") + m;
  return out;
}

// The report's first sentence: the run and its models (those of its complete cells).
std::string run_sentence(const ReportData& data) {
  const std::string run = "Run " + std::to_string(data.run_id);
  const std::string models = models_of(data);
  if (models.empty()) return run + ": no cell is complete.";
  return run + " on " + models + ". Each cell is the mean over seeds, with the number of "
         "samples behind it.";
}

// A note for a run that did not finish (stopped, or its process gone); "" for a run that
// finished. Its tables hold the suite's cells complete in the database, later runs' included.
std::string unfinished_note(const ReportData& data) {
  for (const auto& [key, value] : data.provenance)
    if (key == "status" && value.rfind("running", 0) != 0 && value.rfind("interrupted", 0) != 0)
      return "";
  for (const auto& [key, value] : data.provenance) {
    if (key != "status") continue;
    const std::string note = "This run did not finish (status: " + value + ")";
    if (data.missing_unknown.empty() && data.missing.empty())
      return note + "; its suite's cells are all complete in this database (later runs finished "
                    "them).";
    return note + ": the tables show the " + std::to_string(data.cells.size()) +
           (data.cells.size() == 1 ? " cell" : " cells") +
           " of its suite complete in this database; rerun its command to finish the rest.";
  }
  return "";
}

// "cells of run 3 (2): git commit `abc`, threads `1`" (or "... same build and machine").
std::string other_run_line(const OtherRun& r) {
  return "cells of run " + std::to_string(r.id) + " (" + std::to_string(r.cells) + "): " +
         (r.differs.empty() ? "same build and machine" : r.differs);
}

bool untrained(const ReportData& data) {
  for (const CellData& c : data.cells) {
    auto it = c.metrics.find("model_trained");
    if (it != c.metrics.end() && it->second == 0) return true;
  }
  return false;
}

const char* kUntrainedNote =
    "Cells marked model_trained=0 ran on a random-weight model: their scores measure nothing "
    "but the harness.";

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint8_t(bytes[i]) << 16 | uint8_t(bytes[i + 1]) << 8 | uint8_t(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += table[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string read_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string html_table(const MetricTable& t) {
  std::string out = "<table><tr><th>method</th>";
  const std::vector<int64_t> columns =
      t.budgets.empty() ? std::vector<int64_t>{MetricTable::kNoBudget} : t.budgets;
  for (int64_t b : columns) out += "<th>" + (b < 0 ? std::string("value") : "B=" + std::to_string(b)) + "</th>";
  out += "</tr>\n";
  for (const std::string& m : t.methods) {
    std::string row;
    bool any = false;
    for (int64_t b : columns) {
      auto s = t.at(m, b);
      any = any || s.has_value();
      row += "<td>" + format_stat(s, t.spec.decimals) + "</td>";
    }
    if (any)
      out += std::string("<tr") + (t.is_reference(m) ? " class=\"ref\"" : "") + "><td>" +
             html_escape(m) + (t.is_reference(m) ? " (reference)" : "") + "</td>" + row + "</tr>\n";
  }
  return out + "</table>\n";
}

const char* kCss =
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;"
    "padding:.25em .6em;text-align:right}td:first-child,th:first-child{text-align:left}"
    "tr.ref td{font-style:italic;background:#f4f4f4}pre{background:#f4f4f4;padding:.6em;"
    "overflow-x:auto}img{max-width:100%;border:1px solid #ddd}dt{font-weight:bold;float:left;"
    "width:9em}dd{margin-left:10em}.note{color:#a33}";

}  // namespace

std::string report_markdown(const ReportData& data, const std::vector<PlotFile>& plots,
                            const std::string& report_command) {
  std::string md = "# kvbench report: " + markdown_text(data.suite_name) + "\n\n" +
                   markdown_text(run_sentence(data)) + "\n\n";
  if (untrained(data)) md += std::string("> ") + kUntrainedNote + "\n\n";
  if (const std::string note = unfinished_note(data); !note.empty())
    md += "> " + markdown_text(note) + "\n\n";
  if (const std::string heading = missing_heading(data); !heading.empty()) {
    md += "> " + markdown_text(heading) + "\n>\n";
    for (const std::string& line : missing_lines(data))
      md += "> - " + markdown_text(line) + "\n";
    md += "\n";
  }
  md += "## Provenance\n\n";
  for (const auto& [key, value] : data.provenance) md += "- " + key + ": `" + value + "`\n";
  for (const OtherRun& r : data.other_runs)
    md += "- " + markdown_text(other_run_line(r)) + "\n";
  md += "\nReproduce:\n\n```sh\n" + data.command + "\n" + report_command + "\n```\n\n";
  std::string section;
  for (const MetricTable& t : all_tables(data)) {
    if (t.spec.title != section) md += "## " + markdown_text(section = t.spec.title) + "\n\n";
    md += "### " + markdown_text(t.heading) + "\n\n" + to_markdown(t) + "\n";
  }
  if (!plots.empty()) md += "## Plots\n\n";
  for (const PlotFile& p : plots)
    md += "### " + markdown_text(p.title) + "\n\n![" + markdown_text(p.title) + "](plots/" +
          p.name + ".png) ([SVG](plots/" + p.name + ".svg))\n\n";
  return md;
}

std::string report_html(const ReportData& data, const std::vector<PlotFile>& plots,
                        const std::string& plot_dir, const std::string& report_command) {
  std::string h = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kvbench report: " +
                  html_escape(data.suite_name) + "</title><style>" + kCss + "</style></head><body>\n";
  h += "<h1>kvbench report: " + html_escape(data.suite_name) + "</h1>\n<p>" +
       html_escape(run_sentence(data)) + "</p>\n";
  if (untrained(data)) h += std::string("<p class=\"note\">") + kUntrainedNote + "</p>\n";
  if (const std::string note = unfinished_note(data); !note.empty())
    h += "<p class=\"note\">" + html_escape(note) + "</p>\n";
  if (const std::string heading = missing_heading(data); !heading.empty()) {
    h += "<p class=\"note\">" + html_escape(heading) + "</p>\n";
    const std::vector<std::string> lines = missing_lines(data);
    if (!lines.empty()) {
      h += "<ul class=\"note\">";
      for (const std::string& line : lines) h += "<li>" + html_escape(line) + "</li>";
      h += "</ul>\n";
    }
  }
  h += "<h2>Provenance</h2>\n<dl>";
  for (const auto& [key, value] : data.provenance)
    h += "<dt>" + html_escape(key) + "</dt><dd><code>" + html_escape(value) + "</code></dd>";
  for (const OtherRun& r : data.other_runs)
    h += "<dt>run " + std::to_string(r.id) + "</dt><dd>" + html_escape(other_run_line(r)) + "</dd>";
  h += "</dl>\n<h3>Reproduce</h3>\n<pre>" + html_escape(data.command + "\n" + report_command) +
       "</pre>\n<h3>Suite</h3>\n<pre>" + html_escape(indented_json(data.suite_json)) + "</pre>\n";
  std::string section;
  for (const MetricTable& t : all_tables(data)) {
    if (t.spec.title != section) h += "<h2>" + html_escape(section = t.spec.title) + "</h2>\n";
    h += "<h3>" + html_escape(t.heading) + "</h3>\n" + html_table(t);
  }
  if (!plots.empty()) h += "<h2>Plots</h2>\n";
  for (const PlotFile& p : plots)
    h += "<h3>" + html_escape(p.title) + "</h3>\n<img alt=\"" + html_escape(p.title) +
         "\" src=\"data:image/png;base64," + base64(read_binary(plot_dir + "/" + p.name + ".png")) +
         "\">\n";
  return h + "</body></html>\n";
}

ReportFiles write_report(const ReportOptions& options) {
  require_results_database(options.db);
  ResultStore store(options.db, ResultStore::Access::read);
  const ReportData data = load_report_data(store, options.run, options.db);
  // A run whose cells all failed is reported: its list of failures is the report.
  if (data.cells.empty() && missing_heading(data).empty())
    throw InputError(options.db + ": run " + std::to_string(data.run_id) + " has no complete cells");
  if (const std::optional<int64_t> asked = options.plot.budget) {  // before anything is written
    const std::vector<int64_t> budgets = budgets_of(data);
    if (std::find(budgets.begin(), budgets.end(), *asked) == budgets.end()) {
      std::string known;
      for (int64_t b : budgets) known += (known.empty() ? "" : ", ") + std::to_string(b);
      throw InputError("--budget " + std::to_string(*asked) + ": no cell of run " +
                       std::to_string(data.run_id) + " has it (its budgets: " +
                       (known.empty() ? "none" : known) + ")");
    }
  }
  PlotOptions plot = options.plot;
  const bool plots = options.plots && !data.cells.empty();
  if (plots) plot.gnuplot = find_gnuplot(plot.gnuplot);  // before anything is written
  fs::create_directories(options.out);
  ReportFiles files;
  // The plots are drawn into a folder of their own and moved into plots/ once the report is
  // written: a gnuplot failing halfway leaves the earlier report whole (its folder removed).
  const std::string plot_dir = options.out + "/plots";
  const std::string drawing = options.out + "/.plots-" + std::to_string(getpid());
  remove_tree(drawing);
  try {
    if (plots) files.plots = write_plots(data, drawing, plot);
    files.markdown = options.out + "/report.md";
    files.html = options.out + "/index.html";
    write_file_atomically(files.markdown, report_markdown(data, files.plots, options.command));
    write_file_atomically(files.html, report_html(data, files.plots, drawing, options.command));
  } catch (...) {
    remove_tree(drawing);
    throw;
  }
  if (plots) {  // each file over its namesake; other files in plots/ are left as they are
    fs::create_directories(plot_dir);
    for (const auto& entry : fs::directory_iterator(drawing))
      fs::rename(entry.path(), fs::path(plot_dir) / entry.path().filename());
  }
  remove_tree(drawing);
  return files;
}

}  // namespace kvb
