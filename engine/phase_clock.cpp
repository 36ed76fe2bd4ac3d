#include "engine/phase_clock.h"

#include <torch/cuda.h>

#if KVBENCH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace kvb {

using Clock = std::chrono::steady_clock;

#if KVBENCH_CUDA_KERNELS
// A pool of timing events, reused after each settle().
struct PhaseClock::Events {
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> pool;
  int64_t used = 0;
  int64_t record() {
    if (used == int64_t(pool.size()))
      pool.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    pool[size_t(used)]->record(at::cuda::getCurrentCUDAStream());
    return used++;
  }
};
#else
struct PhaseClock::Events {};
#endif

PhaseClock::PhaseClock(at::Device device) : device_(device) {
#if KVBENCH_CUDA_KERNELS
  if (device_.is_cuda()) events_ = std::make_unique<Events>();
#endif
}

PhaseClock::~PhaseClock() = default;
PhaseClock::PhaseClock(PhaseClock&&) noexcept = default;
PhaseClock& PhaseClock::operator=(PhaseClock&&) noexcept = default;

PhaseClock::Mark PhaseClock::mark() {
#if KVBENCH_CUDA_KERNELS
  if (events_) return Mark{.host = Clock::now(), .event = events_->record()};
#endif
  // A GPU runs behind the host: without events, wait for it so a phase's time is its own.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  return Mark{.host = Clock::now(), .event = -1};
}

void PhaseClock::add_since(const Mark& start, double* total) {
  const Mark stop = mark();
  if (start.event >= 0 && stop.event >= 0) {
    pending_.push_back(Pending{.start = start.event, .stop = stop.event, .total = total});
    return;
  }
  *total += std::chrono::duration<double>(stop.host - start.host).count();
}

void PhaseClock::settle() {
#if KVBENCH_CUDA_KERNELS
  if (!events_) return;
  if (!pending_.empty()) {
    events_->pool[size_t(events_->used - 1)]->synchronize();  // the stream's last: all done
    for (const Pending& p : pending_)
      *p.total += double(events_->pool[size_t(p.start)]->elapsed_time(
                      *events_->pool[size_t(p.stop)])) * 1e-3;  // ms -> s
  }
  pending_.clear();
  events_->used = 0;
#endif
}

}  // namespace kvb
