#include "engine/device.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include "engine/common/error.h"

#if KVBENCH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#endif

namespace kvb {
namespace {

// "cuda:N" -> N; -1 for "cuda"; throws for anything else after "cuda".
int cuda_index(const std::string& name, const std::string& where) {
  if (name == "cuda") return -1;
  const std::string digits = name.substr(5);
  const bool ok = name.rfind("cuda:", 0) == 0 && !digits.empty() && digits.size() <= 3 &&
                  digits.find_first_not_of("0123456789") == std::string::npos;
  if (!ok) throw InputError(where + ": \"" + name + "\" is not one of cpu, cuda, cuda:N");
  return std::stoi(digits);
}

}  // namespace

void check_device_name(const std::string& name, const std::string& where) {
  if (name == "cpu") return;
  if (name.rfind("cuda", 0) != 0)
    throw InputError(where + ": \"" + name + "\" is not one of cpu, cuda, cuda:N");
  cuda_index(name, where);
}

at::Device parse_device(const std::string& name, const std::string& where) {
  check_device_name(name, where);
  if (name == "cpu") return at::kCPU;
  const int index = cuda_index(name, where);
  if (!torch::cuda::is_available())
    throw InputError(where + ": \"" + name + "\" asked for, but " +
                     (at::hasCUDA() ? std::string("no GPU is visible (CUDA_VISIBLE_DEVICES, driver?)")
                                    : std::string("this kvbench is built against a LibTorch "
                                                  "without CUDA (see README, On a GPU machine)")));
  const int count = int(torch::cuda::device_count());
  if (index >= count)
    throw InputError(where + ": \"" + name + "\" asked for, but this machine has " +
                     std::to_string(count) + " GPU" + (count == 1 ? "" : "s"));
  return at::Device(at::kCUDA, at::DeviceIndex(index < 0 ? 0 : index));
}

at::ScalarType parse_dtype(const std::string& name, const std::string& where) {
  if (name == "f32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "f16") return at::kHalf;
  throw InputError(where + ": \"" + name + "\" is not one of f32, bf16, f16");
}

void check_dtype_on_device(at::ScalarType dtype, at::Device device, const std::string& where) {
  try {
    at::Tensor probe = at::ones({2, 2}, at::TensorOptions().dtype(dtype).device(device));
    at::linear(probe, probe, probe[0]);
    at::rsqrt(probe);
  } catch (const c10::Error& e) {
    throw InputError(where + ": " + dtype_name(dtype) + " on " + device.str() +
                     " is not supported by this LibTorch (" + TORCH_VERSION +
                     ": no half-precision matrix product there); use bf16 or f32, or a GPU");
  }
}

std::string dtype_name(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "f32";
  if (dtype == at::kBFloat16) return "bf16";
  if (dtype == at::kHalf) return "f16";
  return std::string(c10::toString(dtype));
}

std::string describe_device(const at::Device& device) {
  if (device.is_cpu()) return "cpu";
  const std::string name = "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
#if KVBENCH_CUDA_KERNELS
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0);
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return name + " (" + props->name + ", CUDA runtime " + version(runtime) + ", driver " +
         version(driver) + ")";
#else
  return name;
#endif
}

void release_cached_device_memory(const at::Device& device) {
#if KVBENCH_CUDA_KERNELS
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

#if KVBENCH_CUDA_KERNELS
namespace {
c10::DeviceIndex cuda_index_of(const at::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
}  // namespace
#endif

std::optional<DeviceMemory> device_memory(const at::Device& device) {
#if KVBENCH_CUDA_KERNELS
  if (device.is_cuda()) {
    // Index 0 of the allocator's stat arrays is StatType::AGGREGATE (every pool), in LibTorch
    // 1.13 and 2.x alike (the enum moved namespaces between them).
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index_of(device));
    return DeviceMemory{.current_bytes = stats.allocated_bytes[0].current,
                        .peak_bytes = stats.allocated_bytes[0].peak};
  }
#endif
  (void)device;
  return std::nullopt;
}

void reset_peak_device_memory(const at::Device& device) {
#if KVBENCH_CUDA_KERNELS
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index_of(device));
#endif
  (void)device;
}

at::Tensor host_to_device(const std::vector<int64_t>& values, at::Device device) {
  at::Tensor host = at::tensor(values, at::kLong);
  if (device.is_cpu()) return host;
  // The caching host allocator keeps the pinned buffer alive until the copy has run.
  return host.pin_memory().to(device, at::kLong, /*non_blocking=*/true);
}

#if KVBENCH_CUDA_KERNELS
struct HostCopy::Landed {
  at::cuda::CUDAEvent event;
};
#else
struct HostCopy::Landed {};
#endif

HostCopy::HostCopy(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) {
    host_ = tensor;
    return;
  }
#if KVBENCH_CUDA_KERNELS
  // Pinned memory, or the copy would wait for the device to drain (the host allocator keeps
  // the buffer until the copy has run).
  host_ = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  host_.copy_(tensor, /*non_blocking=*/true);
  landed_ = std::make_shared<Landed>();
  landed_->event.record(at::cuda::getCurrentCUDAStream(tensor.device().index()));
#else
  host_ = tensor.to(at::kCPU);  // a LibTorch with CUDA but kvbench without its kernels: waits
#endif
}

