// What a method may use of the model it runs on, beyond MethodContext's dimensions: read-only
// access to what InfiniGen's paper needs (a layer's query projection, a calibration prefill),
// a cache directory the run chose, and a memo that lives as long as the view. The caller that
// loads a model (runner, CLI command) makes one view per model and hands it to its sessions
// (SessionOptions::model_view), so nothing derived from a model outlives it or is shared
// between models; a session given none makes its own (no disk cache, memo per session).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvb {

struct LlamaModel;

class ModelView {
 public:
  // cache_dir: where methods may keep files derived from this model ("": nowhere on disk).
  ModelView(const LlamaModel& model, std::string cache_dir);

  // RoPE(x Wq + bq) of `layer` (with its per-head norm where the architecture has one) at
  // `position`. x: [1, D], a layer's attention input after its RMSNorm -> [Hq, d] fp32. The
  // rotation's angles are computed once per position and device (a decode step asks for every
  // sparse layer's queries at one position).
  at::Tensor queries(int layer, const at::Tensor& x, int64_t position) const;

  // `text` as token ids, BOS first.
  std::vector<int> encode(const std::string& text) const;

  // Runs a prefill of `ids` with full attention, handing each layer's post-RoPE queries and
  // keys to `visit(layer, q [Hq, T, d], k [Hkv, T, d])`.
  using QueryKeyVisitor = std::function<void(int, const at::Tensor&, const at::Tensor&)>;
  void prefill_queries_keys(const std::vector<int>& ids, const QueryKeyVisitor& visit) const;

  at::Device device() const;
  // The weights' content hash (hex), for names of files derived from them.
  std::string weights_id() const;
  const std::string& cache_dir() const { return cache_dir_; }

  // The value `make` built for `key` the first time it was asked of this view; later calls
  // share it (e.g. one InfiniGen calibration per model, not one per sample).
  template <typename T>
  std::shared_ptr<const T> memo(const std::string& key,
                                const std::function<std::shared_ptr<const T>()>& make) const {
    auto it = memo_.find(key);
    if (it == memo_.end()) it = memo_.emplace(key, std::shared_ptr<const void>(make())).first;
    return std::static_pointer_cast<const T>(it->second);
  }

 private:
  const LlamaModel& model_;
  std::string cache_dir_;
  mutable std::string weights_id_;  // computed on first use (hashes every weight)
  mutable std::map<std::string, std::shared_ptr<const void>> memo_;
  // The angles of the last position queries() rotated by (rope_angles' cos and sin: [1, r]).
  mutable int64_t rope_position_ = -1;
  mutable bool rope_interleaved_ = false;
  mutable at::Tensor rope_cos_, rope_sin_;
};

}  // namespace kvb
