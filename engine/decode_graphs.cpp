#include "engine/decode_graphs.h"

#include <chrono>
#include <stdexcept>

#if KVBENCH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace kvb {

namespace {

// Whether `t` can take `value`'s elements in place: the same sizes and dtype.
bool same_shape_and_dtype(const at::Tensor& t, const at::Tensor& value) {
  return t.sizes().equals(value.sizes()) && t.scalar_type() == value.scalar_type();
}

}  // namespace

#if KVBENCH_CUDA_KERNELS
struct DecodeGraphs::Captured {
  at::cuda::CUDAGraph graph;
  std::vector<at::Tensor> inputs;   // where the graph reads them
  std::vector<at::Tensor> outputs;  // where it writes them (undefined: none)
};

struct DecodeGraphs::CaptureStream {
  at::cuda::CUDAStream stream;
};

namespace {

// What is queued on `waiting` from now on runs after what is queued on `first` now.
void wait_for(const at::cuda::CUDAStream& waiting, const at::cuda::CUDAStream& first) {
  at::cuda::CUDAEvent done;
  done.record(first);
  done.block(waiting);
}

// Ends a capture that a failure interrupted and drops the partial graph, so that the stream
// runs its work again (and the allocator stops sending its allocations to the graph's pool).
void abandon_capture(const at::cuda::CUDAStream& stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream.stream(), &partial) == cudaSuccess && partial != nullptr)
    cudaGraphDestroy(partial);
  cudaGetLastError();  // cleared: the next launch's check would report it
}

}  // namespace

bool DecodeGraphs::available() { return true; }
#else
struct DecodeGraphs::Captured {};
struct DecodeGraphs::CaptureStream {};
bool DecodeGraphs::available() { return false; }
#endif

DecodeGraphs::DecodeGraphs() = default;
DecodeGraphs::~DecodeGraphs() = default;

std::vector<at::Tensor> DecodeGraphs::run(size_t index, const std::vector<at::Tensor>& inputs,
                                          const Piece& piece) {
#if KVBENCH_CUDA_KERNELS
  if (inputs.empty()) throw std::logic_error("DecodeGraphs: a piece without inputs");
  const c10::cuda::CUDAGuard on_device(inputs.front().device());
  if (index < pieces_.size()) {
    Captured& c = *pieces_[index];
    if (inputs.size() != c.inputs.size())
      throw std::logic_error("DecodeGraphs: piece " + std::to_string(index) + " given " +
                             std::to_string(inputs.size()) + " inputs, captured with " +
                             std::to_string(c.inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& read = c.inputs[i];
      if (inputs[i].data_ptr() == read.data_ptr()) continue;
      if (!same_shape_and_dtype(read, inputs[i]) || stays_put(read))
        throw std::logic_error("DecodeGraphs: input " + std::to_string(i) + " of piece " +
                               std::to_string(index) + " is not what it was captured with");
      c.inputs[i].copy_(inputs[i]);
    }
    c.graph.replay();
    return c.outputs;
  }
  if (index != pieces_.size())
    throw std::logic_error("DecodeGraphs: piece " + std::to_string(index) + " run before piece " +
                           std::to_string(pieces_.size()));
  const auto started = std::chrono::steady_clock::now();
  auto c = std::make_unique<Captured>();
  for (const at::Tensor& t : inputs) c->inputs.push_back(stays_put(t) ? t : t.clone());
  // Captured on a side stream (CUDA cannot capture the default stream), after the inputs. One
  // for all pieces: the allocator reuses a freed block only on its own stream, and cuBLAS
  // keeps a workspace per stream.
  if (!stream_)
    stream_ = std::make_unique<CaptureStream>(
        CaptureStream{at::cuda::getStreamFromPool(false, inputs.front().device().index())});
  const at::cuda::CUDAStream main = at::cuda::getCurrentCUDAStream();
  const at::cuda::CUDAStream& side = stream_->stream;
  wait_for(side, main);
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    piece(c->inputs);  // the warm-up run; its outputs are dropped
    if (pieces_.empty()) c->graph.capture_begin();
    else c->graph.capture_begin(pieces_.front()->graph.pool());  // one pool for all pieces
    try {
      c->outputs = piece(c->inputs);
      c->graph.capture_end();
    } catch (const std::exception& e) {
      abandon_capture(side);
      throw std::runtime_error("CUDA graph capture of decode piece " + std::to_string(index) +
                               " failed (run without --cuda-graphs): " + e.what());
    }
  }
  wait_for(main, side);
  c->graph.replay();  // capturing ran nothing: the outputs of these inputs
  for (const at::Tensor& t : c->outputs)
    if (t.defined()) stable_.insert(t.data_ptr());
  pieces_.push_back(std::move(c));
  capture_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return pieces_.back()->outputs;
#else
  (void)index;
  return piece(inputs);
#endif
}

const at::Tensor& DecodeGraphs::fixed(const std::string& name, const at::Tensor& value) {
  auto found = fixed_.find(name);
  if (found == fixed_.end()) {
    found = fixed_.emplace(name, value.clone()).first;
    stable_.insert(found->second.data_ptr());
    return found->second;
  }
  at::Tensor& t = found->second;
  if (!same_shape_and_dtype(t, value))
    throw std::logic_error("DecodeGraphs::fixed: \"" + name + "\" changed shape or dtype");
  if (t.data_ptr() != value.data_ptr()) t.copy_(value);
  return t;
}

size_t DecodeGraphs::captured() const { return pieces_.size(); }

}  // namespace kvb
