#include "training/batch_stream.h"

#include "training/tiny_trainer.h"

namespace kvb {

BatchStream::BatchStream(const Tokenizer& tokenizer, const EpisodeSources& sources, uint64_t seed,
                         const std::vector<TrainingPhase>& phases, int workers, int ahead)
    : tokenizer_(tokenizer), sources_(sources), ahead_(ahead), workers_(size_t(workers)) {
  for (const TrainingPhase& p : phases)
    for (int64_t i = 0; i < p.steps; ++i) step_phase_.push_back(&p);
  for (int w = 0; w < workers; ++w)
    workers_[size_t(w)].thread =
        std::thread(&BatchStream::run, this, w, seed + uint64_t(w) * 0x9E3779B97F4A7C15ull);
}

BatchStream::~BatchStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (Worker& w : workers_) w.thread.join();
}

void BatchStream::run(int w, uint64_t seed) {
  try {
    EpisodeSampler sampler(tokenizer_, sources_, seed);
    const int64_t W = int64_t(workers_.size());
    for (int64_t step = w; step < int64_t(step_phase_.size()); step += W) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || int(workers_[size_t(w)].ready.size()) < ahead_; });
        if (stopping_) return;
      }
      const TrainingPhase& phase = *step_phase_[size_t(step)];
      EpisodeBatch batch = sampler.batch(phase.mix, phase.rows);  // the slow part, unlocked
      {
        std::lock_guard<std::mutex> lock(mutex_);
        workers_[size_t(w)].ready.push_back(std::move(batch));
      }
      changed_.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      workers_[size_t(w)].error = std::current_exception();
    }
    changed_.notify_all();
  }
}

EpisodeBatch BatchStream::next() {
  if (taken_ >= int64_t(step_phase_.size()))
    throw std::logic_error("BatchStream::next: the curriculum has no more steps");
  Worker& w = workers_[size_t(taken_ % int64_t(workers_.size()))];
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !w.ready.empty() || w.error; });
  if (w.ready.empty()) std::rethrow_exception(w.error);
  EpisodeBatch batch = std::move(w.ready.front());
  w.ready.pop_front();
  ++taken_;
  lock.unlock();
  changed_.notify_all();
  return batch;
}

}  // namespace kvb