const at::Tensor& HostCopy::wait() const {
#if KVBENCH_CUDA_KERNELS
  if (landed_) landed_->event.synchronize();
#endif
  return host_;
}

#if KVBENCH_CUDA_KERNELS
struct SideStream::Stream {
  at::cuda::CUDAStream stream;
};
#else
struct SideStream::Stream {};
#endif

SideStream::SideStream(const at::Device& device) {
#if KVBENCH_CUDA_KERNELS
  if (device.is_cuda())
    stream_ = std::make_unique<Stream>(
        Stream{c10::cuda::getStreamFromPool(/*isHighPriority=*/false, cuda_index_of(device))});
#else
  (void)device;
#endif
}

SideStream::~SideStream() = default;

void SideStream::run(const std::vector<at::Tensor>& inputs, const std::function<void()>& f) {
#if KVBENCH_CUDA_KERNELS
  if (stream_) {
    const at::cuda::CUDAStream& side = stream_->stream;
    at::cuda::CUDAEvent queued;  // the current stream's work so far
    queued.record(at::cuda::getCurrentCUDAStream(side.device_index()));
    queued.block(side);
    for (const at::Tensor& t : inputs) t.record_stream(side);
    const c10::cuda::CUDAStreamGuard on_side(side);
    f();
    return;
  }
#endif
  (void)inputs;
  f();
}

void SideStream::join(const std::vector<at::Tensor>& outputs) {
#if KVBENCH_CUDA_KERNELS
  if (stream_) {
    const at::cuda::CUDAStream current = at::cuda::getCurrentCUDAStream(stream_->stream.device_index());
    at::cuda::CUDAEvent done;
    done.record(stream_->stream);
    done.block(current);
    for (const at::Tensor& t : outputs)
      if (t.defined() && t.is_cuda()) t.record_stream(current);
  }
#endif
  (void)outputs;
}

#if KVBENCH_CUDA_KERNELS
namespace {
// Where c10 keeps this thread's warning handler: c10::Warning before LibTorch 2.0, then
// c10::WarningUtils (c10::Warning became the warning's class).
#if TORCH_VERSION_MAJOR >= 2
namespace warnings = c10::WarningUtils;
#else
namespace warnings = c10::Warning;
#endif
}  // namespace

// c10 warns "called a synchronizing CUDA operation" at each synchronisation in its sync debug
// mode: counted here, every other warning handed to the handler this one replaced. The
// handler's signature changed in LibTorch 2.0 (a Warning object).
struct DeviceSyncCounter::Hook : c10::WarningHandler {
  c10::WarningHandler* previous = warnings::get_warning_handler();
  c10::cuda::SyncDebugMode previous_mode = c10::cuda::warning_state().get_sync_debug_mode();
  int64_t syncs = 0;

  static bool is_sync(const std::string& message) {
    return message.find("synchronizing CUDA operation") != std::string::npos;
  }
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override {
    if (is_sync(warning.msg())) ++syncs;
    else previous->process(warning);
  }
#else
  void process(const c10::SourceLocation& where, const std::string& message,
               bool verbatim) override {
    if (is_sync(message)) ++syncs;
    else previous->process(where, message, verbatim);
  }
#endif
};
#else
struct DeviceSyncCounter::Hook {
  int64_t syncs = 0;
};
#endif

DeviceSyncCounter::DeviceSyncCounter(const at::Device& device) {
#if KVBENCH_CUDA_KERNELS
  if (!device.is_cuda()) return;
  hook_ = std::make_unique<Hook>();
  warnings::set_warning_handler(hook_.get());
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
#else
  (void)device;
#endif
}

DeviceSyncCounter::~DeviceSyncCounter() {
#if KVBENCH_CUDA_KERNELS
  if (!hook_) return;
  c10::cuda::warning_state().set_sync_debug_mode(hook_->previous_mode);
  warnings::set_warning_handler(hook_->previous);
#endif
}

int64_t DeviceSyncCounter::count() const { return hook_ ? hook_->syncs : 0; }

}  // namespace kvb
