// CUDA kernels vs the CPU reference implementations: on a GPU (kvbench_gpu_tests, label "gpu",
// built with -DKVBENCH_CUDA=ON; "skipped: no GPU" where no device exists) and on the CPU
// through the CUDA emulation (kvbench_cuda_emulation_tests, tests/cuda_emulation/README.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/cuda/device_buffer.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::cuda {
namespace {

using test::KernelRng;
using test::poisoned;
using test::relative_error;

TEST(CudaKernels, QuestPageScores) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  // {P, d, extra}: the vector path (rows of 2 to 32 16-byte vectors: d = 8, 64, 128 fp32),
  // pages not a multiple of a block's 8 warps or of its pages; the scalar path for rows it
  // cannot take: head dims of 4 lanes' channels (d = 20: 5 vectors), of part of a warp and of a
  // warp plus a few, d = 256 (64 vectors), and d = 128 with heads an odd number of floats
  // apart (not 16-byte aligned). Heads `stride` = (P + 3) * d + extra floats apart (a narrowed
  // buffer).
  const std::vector<std::vector<int64_t>> shapes = {
      {500, 128, 0}, {37, 64, 0}, {1000, 8, 0}, {9, 20, 0}, {1, 37, 0}, {70, 256, 0}, {300, 128, 1}};
  for (const std::vector<int64_t>& shape : shapes) {
    const int64_t P = shape[0], d = shape[1];
    for (const bool sum_group : {false, true}) {
      SCOPED_TRACE("P " + std::to_string(P) + ", d " + std::to_string(d) + ", head stride + " +
                   std::to_string(shape[2]) + ", summed " + std::to_string(sum_group));
      const int64_t H = 8, g = 4, stride = (P + 3) * d + shape[2];
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

// quest_page_scores with a fold: the summaries after the fold are the rule's (the last page
// widened by the key read from the pool at its row, or set to it when fresh; NaNs win; other
// pages untouched) and the scores are those of the folded summaries. fp32 rows of 16-byte
// vectors (d = 128: the fold in the vector kernel's launch) and of 20 floats (the scalar path:
// a fold launch first); keys in a pool of 50 rows, heads' rows out of order (stride 2).
TEST(CudaKernels, QuestPageScoresFoldTheStepsKeyFirst) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  for (const int64_t d : {int64_t(128), int64_t(20)})
    for (const bool fresh : {false, true}) {
      SCOPED_TRACE("d " + std::to_string(d) + (fresh ? ", fresh page" : ", widened page"));
      const int64_t H = 8, g = 4, P = 70, stride = (P + 3) * d, page = P - 1, R = 50;
      auto q = rng.normal(size_t(H * g * d)), a = rng.normal(size_t(H * stride)),
           b = rng.normal(size_t(H * stride)), pool = rng.normal(size_t(R * d));
      std::vector<float> lo(a.size()), hi(a.size());
      for (size_t i = 0; i < a.size(); ++i)
        lo[i] = std::min(a[i], b[i]), hi[i] = std::max(a[i], b[i]);
      lo[size_t(page * d + 3)] = NAN;   // head 0: an old NaN stays
      pool[size_t(7 * d + 5)] = NAN;    // head 1's key (row 7): its NaN goes in
      std::vector<int64_t> rows(size_t(2 * H), -1);  // head h's row at 2h
      for (int64_t h = 0; h < H; ++h) rows[size_t(2 * h)] = (h * 5 + 2) % R;
      std::vector<float> want_lo = lo, want_hi = hi;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < d; ++c) {
          const size_t at = size_t(h * stride + page * d + c);
          const float key = pool[size_t(rows[size_t(2 * h)] * d + c)], x = lo[at], y = hi[at];
          want_lo[at] = fresh ? key : std::isnan(x) ? x : std::isnan(key) ? key : std::min(x, key);
          want_hi[at] = fresh ? key : std::isnan(y) ? y : std::isnan(key) ? key : std::max(y, key);
        }
      auto ref = poisoned<float>(size_t(H * g * P));
      kernels::quest_page_scores_reference(q.data(), want_lo.data(), want_hi.data(), ref.data(), H,
                                           g, P, d, stride, /*sum_group=*/false);
      DeviceBuffer<float> dq(q), dlo(lo), dhi(hi), dpool(pool), out(poisoned<float>(ref.size()));
      DeviceBuffer<int64_t> drows(rows);
      const QuestFold fold{dpool.ptr, drows.ptr, 2, page, fresh};
      quest_page_scores(dq.ptr, kernels::KvElement::kF32, dlo.ptr, dhi.ptr,
                        kernels::KvElement::kF32, out.ptr, H, g, P, d, stride, false, nullptr,
                        &fold);
      // The scores but where a NaN sits in the page (the kernel's fmaxf and the reference
      // part there; heads 0 and 1's last page): those of the folded summaries.
      const std::vector<float> got = out.get();
      std::vector<float> finite_got, finite_ref;
      for (size_t i = 0; i < ref.size(); ++i)
        if (!std::isnan(ref[i]) && !(i / size_t(g * P) < 2 && int64_t(i % size_t(P)) == page))
          finite_got.push_back(got[i]), finite_ref.push_back(ref[i]);
      EXPECT_EQ(finite_got.size(), ref.size() - 2 * size_t(g));
      EXPECT_LT(relative_error(finite_got, finite_ref), 1e-5);
      for (const auto& [buffer, want] : {std::pair(dlo.get(), want_lo), std::pair(dhi.get(), want_hi)})
        for (size_t i = 0; i < want.size(); ++i) {
          if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(buffer[i])) << i;
          } else {
            EXPECT_EQ(buffer[i], want[i]) << i;
          }
        }
    }
}

