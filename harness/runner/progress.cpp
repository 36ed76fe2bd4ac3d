#include "harness/runner/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

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

namespace {

// Event lines start with this byte (ASCII record separator), so that a supervising process
// tells them from a worker's other output (warnings, errors); fields are separated by tabs.
constexpr char kEventMark = '\x1e';

// `text` on one line without tabs (an error message may have several lines).
std::string one_field(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\t', ' ');
  return text;
}

// The terminal's width (stderr), 160 when it cannot be asked: the live line must not wrap.
size_t terminal_width() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 20) return size.ws_col;
  return 160;
}

}  // namespace

Progress::Progress(std::ostream& out, int total_cells, Style style, int parallelism)
    : out_(out), total_(total_cells), style_(style), parallelism_(std::max(1, parallelism)),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::prefix() const {
  const int finished = int(finished_.size());
  std::string text = "[" + std::to_string(finished) + "/" + std::to_string(total_) + " " +
                     format_duration(seconds_since(start_));
  if (run_cells_ > 0 && finished < total_)
    text += " eta " + format_duration(run_seconds_ / run_cells_ * (total_ - finished) /
                                      std::min(parallelism_, total_ - finished));
  return text + "]";
}

void Progress::redraw_live_line() {
  if (style_ != Style::live) return;
  std::string line = prefix();
  for (const auto& [index, text] : running_) line += (line.back() == ']' ? " " : " | ") + text;
  const size_t width = terminal_width() - 1;
  if (line.size() > width) line = line.substr(0, width - 3) + "...";
  out_ << "\r\033[K" << line << std::flush;
}

void Progress::emit(const std::string& kind, int index, const std::string& a,
                    const std::string& b) const {
  out_ << kEventMark << kind << '\t' << index << '\t' << one_field(a) << '\t' << one_field(b)
       << '\n' << std::flush;
}

void Progress::cell_started(int index, const std::string& description) {
  if (style_ == Style::events) return emit("started", index, description);
  descriptions_[index] = description;
  running_[index] = description;
  redraw_live_line();
}

void Progress::sample_done(int index, int done, int total) {
  if (style_ == Style::events)
    return emit("sample", index, std::to_string(done), std::to_string(total));
  running_[index] = descriptions_[index] + " sample " + std::to_string(done) + "/" +
                    std::to_string(total);
  redraw_live_line();
}

void Progress::finish(int index, const std::string& text) {
  finished_.insert(index);
  running_.erase(index);
  if (style_ == Style::live) out_ << "\r\033[K";
  out_ << prefix() << " " << text << "\n" << std::flush;
  redraw_live_line();
}

void Progress::cell_finished(int index, const std::string& status, double seconds) {
  if (style_ == Style::events) return emit("finished", index, status, std::to_string(seconds));
  ++run_cells_;
  run_seconds_ += seconds;
  finish(index, descriptions_[index] + ": " + status + " in " + format_duration(seconds));
}

void Progress::cell_skipped(int index, const std::string& description) {
  if (style_ == Style::events) return emit("skipped", index, description);
  if (finished_.count(index)) return;  // every worker finds the same complete cells
  finish(index, description + ": already complete, skipped");
}

void Progress::cell_elsewhere(int index, const std::string& description, const std::string& who) {
  if (style_ == Style::events) return emit("elsewhere", index, description, who);
  finish(index, description + ": " + who + ", skipped");
}

bool Progress::apply_event(const std::string& line) {
  if (line.empty() || line[0] != kEventMark) return false;
  std::vector<std::string> field;
  std::stringstream in(line.substr(1));
  for (std::string f; std::getline(in, f, '\t');) field.push_back(f);
  field.resize(4);
  int index = 0;
  try {
    index = std::stoi(field[1]);
    if (field[0] == "started") cell_started(index, field[2]);
    if (field[0] == "sample") sample_done(index, std::stoi(field[2]), std::stoi(field[3]));
    if (field[0] == "finished") cell_finished(index, field[2], std::stod(field[3]));
    if (field[0] == "skipped") cell_skipped(index, field[2]);
  } catch (const std::exception&) {
    return false;  // not one of ours after all: shown as it is
  }
  return true;
}

}  // namespace kvb
