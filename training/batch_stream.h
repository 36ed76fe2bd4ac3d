// The training batches of a whole curriculum, built ahead on host threads while the model
// trains: on a GPU the step is milliseconds and building a batch of long documents about a
// second on one thread (`kvbench_bench --benchmark_filter=episode_batch`), so the data, not the
// GPU, would set the pace.
//
// Deterministic for a given worker count: worker w (its own EpisodeSampler, seeded
// seed + w * 0x9E3779B97F4A7C15, so one worker reproduces the single sampler trained before)
// builds steps w, w + W, w + 2W, ... in order, and next() hands them out by step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "training/retrieval_episodes.h"

namespace kvb {

struct TrainingPhase;

class BatchStream {
 public:
  // `phases` must outlive the stream. Each worker keeps at most `ahead` batches unconsumed.
  BatchStream(const Tokenizer& tokenizer, const EpisodeSources& sources, uint64_t seed,
              const std::vector<TrainingPhase>& phases, int workers, int ahead = 2);
  ~BatchStream();  // stops the workers
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  // The batch of the next step, in curriculum order; rethrows a worker's exception.
  EpisodeBatch next();

 private:
  struct Worker {
    std::deque<EpisodeBatch> ready;  // its steps, in order, not yet taken
    std::exception_ptr error;
    std::thread thread;
  };
  void run(int w, uint64_t seed);

  const Tokenizer& tokenizer_;
  EpisodeSources sources_;
  std::vector<const TrainingPhase*> step_phase_;  // per step
  int ahead_;
  int64_t taken_ = 0;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Worker> workers_;
};

}  // namespace kvb
