// Progress of a suite run on stderr: a live line on a terminal, one line per cell otherwise.
// A worker of `kvbench run --workers` writes its progress as event lines instead, which the
// supervising process feeds into its one display (apply_event).
#pragma once
#include <chrono>
#include <map>
#include <ostream>
#include <set>
#include <string>

namespace kvb {

class Progress {
 public:
  enum class Style {
    live,    // a terminal: one line rewritten in place, a line per finished cell
    lines,   // a line per finished cell
    events,  // machine-readable event lines, for a supervising process
  };
  // `parallelism`: how many cells run at once (workers), for the ETA.
  Progress(std::ostream& out, int total_cells, Style style, int parallelism = 1);

  // Cells are named by their index in the suite's cell list.
  void cell_started(int index, const std::string& description);
  void sample_done(int index, int done, int total);
  void cell_finished(int index, const std::string& status, double seconds);
  // A cell found complete in the database (counted once however often it is reported).
  void cell_skipped(int index, const std::string& description);
  // A cell another process runs (`who`: "running in HOST pid N"), left to it.
  void cell_elsewhere(int index, const std::string& description, const std::string& who);

  // Applies an event line a worker wrote (Style::events) to this display; false for any other
  // line. A worker's cell_elsewhere is not applied: its sibling running the cell reports it.
  bool apply_event(const std::string& line);

 private:
  std::string prefix() const;  // "[3/12 00:41 eta 02:10]"
  void redraw_live_line();
  void finish(int index, const std::string& text);  // a finished cell's line
  void emit(const std::string& kind, int index, const std::string& a,
            const std::string& b = "") const;  // an event line
  std::ostream& out_;
  int total_;
  Style style_;
  int parallelism_;
  std::set<int> finished_;
  std::map<int, std::string> descriptions_;  // of the cells started
  std::map<int, std::string> running_;       // index -> what the live line shows of it
  std::chrono::steady_clock::time_point start_;
  double run_seconds_ = 0;  // time spent on cells actually run, for the ETA
  int run_cells_ = 0;
};

std::string format_duration(double seconds);

}  // namespace kvb
