// CUDA kernels vs the CPU reference implementations (label "gpu"). Built only with
// -DKVBENCH_CUDA=ON; every test reports "skipped: no GPU" where no device exists.
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::cuda {
namespace {

using test::KernelRng;
using test::poisoned;
using test::relative_error;

#define KVB_REQUIRE_GPU() \
  if (::kvb::cuda::device_count() == 0) GTEST_SKIP() << "skipped: no GPU"

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(const std::vector<T>& host) : n(host.size()) {
    cudaMalloc(&ptr, n * sizeof(T));
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<T> get() const {
    std::vector<T> host(n);
    // A failed launch (e.g. no kernel image for this GPU's architecture) named, not a mismatch.
    EXPECT_NO_THROW(check_launch("the kernel under test"));
    const cudaError_t sync = cudaDeviceSynchronize();
    EXPECT_EQ(sync, cudaSuccess) << cudaGetErrorString(sync);
    cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
};

TEST(CudaKernels, QuestPageScores) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  // {P, d}: pages not a multiple of a block's 8 warps; head dims of 4 lanes' channels, of part
  // of a warp and of a warp plus a few. Heads `stride` floats apart (a narrowed buffer).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{500, 128}, {9, 20}, {1, 37}};
  for (const auto& [P, d] : shapes) {
    for (const bool sum_group : {false, true}) {
      SCOPED_TRACE("P " + std::to_string(P) + ", d " + std::to_string(d) + ", summed " +
                   std::to_string(sum_group));
      const int64_t H = 8, g = 4, stride = (P + 3) * d;
      auto q = rng.normal(size_t(H * g * d)), a = rng.normal(size_t(H * stride)),
           b = rng.normal(size_t(H * stride));
      std::vector<float> lo(a.size()), hi(a.size());
      for (size_t i = 0; i < a.size(); ++i)
        lo[i] = std::min(a[i], b[i]), hi[i] = std::max(a[i], b[i]);
      auto ref = poisoned<float>(size_t(H * (sum_group ? 1 : g) * P));
      kernels::quest_page_scores_reference(q.data(), lo.data(), hi.data(), ref.data(), H, g, P, d,
                                           stride, sum_group);
      DeviceBuffer<float> dq(q), dlo(lo), dhi(hi), out(poisoned<float>(ref.size()));
      quest_page_scores(dq.ptr, kernels::KvElement::kF32, dlo.ptr, dhi.ptr,
                        kernels::KvElement::kF32, out.ptr, H, g, P, d, stride, sum_group);
      EXPECT_LT(relative_error(out.get(), ref), 1e-5);
    }
  }
}

TEST(CudaKernels, PqScores) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  // n over a block's 2048 tokens; code rows wider than n (an index's leading columns).
  const int64_t H = 4, g = 4, m = 8, K = 64, s = 16, n = 5000, row = n + 33;
  auto q = rng.normal(size_t(H * g * m * s)), cent = rng.normal(size_t(H * m * K * s));
  std::vector<uint8_t> codes(size_t(H * m * row));
  for (auto& c : codes) c = uint8_t(rng.uniform(0, K - 1));
  auto ref = poisoned<float>(size_t(H * g * n));
  kernels::pq_scores_reference(q.data(), cent.data(), codes.data(), ref.data(), H, g, m, K, s, n,
                               row);
  DeviceBuffer<float> dq(q), dc(cent), out(poisoned<float>(ref.size()));
  DeviceBuffer<uint8_t> dcodes(codes);
  pq_scores(dq.ptr, kernels::KvElement::kF32, dc.ptr, dcodes.ptr, out.ptr, H, g, m, K, s, n, row);
  EXPECT_LT(relative_error(out.get(), ref), 1e-5);
}

TEST(CudaKernels, CentroidUpdate) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  // {C, d}: head dims not a multiple of a warp; C * (d + 1) floats over 48 KiB (the
  // global-memory path). Labels: the reference assignment's.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {40, 64}, {45, 72}, {33, 20}, {35, 30}, {100, 128}};
  for (const auto& [C, d] : shapes) {
    SCOPED_TRACE("C " + std::to_string(C) + ", d " + std::to_string(d));
    const int64_t H = 4, n = 3000;
    auto keys = rng.normal(size_t(H * n * d)), cent = rng.normal(size_t(H * C * d), 3.f);
    std::vector<int32_t> labels(size_t(H * n));
    kernels::cosine_assign_reference(keys.data(), cent.data(), labels.data(), H, n, C, d);
    DeviceBuffer<float> dk(keys), dc(cent), dout(poisoned<float>(cent.size()));
    DeviceBuffer<int32_t> dl(labels), dcnt(poisoned<int32_t>(size_t(H * C)));
    auto ref = poisoned<float>(cent.size());
    kernels::centroid_update_reference(keys.data(), labels.data(), cent.data(), ref.data(), H, n, C, d);
    centroid_update(dk.ptr, dl.ptr, dc.ptr, dout.ptr, H, n, C, d, dcnt.ptr);
    EXPECT_LT(relative_error(dout.get(), ref), 1e-5);
  }
}

TEST(CudaKernels, SelectIndices) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 2, n = 1000, C = 30, budget = 300;
  std::vector<int32_t> sizes(size_t(H * C)), offsets(size_t(H * C)), members(size_t(H * n)), ranked(size_t(H * C));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<int32_t> labels(static_cast<size_t>(n));
    for (auto& l : labels) l = int32_t(rng.uniform(0, C - 1));
    for (int32_t l : labels) ++sizes[h * C + l];
    for (int64_t c = 1; c < C; ++c) offsets[h * C + c] = offsets[h * C + c - 1] + sizes[h * C + c - 1];
    std::vector<int32_t> fill(offsets.begin() + h * C, offsets.begin() + (h + 1) * C);
    for (int64_t j = 0; j < n; ++j) members[h * n + fill[labels[j]]++] = int32_t(j);
    std::iota(ranked.begin() + h * C, ranked.begin() + (h + 1) * C, 0);
    std::shuffle(ranked.begin() + h * C, ranked.begin() + (h + 1) * C, rng.gen);
  }
  std::vector<int32_t> ref;
  for (int64_t h = 0; h < H; ++h) {
    std::vector<int32_t> row;
    for (int64_t r = 0; r < C && int64_t(row.size()) < budget; ++r) {
      const int32_t c = ranked[h * C + r];
      for (int32_t i = 0; i < sizes[h * C + c] && int64_t(row.size()) < budget; ++i)
        row.push_back(members[h * n + offsets[h * C + c] + i]);
    }
    ref.insert(ref.end(), row.begin(), row.end());
  }
  DeviceBuffer<int32_t> dr(ranked), ds(sizes), doff(offsets), dm(members),
      out(poisoned<int32_t>(size_t(H * budget)));
  select_indices(dr.ptr, ds.ptr, doff.ptr, dm.ptr, out.ptr, H, C, n, budget);
  EXPECT_EQ(out.get(), ref);
}

}  // namespace
}  // namespace kvb::cuda