// quest_fold_key against the rule written out here: the last page's minimum and maximum
// widened by k (a NaN on either side wins), or both set to k on a fresh page; every other
// element of the [H, cap, d] summaries untouched. fp32 and bf16 summaries, values that bf16
// holds exactly (so both types give the same numbers), NaNs in k and in the old summaries.
template <typename T>
void check_quest_fold_key(kernels::KvElement type, KernelRng& rng) {
  const int64_t H = 8, cap = 5, d = 20, stride = cap * d;
  auto exact = [&](size_t n) {  // bf16-representable normals, a few NaNs
    std::vector<float> v = rng.normal(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = i % 37 == 5 ? NAN : kernels::bf16_to_float(kernels::float_to_bf16(v[i]));
    return v;
  };
  auto as_t = [](const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::narrow_to<T>(v[i]);
    return out;
  };
  for (const bool fresh : {false, true}) {
    SCOPED_TRACE(std::string(type == kernels::KvElement::kF32 ? "f32" : "bf16") +
                 (fresh ? ", fresh page" : ", widened page"));
    const int64_t page = 3;
    const std::vector<float> lo = exact(size_t(H * stride)), hi = exact(size_t(H * stride)),
                             k = exact(size_t(H * d));
    std::vector<float> want_lo = lo, want_hi = hi;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < d; ++c) {
        const size_t at = size_t(h * stride + page * d + c);
        const float key = k[size_t(h * d + c)], a = lo[at], b = hi[at];
        want_lo[at] = fresh ? key : std::isnan(a) ? a : std::isnan(key) ? key : std::min(a, key);
        want_hi[at] = fresh ? key : std::isnan(b) ? b : std::isnan(key) ? key : std::max(b, key);
      }
    DeviceBuffer<T> dlo(as_t(lo)), dhi(as_t(hi)), dk(as_t(k));
    quest_fold_key(dlo.ptr, dhi.ptr, type, dk.ptr, H, d, stride, page, fresh);
    for (const auto& [got, want] : {std::pair(dlo.get(), want_lo), std::pair(dhi.get(), want_hi)})
      for (size_t i = 0; i < want.size(); ++i) {
        const float g = kernels::widen(got[i]);
        ASSERT_TRUE(std::isnan(want[i]) ? std::isnan(g) : g == want[i])
            << "element " << i << ": " << g << ", wanted " << want[i];
      }
  }
}

