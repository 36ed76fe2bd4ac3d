// CUDA's warp matrix operations (nvcuda::wmma) on the CPU, for the emulation only
// (tests/cuda_emulation/README.md): what kernels/cuda/*.cu use of them. On a GPU a fragment's
// elements are spread over the warp's lanes in an undocumented layout; here every lane holds
// the whole tile, so a kernel that reads fragment elements by index (x[], num_elements, which
// are not declared here) does not compile: it would depend on the GPU's layout. Each operation
// is a warp operation (every lane of the warp must reach it, as on a GPU) and computes what
// the warp computes: a product's sums run over k in order, in fp32, over the inputs widened.
#pragma once
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
inline float widen(float x) { return x; }
inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float widen(__half x) { return __half2float(x); }
// What the GPU requires of a tile's memory: a 256-bit aligned address and a row stride of
// whole 16 bytes (ldm a multiple of 8 for 16-bit elements, of 4 for float).
template <class E>
void require_layout(const E* p, unsigned ldm, const char* what) {
  kvb_emu::require_multiple(reinterpret_cast<uintptr_t>(p), 32, what);
  kvb_emu::require_multiple(uintptr_t(ldm) * sizeof(E), 16, what);
}
// A warp operation's switch point: every running lane of the warp meets here.
inline void warp_meets() { kvb_emu::warp_exchange(0, kvb_emu::lane()); }
template <class Use, int M, int N, int K>
constexpr int rows() { return std::is_same_v<Use, matrix_b> ? K : M; }
template <class Use, int M, int N, int K>
constexpr int cols() { return std::is_same_v<Use, matrix_a> ? K : N; }
}  // namespace detail

// The whole tile, row-major, widened to float (every lane's copy).
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int kRows = detail::rows<Use, M, N, K>(), kCols = detail::cols<Use, M, N, K>();
  float tile[kRows * kCols];
};

template <class Use, int M, int N, int K, class T, class Layout, class E>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const E* p, unsigned ldm) {
  static_assert(std::is_same_v<T, E>, "load_matrix_sync: the fragment's element type");
  detail::require_layout(p, ldm, "load_matrix_sync");
  detail::warp_meets();
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::kRows; ++r)
    for (int c = 0; c < F::kCols; ++c)
      f.tile[r * F::kCols + c] = detail::widen(
          std::is_same_v<Layout, row_major> ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r]);
}

template <int M, int N, int K, class T>
void fill_fragment(fragment<accumulator, M, N, K, T>& f, float v) {
  for (float& x : f.tile) x = v;
}

template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  detail::warp_meets();
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = c.tile[i * N + j];
      for (int k = 0; k < K; ++k) sum += a.tile[i * K + k] * b.tile[k * N + j];
      out[i * N + j] = sum;
    }
  for (int x = 0; x < M * N; ++x) d.tile[x] = out[x];
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm,
                       layout_t layout) {
  detail::require_layout(p, ldm, "store_matrix_sync");
  detail::warp_meets();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      (layout == mem_row_major ? p[size_t(i) * ldm + j] : p[size_t(j) * ldm + i]) = f.tile[i * N + j];
}

}  // namespace nvcuda::wmma
