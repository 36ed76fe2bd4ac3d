// CUDA kernels of the retrieval family, raw device pointers, fp32 (built with nvcc only when
// -DKVBENCH_CUDA=ON, into the static library kvbench_cuda). Each has the same semantics as the
// CPU kernel of the same name and is tested against kernels/reference/reference.h
// (tests/kernels/cuda/, label "gpu", skipped where no GPU exists).
// All pointers are device pointers; calls are asynchronous on `stream` (0: default stream).
#pragma once
#include <cstdint>

namespace kvb::cuda {

// Number of usable CUDA devices; 0 (never an error) without a driver or a GPU.
int device_count();

// Throws std::runtime_error naming `what` and CUDA's message when the last kernel launch of
// this thread failed (too much shared memory, a bad grid, no kernel image for this GPU's
// architecture: see CMAKE_CUDA_ARCHITECTURES). Launch errors only: errors inside a running
// kernel surface at the next synchronisation.
void check_launch(const char* what);

// ClusterKV (https://arxiv.org/abs/2412.03213, Section 4 "GPU kernels").
// Assignment: labels[h, j] = argmax_c cos(keys[h, j], centroids[h, c]).  keys [H, n, d],
// centroids [H, C, d], labels [H, n]. One thread per key, centroids of the head in shared memory
// in tiles.
void cosine_assign(const float* keys, const float* centroids, int32_t* labels, int64_t H,
                   int64_t n, int64_t C, int64_t d, void* stream = nullptr);
// Centroid update: one thread block per head; threads stride over the head's keys and add
// them into shared-memory sums [C, d] and counts [C] (atomics in shared memory), then write
// means (old centroid when a cluster is empty). Shared memory: C * (d + 1) * 4 bytes, so
// C * (d + 1) <= 12288 with the 48 KiB default; larger C falls back to global-memory atomics.
void centroid_update(const float* keys, const int32_t* labels, const float* old, float* out,
                     int64_t H, int64_t n, int64_t C, int64_t d, int32_t* counts,
                     void* stream = nullptr);
// Selection indexing: given the clusters of each head in rank order (ranked [H, C]), the
// cluster sizes [H, C], their exclusive prefix sums offsets [H, C] and the keys sorted by
// cluster members [H, n], writes the first `budget` keys of the ranked clusters to
// selected [H, budget] (the last cluster truncated). One block per head; threads stride over
// the output slots; a block-wide scan of the ranked sizes finds each slot's cluster. C <= 2048
// (ClusterKV's L/80 clusters: up to 160k tokens); slots past the last member get -1.
void select_indices(const int32_t* ranked, const int32_t* sizes, const int32_t* offsets,
                    const int32_t* members, int32_t* selected, int64_t H, int64_t C, int64_t n,
                    int64_t budget, void* stream = nullptr);

// Quest page scoring (https://arxiv.org/abs/2406.10774): q [H, g, d], kmin/kmax [H, P, d]
// (heads head_stride apart), scores [H, g, P] or [H, P] when sum_group.
void quest_page_scores(const float* q, const float* kmin, const float* kmax, float* scores,
                       int64_t H, int64_t g, int64_t P, int64_t d, int64_t head_stride,
                       bool sum_group, void* stream = nullptr);

// PQCache scoring (https://arxiv.org/abs/2407.12820): q [H, g, m*s], centroids [H, m, K, s],
// codes [H, m, n] uint8, scores [H, g, n]. One block per (head, token tile); the lookup table
// [g, m, K] is built in shared memory.
void pq_scores(const float* q, const float* centroids, const uint8_t* codes, float* scores,
               int64_t H, int64_t g, int64_t m, int64_t K, int64_t s, int64_t n,
               void* stream = nullptr);

}  // namespace kvb::cuda