TEST(CudaKernels, QuestFoldKeyWidensOrOpensThePage) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  check_quest_fold_key<float>(kernels::KvElement::kF32, rng);
  check_quest_fold_key<kernels::bf16>(kernels::KvElement::kBF16, rng);
}

TEST(CudaKernels, PqScores) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  // n over a block's 2048 tokens; code rows wider than n (an index's leading columns).
  // {m, K, s}: centroids staged in shared memory (PQCache's default on Llama, d = 128: m = 2,
  // K = 64, s = 64; and a small one); beyond 48 KiB, read from global memory (K = 256).
  const std::vector<std::vector<int64_t>> shapes = {{8, 64, 16}, {2, 64, 64}, {2, 256, 64}};
  for (const std::vector<int64_t>& shape : shapes) {
    const int64_t m = shape[0], K = shape[1], s = shape[2];
    SCOPED_TRACE("m " + std::to_string(m) + ", K " + std::to_string(K) + ", s " + std::to_string(s));
    const int64_t H = 4, g = 4, n = 5000, row = n + 33;
    auto q = rng.normal(size_t(H * g * m * s)), cent = rng.normal(size_t(H * m * K * s));
    std::vector<uint8_t> codes(size_t(H * m * row));
    for (auto& c : codes) c = uint8_t(rng.uniform(0, K - 1));
    auto ref = poisoned<float>(size_t(H * g * n));
    kernels::pq_scores_reference(q.data(), cent.data(), codes.data(), ref.data(), H, g, m, K, s,
                                 n, row);
    DeviceBuffer<float> dq(q), dc(cent), out(poisoned<float>(ref.size()));
    DeviceBuffer<uint8_t> dcodes(codes);
    pq_scores(dq.ptr, kernels::KvElement::kF32, dc.ptr, dcodes.ptr, out.ptr, H, g, m, K, s, n, row);
    EXPECT_LT(relative_error(out.get(), ref), 1e-5);
  }
}

