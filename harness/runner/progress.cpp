#include "harness/runner/progress.h"

#include <cstdio>

#include "engine/session.h"

namespace kvb {

std::string format_duration(double seconds) {
  const long s = long(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::ostream& out, int total_cells, bool interactive)
    : out_(out), total_(total_cells), interactive_(interactive),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::prefix() const {
  std::string text = "[" + std::to_string(finished_) + "/" + std::to_string(total_) + " " +
                     format_duration(seconds_since(start_));
  if (run_cells_ > 0 && finished_ < total_)
    text += " eta " + format_duration(run_seconds_ / run_cells_ * (total_ - finished_));
  return text + "]";
}

void Progress::cell_started(int index, const std::string& description) {
  current_ = description;
  if (interactive_) out_ << "\r\033[K" << prefix() << " " << current_ << std::flush;
}

void Progress::sample_done(int done, int total) {
  if (interactive_)
    out_ << "\r\033[K" << prefix() << " " << current_ << " sample " << done << "/" << total
         << std::flush;
}

void Progress::cell_finished(const std::string& status, double seconds) {
  ++finished_;
  ++run_cells_;
  run_seconds_ += seconds;
  if (interactive_) out_ << "\r\033[K";
  out_ << prefix() << " " << current_ << ": " << status << " in " << format_duration(seconds)
       << "\n" << std::flush;
}

void Progress::cell_skipped(const std::string& description, const std::string& why) {
  ++finished_;
  if (interactive_) out_ << "\r\033[K";
  out_ << prefix() << " " << description << ": " << why << ", skipped\n" << std::flush;
}

}  // namespace kvb
