// CUDA on the CPU, for tests only: what kernels/cuda/*.cu and tests/kernels/cuda/ use of CUDA's
// language and runtime, emulated, so that CI runs the kernels on a machine without a GPU
// (tests/cuda_emulation/README.md says what this does and does not check). The .cu sources are
// compiled as C++ after tests/cuda_emulation/translate.cmake rewrites their launches
// (`kernel<<<grid, block, shared, stream>>>(args)`) and dynamic shared arrays.
//
// Execution: one block at a time, its threads as fibers on one OS thread, each run until it
// reaches __syncthreads, a warp operation or its end. A barrier opens when every thread of the
// block (warp) still running has reached it; threads that returned no longer count (as on a
// GPU). A block whose threads can neither run nor meet at a barrier is a deadlock: the
// emulator aborts naming the kernel. Atomics are plain read-modify-writes (fibers never
// interleave between barriers).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- language ---------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// `__shared__` declarations are rewritten by translate.cmake (to kvb_emu::dynamic_shared and
// kvb_emu::shared_static); one left over does not compile.

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
constexpr int warpSize = 32;

namespace kvb_emu {
uint3 thread_index();
uint3 block_index();
dim3 block_dim();
dim3 grid_dim();
void sync_threads();
void sync_warp();  // __syncwarp: a warp operation that also begins the lanes' next epoch
// A read of `bytes` (at most 16) of shared memory at p by the whole warp (ldmatrix): fails the
// launch unless they lie in the launch's dynamic shared memory or a static __shared__ variable,
// where a cp.async of any lane still has them in flight, and where one landed in them since the
// warp's last __syncwarp or __syncthreads; recorded, so that a cp.async into them before the
// next one fails too (cuda_emulation.cpp, WarpHazards).
void warp_reads_shared(const void* p, size_t bytes, const char* what);
// A warp operation: every lane of the warp still running hands in `bits`; returns the bits lane
// `source` (0..31) handed in. With `all`: every lane's bits (garbage where a lane did not take
// part), and in *taking_part a bit per lane that took part (the lanes that returned before it
// did not).
uint64_t warp_exchange(uint64_t bits, int source, uint64_t* all = nullptr,
                       unsigned* taking_part = nullptr);
int lane();
void* dynamic_shared_bytes();  // 128-byte aligned, as `extern __shared__ __align__(128)` is
// Fails the launch unless value is a multiple of `of` (what an instruction needs of an
// address or a stride).
void require_multiple(uintptr_t value, size_t of, const char* what);
// Fails the launch, saying `what`, unless `ok`.
void require(bool ok, const char* what);
template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_bytes());
}
// A static `__shared__` variable, one per declaration (`tag`, a static of the declaration's
// scope): the block's, 0xFF bytes at the block's start as on a GPU it holds garbage.
void* static_shared_bytes(const void* tag, size_t bytes);
template <class T>
T& shared_static(const void* tag) {
  static_assert(alignof(T) <= 16, "shared_static: stronger alignment than 16 bytes");
  return *static_cast<T*>(static_shared_bytes(tag, sizeof(T)));
}
template <class T>
uint64_t to_bits(T x) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T x;
  std::memcpy(&x, &bits, sizeof(T));
  return x;
}
}  // namespace kvb_emu

#define threadIdx (::kvb_emu::thread_index())
#define blockIdx (::kvb_emu::block_index())
#define blockDim (::kvb_emu::block_dim())
#define gridDim (::kvb_emu::grid_dim())

inline void __syncthreads() { kvb_emu::sync_threads(); }
// Every lane of the warp still running must reach it (a warp operation: a switch point).
inline void __syncwarp(unsigned = 0xffffffffu) { kvb_emu::sync_warp(); }
// Only full masks are emulated (all the kernels use): every lane of the warp must take part.
template <class T>
T __shfl_sync(unsigned, T v, int src, int = 32) {
  return kvb_emu::from_bits<T>(kvb_emu::warp_exchange(kvb_emu::to_bits(v), src & 31));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return kvb_emu::from_bits<T>(kvb_emu::warp_exchange(kvb_emu::to_bits(v), kvb_emu::lane() ^ mask));
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
  const int source = kvb_emu::lane() - int(delta);
  return kvb_emu::from_bits<T>(
      kvb_emu::warp_exchange(kvb_emu::to_bits(v), source < 0 ? kvb_emu::lane() : source));
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int = 32) {
  const int source = kvb_emu::lane() + int(delta);
  return kvb_emu::from_bits<T>(
      kvb_emu::warp_exchange(kvb_emu::to_bits(v), source > 31 ? kvb_emu::lane() : source));
}
inline unsigned __ballot_sync(unsigned, int predicate) {
  uint64_t all[32];
  unsigned taking_part = 0;
  kvb_emu::warp_exchange(predicate != 0, kvb_emu::lane(), all, &taking_part);
  unsigned mask = 0;
  for (int i = 0; i < 32; ++i) mask |= unsigned(all[i] & 1) << i;
  return mask & taking_part;
}
template <class T>
unsigned __match_any_sync(unsigned, T v) {
  uint64_t all[32];
  unsigned taking_part = 0;
  const uint64_t mine =
      kvb_emu::warp_exchange(kvb_emu::to_bits(v), kvb_emu::lane(), all, &taking_part);
  unsigned mask = 0;
  for (int i = 0; i < 32; ++i) mask |= unsigned(all[i] == mine) << i;
  return mask & taking_part;
}

