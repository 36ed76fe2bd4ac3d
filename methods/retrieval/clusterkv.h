// ClusterKV (Liu et al., https://arxiv.org/abs/2412.03213): the parts a test can check on their
// own: batched cosine K-means over the KV heads of a layer, the cluster metadata of Fig. 8, and
// the selection of clusters by q.centroid.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvb {

// The K-means steps, cosine_assign and cluster_means, are in engine/kernel_adapter.h
// (ATen, or the CUDA kernels on a GPU).

struct KMeansResult {
  at::Tensor centroids;  // [H, C, d] float32
  at::Tensor labels;     // [H, n] int64: cosine_assign(keys, centroids)
  int iterations = 0;    // centroid updates done
  bool converged = false;  // the last update left every head's assignment unchanged
};

// Batched over heads: initial centroids are the keys at C distinct random positions per head
// (std::mt19937_64 seeded with `seed`), then Lloyd steps (cosine assignment, mean update) until
// no head's assignment changes or `max_iterations` updates. keys: [H, n, d]; 1 <= C <= n.
// The assignments' products run in fp32 (the keys widened once), or with
// `products_in_keys_dtype` in the keys' own dtype (bf16 keys: tensor cores on a GPU); the means
// are fp32 either way. Without `stop_when_converged`: exactly max_iterations updates and no
// read of the device on the host (converged stays false), as ClusterKV's efficiency code
// clusters. The result is the same: once no assignment changes, the means and the assignment
// repeat themselves, bit for bit where the steps are deterministic: the CPU's (on a GPU the
// mean update adds with float atomics, in any order, so a later step may move a near-tie).
KMeansResult cosine_kmeans(const at::Tensor& keys, int64_t clusters, uint64_t seed,
                           int max_iterations, bool products_in_keys_dtype = false,
                           bool stop_when_converged = true);
// The same from given initial positions: init [H, C] int64 key positions on the keys' device
// (what kmeans_init_positions draws: C distinct ones per head, std::mt19937_64 seeded with
// `seed`, a partial shuffle; H * C of them, head by head).
std::vector<int64_t> kmeans_init_positions(int64_t H, int64_t n, int64_t clusters, uint64_t seed);
KMeansResult cosine_kmeans(const at::Tensor& keys, const at::Tensor& init, int max_iterations,
                           bool products_in_keys_dtype = false, bool stop_when_converged = true);

// The same from given initial centroids [H, C, d] (any dtype; kept in fp32).
KMeansResult cosine_kmeans_from(const at::Tensor& keys, const at::Tensor& centroids,
                                int max_iterations, bool products_in_keys_dtype = false,
                                bool stop_when_converged = true);

// Initial centroids [H, C, d] float32 for keys [H, n, d] as RAFT's K-means fit starts by
// default (ClusterKV's accuracy code: pylibraft's fit, cosine metric), per head: k-means||
// ("Scalable K-Means++", Bahmani et al. 2012) with oversampling factor 2: a random first key,
// then min(8, ceil(ln psi)) rounds, each taking every key x with probability
// 2 C d(x) / psi (d: cosine distance 1 - cos to the nearest candidate, psi their sum); more
// than C candidates are weighted by the keys nearest each, reduced to C by greedy k-means++
// (2 + ceil(ln C) trials a pick) and refined by weighted Euclidean Lloyd steps (at most 300,
// until the centroids move less than 1e-4, RAFT's defaults); fewer are topped up with random
// keys. Random draws from std::mt19937_64 seeded with `seed` (RAFT's own generators are not
// reproduced). Reads the device on the host. 1 <= C <= n.
at::Tensor kmeans_parallel_init(const at::Tensor& keys, int64_t clusters, uint64_t seed);

// The seed of the `batch`-th clustering (0 = the prompt's, then one per m decode tokens) of
// `layer` in a sequence run with `seed`.
uint64_t clusterkv_seed(uint64_t seed, int layer, int64_t batch);

// Fig. 8's metadata for labels [H, n] over C clusters, whose key i is the entry
// `index_offset + i`.
struct ClusterMetadata {
  at::Tensor sizes;           // [H, C] int64: members per cluster
  at::Tensor starts;          // [H, C] int64: exclusive prefix sums of sizes
  at::Tensor sorted_indices;  // [H, n] int64: entry indices sorted by label (stable)
};
ClusterMetadata cluster_metadata(const at::Tensor& labels, int64_t clusters, int64_t index_offset);

// ClusterKV's selection for every KV head at once, with tensor ops (no host round trip): the
// clusters ranked by descending score q.mu (a stable sort: ties to the lower id), their members
// taken in rank order until `take` entries, the last cluster trimmed (its first members in
// sorted order). scores: [H, C]; sizes, starts: [H, C]; sorted_indices: [H, N] (every head
// N members). Returns [H, min(take, N)] entry indices in selection order.
at::Tensor clusterkv_select(const at::Tensor& scores, const at::Tensor& sizes,
                            const at::Tensor& starts, const at::Tensor& sorted_indices,
                            int64_t take);

}  // namespace kvb
