// Where and in which precision a model runs: the `--device` / `--dtype` settings and the suite
// axes of the same names. Names, not enums, are what suites and the store hold.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvb {

// The names kvbench accepts: "cpu", "cuda", "cuda:N".
// InputError naming `where` when `name` is not one of them (no device is looked for).
void check_device_name(const std::string& name, const std::string& where);
// The device named; InputError naming `where` when the name is malformed, this build's LibTorch
// has no CUDA, or the machine has no such GPU.
at::Device parse_device(const std::string& name, const std::string& where);

// InputError naming `where` when this LibTorch cannot compute in `dtype` on `device` (LibTorch
// 1.13's CPU kernels have no f16 matrix product): found by trying a small one.
void check_dtype_on_device(at::ScalarType dtype, at::Device device, const std::string& where);

// "f32", "bf16", "f16" -> the dtype; InputError naming `where` otherwise.
at::ScalarType parse_dtype(const std::string& name, const std::string& where);
std::string dtype_name(at::ScalarType dtype);  // the inverse ("f32" for kFloat)

// What LibTorch's CUDA allocator holds allocated on a GPU: now, and at most since the last
// reset_peak_device_memory. Nullopt on the CPU and on a build without CUDA kernels.
struct DeviceMemory {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};
std::optional<DeviceMemory> device_memory(const at::Device& device);
void reset_peak_device_memory(const at::Device& device);

// `values` as an int64 tensor on `device`. To a GPU the copy goes from pinned memory, queued
// behind the device's pending work: a copy from pageable memory would make the host wait for
// the device to drain first (once per call, in the middle of a decode step).
at::Tensor host_to_device(const std::vector<int64_t>& values, at::Device device);

// A device tensor's copy on the host, queued behind the device's pending work so that the host
// does not wait when it asks for it; wait() (any thread) blocks until the copy has landed and
// returns it. On the CPU it is the tensor itself, ready at once. Copies share the one copy.
class HostCopy {
 public:
  explicit HostCopy(const at::Tensor& tensor);
  const at::Tensor& wait() const;

 private:
  struct Landed;  // the CUDA event after the copy, on a CUDA build
  at::Tensor host_;
  std::shared_ptr<Landed> landed_;
};

// Device work queued on a side stream of a GPU, so that it runs beside the work queued after
// it on the current stream (ClusterKV's prompt clustering during the prefill, as its authors'
// efficiency code builds it). run(inputs, f) calls f at once, on this thread, with a side stream
// of LibTorch's pool current; what f queues runs after the current stream's work queued so far,
// and the caching allocator is told that the side stream reads `inputs` (made on the current
// stream), so their memory is not handed out again while it may. f must not read a device
// value on the host (that would wait for the current stream to drain first). join(outputs)
// makes the current stream wait, on the device, for everything run queued, and tells the
// allocator that `outputs` (made by f) are used on the current stream from then on. On the
// CPU, and on a build without the CUDA kernels, run calls f as it is and join does nothing.
class SideStream {
 public:
  explicit SideStream(const at::Device& device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  void run(const std::vector<at::Tensor>& inputs, const std::function<void()>& f);
  void join(const std::vector<at::Tensor>& outputs);
  // Whether run queues f's work on a side stream (else f runs as it is).
  bool queues() const { return stream_ != nullptr; }

 private:
  struct Stream;  // the side stream, on a CUDA build and a GPU
  std::unique_ptr<Stream> stream_;
};

// Counts the device synchronisations LibTorch makes on this thread while it lives: each point
// where the host waits for the GPU to read a device value or drain a stream (`item()`, a copy
// to the host, `nonzero`, `equal`); a wait on an event or on the whole device is not seen. On a
// GPU of a CUDA build it sets c10's sync debug mode to warn and counts those warnings instead
// of printing them (other warnings pass on); elsewhere it counts nothing and counting() is
// false. One at a time per process (the mode is global).
class DeviceSyncCounter {
 public:
  explicit DeviceSyncCounter(const at::Device& device);
  ~DeviceSyncCounter();
  DeviceSyncCounter(const DeviceSyncCounter&) = delete;
  DeviceSyncCounter& operator=(const DeviceSyncCounter&) = delete;
  bool counting() const { return hook_ != nullptr; }
  int64_t count() const;

 private:
  struct Hook;  // the warning handler, on a CUDA build
  std::unique_ptr<Hook> hook_;
};

// One line for a run's provenance: "cpu", or "cuda:0 (<GPU name>, CUDA runtime R, driver D)"
// where this build can ask the CUDA runtime (a CUDA LibTorch), else "cuda:0".
std::string describe_device(const at::Device& device);

// Gives the blocks LibTorch's CUDA allocator keeps cached back to the GPU (after a cell ran out
// of memory, so that the next cell starts with all of it); nothing on the CPU.
void release_cached_device_memory(const at::Device& device);

}  // namespace kvb
