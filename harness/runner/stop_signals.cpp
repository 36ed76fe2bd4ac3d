#include "harness/runner/stop_signals.h"

#include <unistd.h>

#include <atomic>

namespace kvb {
namespace {

std::atomic<int> g_requested{0};  // lock-free: safe to touch from a signal handler

void on_stop_signal(int signal) {
  if (g_requested.exchange(signal) != 0) {  // asked twice: stop now
    ::signal(signal, SIG_DFL);
    raise(signal);
    return;
  }
  const char message[] = "\nkvbench: stopping after the current sample (again to stop at once)\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
}

}  // namespace

StopSignals::StopSignals() {
  g_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;  // the runner polls the flag; system calls carry on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

int StopSignals::requested() { return g_requested.load(); }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

}  // namespace kvb