// The tensor-core assignment against a host walk of its rule: per key, the products summed in
// fp32 in channel order, each rounded to the keys' type, the largest taken, ties to the lowest
// id, the first NaN above all. Keys and centroids hold bf16 values (exact in f16 too, at these
// magnitudes). A GPU's tensor cores sum in another order, so a label may differ where the two
// rounded similarities are within one unit in the last place; exactly: where centroid 20
// repeats centroid 7 (a tie at every key nearest to them, whatever the order: the lower id)
// and for key 5 of each head, NaN (label 0). C = 1: every key gets label 0, those pointing
// away from the centroid too. n and C not multiples of a block's 128 keys or a tile's 32.
template <typename T>
void check_cosine_assign(kernels::KvElement type, int64_t d, int64_t C, KernelRng& rng) {
  const int64_t H = 2, n = 300;
  auto exact = [&](size_t count) {
    std::vector<float> v = rng.normal(count);
    for (float& x : v) x = kernels::bf16_to_float(kernels::float_to_bf16(x * 0.25f));
    return v;
  };
  std::vector<float> keys = exact(size_t(H * n * d)), cent = exact(size_t(H * C * d));
  for (int64_t h = 0; h < H; ++h) {
    if (C > 20) std::copy_n(cent.begin() + (h * C + 7) * d, d, cent.begin() + (h * C + 20) * d);
    keys[size_t((h * n + 5) * d)] = NAN;
  }
  // sims[h, j, c]: the rounded similarity
  std::vector<float> sims(size_t(H * n * C));
  std::vector<int64_t> want(size_t(H * n));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < n; ++j) {
      float best = 0.f;
      int64_t at = -1;
      for (int64_t c = 0; c < C; ++c) {
        float sum = 0.f;
        for (int64_t x = 0; x < d; ++x)
          sum += keys[size_t((h * n + j) * d + x)] * cent[size_t((h * C + c) * d + x)];
        const float v = kernels::widen(kernels::narrow_to<T>(sum));
        sims[size_t((h * n + j) * C + c)] = v;
        const bool first_nan = std::isnan(v) && (at < 0 || !std::isnan(best));
        if (at < 0 || first_nan || (!std::isnan(best) && !std::isnan(v) && v > best)) best = v, at = c;
      }
      want[size_t(h * n + j)] = at;
    }
  auto as_t = [](const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::narrow_to<T>(v[i]);
    return out;
  };
  DeviceBuffer<T> dk(as_t(keys)), dc(as_t(cent));
  DeviceBuffer<int64_t> labels(std::vector<int64_t>(size_t(H * n), -7));
  cosine_assign(dk.ptr, dc.ptr, type, labels.ptr, H, n, C, d);
  const std::vector<int64_t> got = labels.get();
  int ties = 0, near = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool strict = C == 1 || want[i] == 7 || i % size_t(n) == 5;
    ties += want[i] == 7 && C > 20;
    if (got[i] == want[i]) continue;
    ASSERT_FALSE(strict) << "head " << i / size_t(n) << ", key " << i % size_t(n) << ": label "
                         << got[i] << ", not " << want[i];
    ASSERT_GE(got[i], 0);
    ASSERT_LT(got[i], C);
    const float a = sims[i * size_t(C) + size_t(want[i])], b = sims[i * size_t(C) + size_t(got[i])];
    // one unit in the last place of the type at a's magnitude: 2^-7 (bf16) or 2^-10 (f16) of it
    const float ulp = std::ldexp(1.f, std::max(std::ilogb(a), -126) -
                                          (type == kernels::KvElement::kBF16 ? 7 : 10));
    EXPECT_LE(a - b, ulp) << "head " << i / size_t(n) << ", key " << i % size_t(n);
    ++near;
  }
  EXPECT_LE(near, int(want.size()) / 100);
  if (C > 20) {
    EXPECT_GT(ties, 0);  // the repeated centroid was some key's nearest
  }
  EXPECT_EQ(got[5], 0);
}

TEST(CudaKernels, CosineAssignOnTensorCoresRanksRoundedProducts) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  EXPECT_TRUE(cosine_assign_supported(131072, 128, 1638));
  EXPECT_FALSE(cosine_assign_supported(4096, 72, 40));   // not a multiple of 16
  EXPECT_FALSE(cosine_assign_supported(4096, 256, 40));  // over 128
  // a block's last row and a tile's end must stay within int
  EXPECT_TRUE(cosine_assign_supported(0x7fffffff - 128, 128, 0x7fffffff - 128));
  EXPECT_FALSE(cosine_assign_supported(0x7fffffff - 127, 128, 40));
  EXPECT_FALSE(cosine_assign_supported(4096, 128, 0x7fffffff - 127));
  for (const int64_t d : {int64_t(32), int64_t(128)})
    for (const int64_t C : {int64_t(45), int64_t(1)}) {
      SCOPED_TRACE("d " + std::to_string(d) + ", C " + std::to_string(C));
      check_cosine_assign<kernels::bf16>(kernels::KvElement::kBF16, d, C, rng);
      check_cosine_assign<kernels::f16>(kernels::KvElement::kF16, d, C, rng);
    }
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