template <class T, class U>
T atomicAdd(T* p, U v) {
  const T old = *p;
  *p = T(old + v);
  return old;
}
template <class T, class U>
T atomicOr(T* p, U v) {
  const T old = *p;
  *p = T(old | v);
  return old;
}

// CUDA's global min / max for mixed integer and floating types.
template <class A, class B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __float_as_uint(float x) { return kvb_emu::from_bits<unsigned>(kvb_emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return kvb_emu::from_bits<float>(kvb_emu::to_bits(x)); }
// The emulation is built with -ffp-contract=off: products and sums are rounded apart, as these
// intrinsics promise (nvcc otherwise fuses a * b + c; results differ from a GPU's in the last
// bits, which the tests' tolerances allow).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __expf(float x) { return std::exp(x); }
using std::isnan;
template <class T>
T __ldcg(const T* p) {
  return *p;
}

// ---- 16-bit floats ---------------------------------------------------------------------------
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
struct __half {
  uint16_t bits;
};
struct __half2 {
  __half x, y;
};
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float(uint32_t(h.bits) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t u = __float_as_uint(f);
  if (std::isnan(f)) return {uint16_t((u >> 16) | 0x40)};  // a quiet NaN, sign kept
  return {uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16)};  // round to nearest even
}
inline float __half2float(__half h) {
  _Float16 x;
  std::memcpy(&x, &h.bits, 2);
  return float(x);
}
inline __half __float2half_rn(float f) {
  const _Float16 x = static_cast<_Float16>(f);  // IEEE round to nearest even
  __half h;
  std::memcpy(&h.bits, &x, 2);
  return h;
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return {__bfloat162float(h.x), __bfloat162float(h.y)};
}
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }

// ---- runtime ---------------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
};
using cudaError = cudaError_t;
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

cudaError_t cudaGetLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void** p, size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr);

namespace kvb_emu {
void set_max_dynamic_shared(const void* kernel, int bytes);
int max_dynamic_shared(const void* kernel);
// Blocks of `threads` threads resident per SM (the emulated GPU's: 2048 threads an SM).
int resident_blocks(int threads);
}  // namespace kvb_emu

template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
    kvb_emu::set_max_dynamic_shared(reinterpret_cast<const void*>(kernel), value);
  return cudaSuccess;
}
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F*, int threads, size_t) {
  *blocks = kvb_emu::resident_blocks(threads);
  return cudaSuccess;
}

// ---- launches ----------------------------------------------------------------------------------
namespace kvb_emu {

struct LaunchConfig {
  dim3 grid, block;
  size_t shared = 0;
  LaunchConfig(dim3 g, dim3 b, size_t s = 0, cudaStream_t = nullptr)
      : grid(g), block(b), shared(s) {}
};

// Runs body(block) for every block of the grid, each block's threads as fibers; false (with
// the launch error set, nothing run) for a configuration a GPU refuses.
using BlockBody = void (*)(void* closure);
bool run_grid(const LaunchConfig& c, const void* kernel, const char* name, BlockBody body,
              void* closure);

template <class Kernel>
struct Launch {
  Kernel* kernel;
  LaunchConfig config;
  const char* name;
  template <class... Args>
  void operator()(Args&&... args) const {
    // Kernel parameters are copies, as a launch passes them.
    auto call = [k = kernel, params = std::make_tuple(args...)] { std::apply(k, params); };
    run_grid(config, reinterpret_cast<const void*>(kernel), name,
             [](void* closure) { (*static_cast<decltype(call)*>(closure))(); }, &call);
  }
};
template <class Kernel>
Launch<Kernel> launch(Kernel* kernel, LaunchConfig config, const char* name) {
  return {kernel, config, name};
}

}  // namespace kvb_emu
