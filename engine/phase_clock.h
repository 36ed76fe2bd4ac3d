// The session's phase timers (prefill, the method's hooks, selection, attention per layer, the
// decode step). On the CPU: the steady clock. On a GPU of a CUDA build (KVBENCH_CUDA_KERNELS):
// CUDA events recorded on the current stream, so timing adds no host synchronisation; each
// interval is added to its total by settle(), which waits for the events once (the session
// settles at the end of prefill and of each decode step, where the sampled token's read waits
// for the GPU anyway). On a GPU without the CUDA build: the device is synchronised before each
// clock reading (a synchronisation per reading).
#pragma once
#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <vector>

namespace kvb {

class PhaseClock {
 public:
  explicit PhaseClock(at::Device device);
  ~PhaseClock();
  PhaseClock(PhaseClock&&) noexcept;
  PhaseClock& operator=(PhaseClock&&) noexcept;

  struct Mark {
    std::chrono::steady_clock::time_point host;
    int64_t event = -1;  // index of a recorded CUDA event, or -1
  };
  Mark mark();
  // *total += the time from `start` to now: at once on the CPU, at settle() on a GPU.
  void add_since(const Mark& start, double* total);
  // Adds every pending interval to its total (waits for the last recorded event).
  void settle();

 private:
  struct Events;  // the CUDA events, on a CUDA build
  struct Pending {
    int64_t start, stop;
    double* total;
  };
  at::Device device_;
  std::unique_ptr<Events> events_;
  std::vector<Pending> pending_;
};

}  // namespace kvb
