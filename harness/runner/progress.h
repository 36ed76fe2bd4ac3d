// Progress of a suite run on stderr: a live line on a terminal, one line per cell otherwise.
#pragma once
#include <chrono>
#include <ostream>
#include <string>

namespace kvb {

class Progress {
 public:
  Progress(std::ostream& out, int total_cells, bool interactive);
  void cell_started(int index, const std::string& description);
  void sample_done(int done, int total);
  void cell_finished(const std::string& status, double seconds);
  // A cell not run here: `why` is "already complete" or who runs it.
  void cell_skipped(const std::string& description, const std::string& why);

 private:
  std::string prefix() const;  // "[3/12 00:41 eta 02:10]"
  std::ostream& out_;
  int total_;
  int finished_ = 0;
  bool interactive_;
  std::string current_;
  std::chrono::steady_clock::time_point start_;
  double run_seconds_ = 0;  // time spent on cells actually run, for the ETA
  int run_cells_ = 0;
};

std::string format_duration(double seconds);

}  // namespace kvb
