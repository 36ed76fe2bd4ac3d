// Piecewise CUDA graphs for decode steps (`--cuda-graphs`; issue 21). What a decode step runs
// between two layers' attentions (the output projection, the MLP, the norms and the next
// layer's q/k/v with RoPE) is the same kernels on the same [1, ...] shapes at every step, so
// each layer's piece is captured once as a CUDA graph and then replayed: one launch instead of
// about a dozen. The attention, the KV append and the method's hooks stay outside the graphs:
// their counts and shapes change from step to step. (vLLM cuts its graphs at the attention for
// the same reason.)
//
// A graph reads its inputs, and writes its outputs, where they were when it was captured. A
// piece's outputs are therefore rewritten by its next replay, and an input found elsewhere is
// first copied to where the graph reads it. Inputs that stay put (an earlier piece's outputs,
// tensors made with fixed()) are read in place.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kvb {

class DecodeGraphs {
 public:
  DecodeGraphs();
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Whether this build can capture CUDA graphs (a CUDA build of kvbench).
  static bool available();

  using Piece = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  // Piece `index` of a step on `inputs` (on the device of the first): on its first call, run
  // once on the capture stream (which warms up what it calls there, e.g. cuBLAS's workspace),
  // captured there, then replayed; after that, replayed. Returns its outputs (rewritten by the
  // piece's next replay). Pieces must be replayed in the order they were captured (they share
  // one memory pool and one capture stream). Later calls must pass inputs of the captured
  // shapes and dtypes, and an input that stays put must be passed as the same tensor
  // (std::logic_error otherwise). A failed capture throws std::runtime_error naming the piece,
  // after ending the capture.
  std::vector<at::Tensor> run(size_t index, const std::vector<at::Tensor>& inputs,
                              const Piece& piece);
  // A tensor that holds `value` from now on at an address that does not change (one per
  // name), for inputs every piece reads (the step's RoPE angles).
  const at::Tensor& fixed(const std::string& name, const at::Tensor& value);
  // Pieces captured so far, and the host's seconds spent capturing them (warm-up runs
  // included): a step that captures takes that much longer.
  size_t captured() const;
  double capture_seconds() const { return capture_seconds_; }

 private:
  struct Captured;       // a graph with its inputs and outputs (a CUDA build)
  struct CaptureStream;  // the one side stream every piece is captured on (a CUDA build)
  bool stays_put(const at::Tensor& t) const { return stable_.count(t.data_ptr()) > 0; }

  std::unique_ptr<CaptureStream> stream_;
  std::vector<std::unique_ptr<Captured>> pieces_;
  std::map<std::string, at::Tensor> fixed_;  // a map: references to its values stay valid
  std::set<const void*> stable_;  // where the outputs and fixed tensors are
  double capture_seconds_ = 0;
};

}  // namespace kvb
