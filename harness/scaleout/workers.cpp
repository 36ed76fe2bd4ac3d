#include "harness/scaleout/workers.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "harness/runner/stop_signals.h"

namespace kvb {

namespace {

bool is_number(const std::string& text) {
  return !text.empty() && text.size() <= 3 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A worker process and the read end of its stderr.
struct Worker {
  pid_t pid = -1;
  int stderr_fd = -1;
  std::string pending;  // a line not yet ended
  bool replaced = false;
};

// Starts `launch` as a process of `executable`; its stdout goes to /dev/null, its stderr to a
// pipe this process reads.
Worker start_worker(const std::string& executable, const WorkerLaunch& launch) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("--workers: cannot create a pipe");
  // The stop signals are held back across the fork: one sent to the child before it runs the
  // executable would otherwise reach this process's handler in it (setting a flag exec then
  // forgets) instead of stopping it. The child takes the default actions, then receives them.
  sigset_t stops, previous;
  sigemptyset(&stops);
  for (const int signal : kStopSignals) sigaddset(&stops, signal);
  pthread_sigmask(SIG_BLOCK, &stops, &previous);
  const pid_t pid = fork();
  if (pid == 0) {
    for (const int signal : kStopSignals) {
      struct sigaction current {};
      sigaction(signal, nullptr, &current);
      if (current.sa_handler != SIG_IGN) ::signal(signal, SIG_DFL);  // ignored stays ignored
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    if (!launch.visible_gpu.empty()) setenv("CUDA_VISIBLE_DEVICES", launch.visible_gpu.c_str(), 1);
    std::vector<char*> argv = {const_cast<char*>("kvbench")};
    for (const std::string& a : launch.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(executable.c_str(), argv.data());
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    throw std::runtime_error("--workers: cannot start a worker process");
  }
  return Worker{.pid = pid, .stderr_fd = fds[0]};
}

// Hands the complete lines of `w.pending` to the display or the log.
void take_lines(Worker& w, size_t index, Progress& progress, std::ostream& log) {
  size_t end;
  while ((end = w.pending.find('\n')) != std::string::npos) {
    const std::string line = w.pending.substr(0, end);
    w.pending.erase(0, end + 1);
    if (!progress.apply_event(line)) log << "worker " << index << ": " << line << "\n" << std::flush;
  }
}

// The exit code of a finished process as a shell reports it (128+N: killed by signal N).
int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether a worker that ended with `code` while this process is being stopped ended by that
// stop: by one of the stop signals, or by finish_stopped's exit 128 + N.
bool ended_by_stop(int code) {
  if (!StopSignals::requested()) return false;
  for (const int signal : kStopSignals)
    if (code == 128 + signal) return true;
  return false;
}

}  // namespace

std::vector<std::string> worker_gpus(int workers, const std::string& devices,
                                     const char* visible) {
  std::vector<std::string> chosen;
  if (devices.empty()) {
    for (int i = 0; i < workers; ++i) chosen.push_back(std::to_string(i));
  } else {
    chosen = split(devices, ',');
    if (int(chosen.size()) != workers)
      throw InputError("--devices: " + std::to_string(chosen.size()) + " GPUs for " +
                       std::to_string(workers) + " workers (give one per worker)");
  }
  const std::vector<std::string> listed = visible ? split(visible, ',') : std::vector<std::string>();
  for (std::string& gpu : chosen) {
    if (!is_number(gpu)) throw InputError("--devices: \"" + gpu + "\" is not a GPU number");
    if (!visible) continue;
    const size_t i = std::stoul(gpu);
    if (i >= listed.size())
      throw InputError("--devices: GPU " + gpu + " is not among CUDA_VISIBLE_DEVICES=" + visible);
    gpu = listed[i];
  }
  return chosen;
}

WorkersOutcome supervise_workers(const std::string& executable,
                                 const std::vector<WorkerLaunch>& launches, Progress& progress,
                                 std::ostream& log) {
  std::vector<Worker> workers;
  for (const WorkerLaunch& launch : launches) workers.push_back(start_worker(executable, launch));
  WorkersOutcome outcome;
  bool stop_passed_on = false;
  for (;;) {
    // A stop asked of this process alone (kill PID, not the group): the workers stop too.
    if (StopSignals::requested() && !stop_passed_on) {
      for (const Worker& w : workers)
        if (w.stderr_fd >= 0) kill(w.pid, SIGUSR1);
      stop_passed_on = true;
    }
    std::vector<pollfd> watched;
    std::vector<size_t> of;  // the worker of each watched descriptor
    for (size_t i = 0; i < workers.size(); ++i)
      if (workers[i].stderr_fd >= 0) {
        watched.push_back(pollfd{.fd = workers[i].stderr_fd, .events = POLLIN, .revents = 0});
        of.push_back(i);
      }
    if (watched.empty()) return outcome;
    if (poll(watched.data(), watched.size(), -1) < 0) continue;  // EINTR
    for (size_t k = 0; k < watched.size(); ++k) {
      if (!watched[k].revents) continue;
      Worker& w = workers[of[k]];
      char buffer[4096];
      const ssize_t n = read(w.stderr_fd, buffer, sizeof(buffer));
      if (n > 0) {
        w.pending.append(buffer, size_t(n));
        take_lines(w, of[k], progress, log);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // The worker closed its stderr: it ended.
      close(w.stderr_fd);
      w.stderr_fd = -1;
      if (!w.pending.empty()) {
        w.pending += "\n";
        take_lines(w, of[k], progress, log);
      }
      int status = 0;
      waitpid(w.pid, &status, 0);
      // A worker killed while the run is being stopped (Ctrl-C twice) is not replaced.
      if (WIFSIGNALED(status) && !w.replaced && !StopSignals::requested()) {
        log << "worker " << of[k] << ": killed by signal " << WTERMSIG(status)
            << "; started again (its cell is redone)\n" << std::flush;
        w = start_worker(executable, launches[of[k]]);
        w.replaced = true;
        ++outcome.replaced;
        continue;
      }
      const int code = exit_code_of(status);
      if (ended_by_stop(code)) {  // not a failure: the run says what the stop left undone
        ++outcome.stopped;
        continue;
      }
      if (code != 0) log << "worker " << of[k] << ": exit " << code << "\n" << std::flush;
      outcome.exit_code = std::max(outcome.exit_code, code);
    }
  }
}

}  // namespace kvb
