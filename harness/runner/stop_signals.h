// SIGINT, SIGTERM and SIGHUP (Ctrl-C, Slurm's time limit, `kill`, a dropped session) asking a
// run to stop cleanly: the first sets a flag the runner reads before each sample and says so on
// stderr; a second ends the process at once (the default action). SIGUSR1 is a --workers
// supervisor's request to its workers: it sets the flag and never escalates. A signal this
// process was started ignoring (a background job's SIGINT) stays ignored. The run then records
// itself as interrupted, gives up its unfinished cell, and ends by the signal (finish_stopped):
// rerunning the command resumes it.
#pragma once
#include <signal.h>

#include <exception>
#include <iterator>
#include <string>

namespace kvb {

// The signals that ask a run to stop (above); a --workers supervisor's children take their
// default actions until they install their own handlers (scaleout/workers.cpp).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};

class StopSignals {
 public:
  StopSignals();  // installs the handlers, forgetting any earlier request
  ~StopSignals();  // restores the handlers it replaced and forgets the request
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal that asked to stop, 0 while none has.
  static int requested();

 private:
  struct sigaction previous_[std::size(kStopSignals)] = {};
};

// Thrown before a sample once a stop is requested; the cell is given up, not failed.
struct RunStopped : std::exception {
  const char* what() const noexcept override { return "stopped by a signal"; }
};

// "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1 (the supervisor's)", or "signal N".
std::string signal_name(int signal);

// After a stopped run is recorded: says how to resume, then ends this process by `signal`'s
// default action, so that a shell running kvbench in a loop stops too (exit 128 + N where the
// signal cannot end it). Does not return.
[[noreturn]] void finish_stopped(int signal);

}  // namespace kvb
