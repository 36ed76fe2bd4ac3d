#include "harness/runner/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>

namespace kvb {
namespace {

std::atomic<int> g_requested{0};  // lock-free: safe to touch from a signal handler

// Ends the process by `signal` (its default action), or with 128 + N where that does not (a
// container's PID 1 ignores it).
[[noreturn]] void die_by(int signal) {
  ::signal(signal, SIG_DFL);
  raise(signal);
  _exit(128 + signal);
}

void on_stop_signal(int signal) {
  const int first = g_requested.exchange(signal);
  // Asked twice: stop now. A --workers worker gets a terminal's or Slurm's stop twice, sent to
  // the process group and passed on by its supervisor as SIGUSR1, in either order (SIGUSR1
  // first where both are pending): one request, the group's signal the one kept. (Taken as a
  // second, it ended the worker at once and left its cell claimed.)
  if (first != 0 && first != SIGUSR1 && signal != SIGUSR1) die_by(signal);
  if (first != 0) {
    if (signal == SIGUSR1) g_requested = first;
    return;
  }
  const char message[] = "\nkvbench: stopping before the next sample (again to stop at once)\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
}

}  // namespace

StopSignals::StopSignals() {
  g_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;  // the runner polls the flag; system calls carry on
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], nullptr, &previous_[i]);
    if (previous_[i].sa_handler != SIG_IGN) sigaction(kStopSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    sigaction(kStopSignals[i], &previous_[i], nullptr);
  g_requested = 0;  // the request was this scope's: a later run_cell must not see it
}

int StopSignals::requested() { return g_requested.load(); }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGHUP) return "SIGHUP";
  if (signal == SIGUSR1) return "SIGUSR1 (the supervisor's)";
  return "signal " + std::to_string(signal);
}

void finish_stopped(int signal) {
  std::cerr << "kvbench: run stopped by " << signal_name(signal)
            << "; rerun the same command to resume it\n";
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  die_by(signal);
}

}  // namespace kvb
