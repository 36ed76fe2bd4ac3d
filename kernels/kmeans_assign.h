// ClusterKV (https://arxiv.org/abs/2412.03213) clustering steps, batched over KV heads, fp32:
// cosine assignment of keys to centroids and the centroid update (mean of the raw keys).
#pragma once
#include <cstdint>

namespace kvb::kernels {

// labels[h, j] = argmax_c cos(keys[h, j], centroids[h, c]) (ties: lowest c).
//   keys: [H, n, d], centroids: [H, C, d], labels: [H, n]
void cosine_assign(const float* keys, const float* centroids, int32_t* labels, int64_t H,
                   int64_t n, int64_t C, int64_t d);

// out[h, c] = mean of keys[h, j] with labels[h, j] == c; old[h, c] when the cluster is empty.
// out may alias old.  keys: [H, n, d], labels: [H, n], old, out: [H, C, d],
// counts (optional, nullptr: not written): [H, C] cluster sizes.
void centroid_update(const float* keys, const int32_t* labels, const float* old, float* out,
                     int64_t H, int64_t n, int64_t C, int64_t d, int64_t* counts = nullptr);

}  // namespace kvb::kernels
