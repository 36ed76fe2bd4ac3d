// SIGINT and SIGTERM (Ctrl-C, Slurm's time limit, `kill`) asking a run to stop cleanly: the
// first sets a flag the runner reads between samples and says so on stderr; a second ends the
// process at once (the default action). The run then records itself as interrupted, gives up
// its unfinished cell and exits 128 + the signal; rerunning the command resumes it.
#pragma once
#include <signal.h>

#include <exception>
#include <string>

namespace kvb {

class StopSignals {
 public:
  StopSignals();  // installs the handlers, forgetting any earlier request
  ~StopSignals();  // restores the handlers it replaced
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal that asked to stop (SIGINT or SIGTERM), 0 while none has.
  static int requested();

 private:
  struct sigaction previous_int_ {}, previous_term_ {};
};

// Thrown between samples once a stop is requested; the cell is given up, not failed.
struct RunStopped : std::exception {
  const char* what() const noexcept override { return "stopped by a signal"; }
};

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

}  // namespace kvb