// ClusterKV's rows against a host walk of the stable descending ranking: clusters of random
// sizes (one empty), scores with ties (small integers) and without, take counts from none to
// every member; cluster counts within one chunk of the block's walk (8192) and beyond, with
// entries beyond one chunk of its output pass (262 144). The cache's step table and hit count
// too.
TEST(CudaKernels, ClusterRows) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 3, sinks = 16, step = 40, oldest_hit = 39;
  for (const auto& shape : std::vector<std::pair<int64_t, int64_t>>{{30, 1000}, {9000, 300000}})
    for (const bool ties : {false, true})
      for (const int64_t taken : {int64_t(0), int64_t(1), int64_t(37), int64_t(1000), shape.second}) {
        const int64_t C = shape.first, N = shape.second;  // clusters, members
        SCOPED_TRACE("C " + std::to_string(C) + ", N " + std::to_string(N) + ", ties " +
                     std::to_string(ties) + ", taken " + std::to_string(taken));
        const int64_t recent = 7, n = sinks + N + recent, W = n + 5;
        std::vector<float> scores = rng.normal(size_t(H * C), 2.f);
        if (ties)
          for (float& x : scores) x = std::round(x);
        std::vector<int32_t> sizes(size_t(H * C)), starts(size_t(H * C)), members(size_t(H * N));
        std::vector<int64_t> last(size_t(H * W));
        for (int64_t h = 0; h < H; ++h) {
          std::vector<int32_t> labels(size_t(N), 0);
          for (auto& l : labels) l = int32_t(rng.uniform(0, C - 2));  // cluster C - 1 empty
          for (int32_t l : labels) ++sizes[h * C + l];
          for (int64_t c = 1; c < C; ++c)
            starts[h * C + c] = starts[h * C + c - 1] + sizes[h * C + c - 1];
          std::vector<int32_t> fill(starts.begin() + h * C, starts.begin() + (h + 1) * C);
          for (int64_t j = 0; j < N; ++j) members[h * N + fill[labels[j]]++] = int32_t(sinks + j);
          for (int64_t e = 0; e < W; ++e) last[h * W + e] = rng.uniform(-1, step - 1);
        }
        // The host's walk: clusters by descending score, ties by id; members in cluster order.
        std::vector<int64_t> want_rows, want_last = last;
        int64_t want_hits = 0;
        for (int64_t h = 0; h < H; ++h) {
          std::vector<int64_t> order(static_cast<size_t>(C));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return scores[h * C + a] > scores[h * C + b];
          });
          std::vector<int64_t> row;
          for (int64_t e = 0; e < sinks; ++e) row.push_back(e);
          int64_t left = taken;
          for (int64_t c : order)
            for (int64_t i = 0; i < sizes[h * C + c] && left > 0; ++i, --left) {
              const int64_t e = members[h * N + starts[h * C + c] + i];
              row.push_back(e);
              want_hits += last[h * W + e] >= oldest_hit ? 1 : 0;
              want_last[h * W + e] = step;
            }
          for (int64_t e = n - recent; e < n; ++e) row.push_back(e);
          std::sort(row.begin(), row.end());
          want_rows.insert(want_rows.end(), row.begin(), row.end());
        }
        DeviceBuffer<float> d_scores(scores);
        DeviceBuffer<int32_t> d_sizes(sizes), d_starts(starts), d_members(members);
        DeviceBuffer<int64_t> d_last(last), d_hits(std::vector<int64_t>{5}),
            out(poisoned<int64_t>(want_rows.size()));
        ASSERT_TRUE(cluster_rows_fit(C, n));
        cluster_rows(d_scores.ptr, d_sizes.ptr, d_starts.ptr, d_members.ptr, H, C, N, taken, sinks,
                     n - recent, n, d_last.ptr, W, step, oldest_hit, d_hits.ptr, out.ptr);
        EXPECT_EQ(out.get(), want_rows);
        EXPECT_EQ(d_last.get(), want_last);
        EXPECT_EQ(d_hits.get()[0], 5 + want_hits);  // added to what the counter held
      }
}

}  // namespace
}  // namespace kvb::cuda
