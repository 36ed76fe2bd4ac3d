// The CUDA kernels the torch glue's tests cover on a GPU only, here through their raw-pointer
// entry points (kvbench_cuda.h) against host computations, so that they also run on the CPU
// through the CUDA emulation (tests/cuda_emulation/README.md): PQCache's selection and codes,
// Quest's page selection, the decode attention, RMSNorm, RoPE and the K/V row writes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/kvbench_cuda.h"
#include "kernels/pq_scoring.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/cuda/device_buffer.h"
#include "tests/kernels/kernel_test_util.h"

namespace kvb::cuda {
namespace {

using kernels::bf16;
using kernels::KvElement;
using test::KernelRng;
using test::poisoned;
using test::relative_error;

std::string shape_trace(const std::vector<std::pair<const char*, int64_t>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields)
    out += std::string(out.empty() ? "" : ", ") + name + " " + std::to_string(value);
  return out;
}

// ---- PQCache ---------------------------------------------------------------------------------

// PQCache's selection by code combination against the per-token ranking in double
// (kernels/reference), up to near ties; equal codes taken earliest first; the sliced launches
// (2 to 16 slices) give the one-block launch's entries exactly. m = 2, K = 64: PQCache's
// default (4096 combinations); codes over 3 values: most tokens tie with others.
TEST(CudaKernels, PqTopKMatchesThePerTokenRanking) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  struct Shape {
    int64_t m, K, s, n, values;
  };
  for (const Shape& c : {Shape{2, 64, 16, 12000, 64}, Shape{2, 64, 16, 3000, 3},
                         Shape{1, 256, 8, 700, 256}, Shape{3, 16, 4, 5000, 16}}) {
    const int64_t H = 3, g = 4, lead = 4, trailing = 5, row = c.n + 17;
    const int64_t P = kernels::pq_combinations(c.m, c.K);
    auto q = rng.normal(size_t(H * g * c.m * c.s)), cent = rng.normal(size_t(H * c.m * c.K * c.s));
    std::vector<uint8_t> codes(size_t(H * c.m * row));
    for (auto& x : codes) x = uint8_t(rng.uniform(0, c.values - 1));
    const std::vector<int64_t> codes_long(codes.begin(), codes.end());
    const float scale = 1.f / std::sqrt(float(c.m * c.s));
    DeviceBuffer<float> dq(q), dc(cent);
    DeviceBuffer<uint8_t> dcodes(codes);
    for (const int64_t k : {int64_t(0), int64_t(1), int64_t(37), c.n / 3, c.n}) {
      SCOPED_TRACE(shape_trace({{"m", c.m}, {"K", c.K}, {"n", c.n}, {"values", c.values}, {"k", k}}));
      const int64_t width = lead + k + trailing;
      std::vector<int64_t> want(size_t(H * width));
      std::vector<double> weights(size_t(H * c.n));
      kernels::pq_top_k_reference(q.data(), cent.data(), codes.data(), H, g, c.m, c.K, c.s, c.n,
                                  row, scale, k, lead, trailing, want.data(), weights.data());
      std::vector<int64_t> one_block;
      for (const int64_t slices : {1, 2, 11, 16}) {
        SCOPED_TRACE("slices " + std::to_string(slices));
        DeviceBuffer<int64_t> out(poisoned<int64_t>(want.size()));
        DeviceBuffer<int32_t> partial(poisoned<int32_t>(size_t(H * slices * P)));
        pq_top_k(dq.ptr, KvElement::kF32, dc.ptr, dcodes.ptr, H, g, c.m, c.K, c.s, c.n, row, scale,
                 k, lead, trailing, out.ptr, slices, partial.ptr);
        const std::vector<int64_t> got = out.get();
        if (slices == 1) {
          EXPECT_EQ(test::top_k_difference(got, want, weights, H, c.n, lead, k, trailing, 1e-5), "");
          EXPECT_EQ(test::equal_codes_taken_earliest(got, codes_long, H, c.m, c.n, row, lead, k,
                                                     trailing), "");
          one_block = got;
        } else {
          EXPECT_EQ(got, one_block);
        }
      }
    }
  }
}

// PQCache's codes of new keys: each sub-vector's nearest centroid by squared distance, ties to
// the lower id (a centroid repeated), keys read in place from a pool through a row list, codes
// written at a column of a wider table; fp32 and bf16 pools.
TEST(CudaKernels, PqEncodeWritesEachKeysNearestCentroid) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t H = 2, m = 2, K = 64, s = 8, d = m * s, n = 9, pool_rows = 40, column = 5;
  const int64_t codes_row = 20, codes_head = m * codes_row;
  auto cent = rng.normal(size_t(H * m * K * s));
  for (int64_t h = 0; h < H; ++h)  // centroid 7 repeats centroid 3: ties go to 3
    for (int64_t u = 0; u < m; ++u)
      std::copy_n(cent.begin() + ((h * m + u) * K + 3) * s, s,
                  cent.begin() + ((h * m + u) * K + 7) * s);
  std::vector<int64_t> rows(size_t(H * n));
  for (auto& r : rows) r = rng.uniform(0, pool_rows - 1);
  for (const KvElement type : {KvElement::kF32, KvElement::kBF16}) {
    SCOPED_TRACE(type == KvElement::kF32 ? "f32" : "bf16");
    std::vector<float> keys = rng.normal(size_t(pool_rows * d));
    // Some keys sit exactly on centroid 3 of head 0 (so on 7 too).
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t u = 0; u < m; ++u)
        std::copy_n(cent.begin() + (u * K + 3) * s, s, keys.begin() + rows[size_t(j)] * d + u * s);
    std::vector<bf16> keys16(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      keys16[i] = kernels::float_to_bf16(keys[i]);
      if (type == KvElement::kBF16) keys[i] = kernels::bf16_to_float(keys16[i]);
    }
    std::vector<uint8_t> want(size_t(H * codes_head), 200), got_init = want;
    auto distance = [&](int64_t h, int64_t j, int64_t u, int64_t c) {
      double sum = 0;
      for (int64_t x = 0; x < s; ++x) {
        const double diff = double(keys[size_t(rows[size_t(h * n + j)] * d + u * s + x)]) -
                            cent[size_t(((h * m + u) * K + c) * s + x)];
        sum += diff * diff;
      }
      return sum;
    };
    for (int64_t h = 0; h < H; ++h)
      for (int64_t u = 0; u < m; ++u)
        for (int64_t j = 0; j < n; ++j) {
          int64_t best = 0;
          for (int64_t c = 1; c < K; ++c)
            if (distance(h, j, u, c) < distance(h, j, u, best)) best = c;
          want[size_t(h * codes_head + u * codes_row + column + j)] = uint8_t(best);
        }
    DeviceBuffer<float> dcent(cent), dkeys(keys);
    DeviceBuffer<bf16> dkeys16(keys16);
    DeviceBuffer<int64_t> drows(rows);
    DeviceBuffer<uint8_t> codes(got_init);
    pq_encode(type == KvElement::kF32 ? static_cast<const void*>(dkeys.ptr) : dkeys16.ptr, type,
              drows.ptr, n, dcent.ptr, codes.ptr, codes_head, codes_row, column, H, n, m, K, s);
    const std::vector<uint8_t> got = codes.get();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) continue;
      // A different code only where the two distances tie to fp32 rounding.
      const int64_t h = int64_t(i) / codes_head, u = int64_t(i) % codes_head / codes_row,
                    j = int64_t(i) % codes_row - column;
      ASSERT_TRUE(j >= 0 && j < n) << "code written outside the new tokens' columns at " << i;
      EXPECT_NEAR(distance(h, j, u, got[i]), distance(h, j, u, want[i]),
                  1e-5 * distance(h, j, u, want[i]))
          << "head " << h << ", sub-space " << u << ", token " << j;
    }
    for (int64_t j = 0; j < 3; ++j)  // head 0's keys on centroid 3 (= 7): the lower id
      for (int64_t u = 0; u < m; ++u)
        EXPECT_EQ(got[size_t(u * codes_row + column + j)], 3);
  }
}

// ---- Quest's selection -----------------------------------------------------------------------

// The entries top_pages lays out for each row, from a stable descending sort on the host.
std::vector<int64_t> top_pages_on_host(const std::vector<float>& scores, int64_t stride,
                                       int64_t rows, int64_t pages, int64_t whole, int64_t part,
                                       int64_t page_size, int64_t n, int64_t lead) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return scores[size_t(r * stride + a)] > scores[size_t(r * stride + b)];
    });
    std::vector<int64_t> entries;
    for (int64_t i = 0; i < whole + (part > 0); ++i)
      for (int64_t e = 0; e < (i < whole ? page_size : part); ++e)
        entries.push_back(lead + order[size_t(i)] * page_size + e);
    for (int64_t e = pages * page_size; e < n; ++e) entries.push_back(lead + e);
    std::sort(entries.begin(), entries.end());
    for (int64_t e = 0; e < lead; ++e) out.push_back(e);
    out.insert(out.end(), entries.begin(), entries.end());
  }
  return out;
}

// Quest's page selection (and PQCache's former top-k: pages of one entry), one block per row
// and in chunks of pages, against the host's stable sort: scores with and without ties (small
// integers, zeros of both signs), whole pages and a trimmed one, leading and trailing entries.
TEST(CudaKernels, TopPagesOneBlockAndInChunksMatchAStableSort) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t rows = 3, lead = 2;
  for (const int64_t pages : {3, 500, 5000})
    for (const int64_t page_size : {1, 16})
      for (const bool ties : {false, true}) {
        const int64_t stride = pages + 5, trailing = page_size == 1 ? 0 : 11;
        const int64_t n = pages * page_size + trailing;
        std::vector<float> scores = rng.normal(size_t(rows * stride), 2.f);
        if (ties)
          for (float& x : scores) x = std::round(x);  // -0 for small negatives
        DeviceBuffer<float> dscores(scores);
        for (const int64_t whole : {int64_t(0), int64_t(1), pages / 4, pages - 1})
          for (const int64_t part : {int64_t(0), page_size / 2}) {
            if (whole + (part > 0) > pages) continue;
            SCOPED_TRACE(shape_trace({{"pages", pages}, {"page_size", page_size}, {"ties", ties},
                                      {"whole", whole}, {"part", part}}));
            const std::vector<int64_t> want = top_pages_on_host(scores, stride, rows, pages, whole,
                                                                part, page_size, n, lead);
            for (const int64_t chunk : {0, 64, 4096, 8192}) {  // 8192: two passes a chunk
              SCOPED_TRACE("chunk " + std::to_string(chunk));
              const int64_t taken = whole + (part > 0);
              const int64_t candidates =
                  taken > 0 && chunk > 0 ? top_pages_candidates(pages, taken, chunk) : 1;
              DeviceBuffer<int64_t> out(poisoned<int64_t>(want.size()));
              DeviceBuffer<float> cand_scores(poisoned<float>(size_t(rows * candidates)));
              DeviceBuffer<int32_t> cand_pages(poisoned<int32_t>(size_t(rows * candidates)));
              top_pages(dscores.ptr, stride, out.ptr, rows, pages, whole, part, page_size, n, lead,
                        chunk, cand_scores.ptr, cand_pages.ptr);
              EXPECT_EQ(out.get(), want);
            }
          }
      }
}

// Pages of one entry under a limit read on the device (InfiniGen's fetch): each row takes its
// best min(whole, limit - trailing) items, then the trailing entries, then repeats the last
// one up to the width; one block per row and in chunks; limits from below the trailing entries
// to past the width.
TEST(CudaKernels, TopPagesUnderADeviceLimit) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t rows = 3;
  for (const int64_t pages : {500, 5000})
    for (const int64_t trailing : {1, 3}) {
      const int64_t n = pages + trailing, stride = pages + 2;
      std::vector<float> scores = rng.normal(size_t(rows * stride));
      for (size_t i = 0; i < scores.size(); i += 7) scores[i] = 0.5f;  // some ties
      DeviceBuffer<float> dscores(scores);
      for (const int64_t whole : {int64_t(0), pages / 4})
        for (const int64_t limit : {int64_t(1), trailing + 3, whole + trailing, int64_t(1) << 40}) {
          const int64_t width = whole + trailing;
          const int64_t took = std::max<int64_t>(0, std::min(whole, limit - trailing));
          std::vector<int64_t> want;
          const std::vector<int64_t> some =
              top_pages_on_host(scores, stride, rows, pages, took, 0, 1, n, 0);  // [rows, took + trailing]
          for (int64_t r = 0; r < rows; ++r) {
            const auto first = some.begin() + r * (took + trailing);
            want.insert(want.end(), first, first + took + trailing);
            want.insert(want.end(), size_t(width - took - trailing), n - 1);
          }
          for (const int64_t chunk : {0, 64}) {
            SCOPED_TRACE(shape_trace({{"pages", pages}, {"trailing", trailing}, {"whole", whole},
                                      {"limit", limit}, {"chunk", chunk}}));
            const int64_t candidates =
                whole > 0 && chunk > 0 ? top_pages_candidates(pages, whole, chunk) : 1;
            DeviceBuffer<int64_t> out(poisoned<int64_t>(want.size())), dlimit({limit});
            DeviceBuffer<float> cand_scores(poisoned<float>(size_t(rows * candidates)));
            DeviceBuffer<int32_t> cand_pages(poisoned<int32_t>(size_t(rows * candidates)));
            top_pages(dscores.ptr, stride, out.ptr, rows, pages, whole, 0, 1, n, 0, chunk,
                      cand_scores.ptr, cand_pages.ptr, nullptr, dlimit.ptr);
            EXPECT_EQ(out.get(), want);
          }
        }
    }
}

// ---- decode attention ------------------------------------------------------------------------

template <class T>
T from_float(float x);
template <>
float from_float<float>(float x) {
  return x;
}
template <>
bf16 from_float<bf16>(float x) {
  return kernels::float_to_bf16(x);
}
template <>
kernels::f16 from_float<kernels::f16>(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  kernels::f16 out;
  std::memcpy(&out.bits, &h, 2);
  return out;
}
float to_float(float x) { return x; }
float to_float(bf16 x) { return kernels::bf16_to_float(x); }
float to_float(kernels::f16 x) { return kernels::f16_to_float(x); }

// Values of type T (rounded from normals), and their fp32 values.
template <class T>
std::vector<T> rounded(KernelRng& rng, size_t n, std::vector<float>& exact) {
  exact = rng.normal(n);
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = from_float<T>(exact[i]);
    exact[i] = to_float(out[i]);
  }
  return out;
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T& x : v) out.push_back(to_float(x));
  return out;
}
// x rounded to T and back.
template <class T>
float rounded_to(float x) {
  return to_float(from_float<T>(x));
}

// The paged sparse decode attention against the reference over the same (rounded) values:
// ragged units (none, one, a few, thousands of rows), rows listed packed or as rows of a wider
// table (row_list_stride), one split and the count the kernel asks for, the probabilities;
// fp32, bf16 and fp16 pools; in 16 bits at d = 128 the tensor cores' pass (the default) and
// the CUDA cores' (asked for), elsewhere the vector path (d = 128) and the scalar one (d = 40).
template <class T>
void check_decode_attention(KvElement type) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const double tol = type == KvElement::kF32 ? 2e-5 : 1e-2;  // out rounded to the q's type
  for (const int64_t g : {1, 3, 4, 8})
    for (const int64_t d : {128, 40}) {
      ASSERT_TRUE(decode_attention_supported(g, d));
      const int64_t pool_rows = 5000, units = 5;
      const std::vector<int64_t> lengths = {0, 1, 7, 3000, 200};
      std::vector<float> k_exact, v_exact;
      const std::vector<T> k = rounded<T>(rng, size_t(pool_rows * d), k_exact);
      const std::vector<T> v = rounded<T>(rng, size_t(pool_rows * d), v_exact);
      std::vector<float> q_exact;
      const std::vector<T> q = rounded<T>(rng, size_t(units * g * d), q_exact);
      std::vector<int64_t> indptr = {0}, rows;
      const int64_t table_width = 3100;
      std::vector<int64_t> table(size_t(units * table_width), -1);
      for (int64_t u = 0; u < units; ++u) {
        for (int64_t j = 0; j < lengths[size_t(u)]; ++j) {
          const int64_t r = rng.uniform(0, pool_rows - 1);
          rows.push_back(r);
          table[size_t(u * table_width + j)] = r;
        }
        indptr.push_back(int64_t(rows.size()));
      }
      const float scale = 1.f / std::sqrt(float(d));
      std::vector<float> want(size_t(units * g * d)), want_probs(size_t(g * rows.size()));
      kernels::sparse_decode_attention_reference(q_exact.data(), k_exact.data(), v_exact.data(),
                                                 indptr.data(), rows.data(), want.data(), units * g,
                                                 units, d, scale, want_probs.data());
      DeviceBuffer<T> dq(q), dk(k), dv(v);
      DeviceBuffer<int64_t> dindptr(indptr), drows(rows), dtable(table);
      const int64_t asked =
          decode_attention_splits(type, type, dk.ptr, dv.ptr, units, g, d, 3000);
      // The default runs on the tensor cores for 16-bit K/V with d = 128 and q of their type.
      const bool tensor_cores = type != KvElement::kF32 && d == 128;
      EXPECT_EQ(decode_attention_on_tensor_cores(type, type, dk.ptr, dv.ptr, d), tensor_cores);
      EXPECT_FALSE(decode_attention_on_tensor_cores(type, type, dk.ptr, dv.ptr, d,
                                                    DecodeKernel::kCudaCores));
      EXPECT_FALSE(decode_attention_on_tensor_cores(KvElement::kF32, type, dk.ptr, dv.ptr, d));
#ifndef KVBENCH_CUDA_EMULATION  // which holds one occupancy for every kernel
      // On a GPU the split count is the resident blocks of the kernel that will run: an fp32 q
      // on bf16/f16 pools gets the CUDA cores' count, and at Llama's g = 4 the tensor cores'
      // kernel (2 blocks an SM: 96 KiB of shared memory a block) fewer than the CUDA cores'
      // (3 blocks: 33 and 49 splits for 8 long units on an H200; at g = 8 they hold 2 blocks
      // too, 33 against 33 there).
      if (tensor_cores) {
        auto splits_for = [&](KvElement q_type, DecodeKernel kernel) {
          return decode_attention_splits(q_type, type, dk.ptr, dv.ptr, 8, g, d, int64_t(1) << 20,
                                         kernel);
        };
        const int64_t cuda_cores = splits_for(type, DecodeKernel::kCudaCores);
        if (g == 4) EXPECT_LT(splits_for(type, DecodeKernel::kTensorCores), cuda_cores);
        EXPECT_EQ(splits_for(KvElement::kF32, DecodeKernel::kTensorCores), cuda_cores);
      }
#endif
      for (const int64_t splits : {int64_t(1), asked})
        for (const bool in_table : {false, true}) {
          SCOPED_TRACE(shape_trace({{"g", g}, {"d", d}, {"splits", splits}, {"table", in_table}}));
          // One call into fresh poisoned buffers: its output widened to fp32, its probabilities.
          auto attend = [&](DecodeKernel kernel) {
            DeviceBuffer<T> out(std::vector<T>(want.size(), from_float<T>(NAN)));
            DeviceBuffer<float> probs(poisoned<float>(want_probs.size()));
            DeviceBuffer<float> work(
                poisoned<float>(size_t(decode_attention_workspace_floats(units, g, d, splits))));
            sparse_decode_attention(dq.ptr, type, dk.ptr, dv.ptr, type, dindptr.ptr,
                                    in_table ? dtable.ptr : drows.ptr, in_table ? table_width : 0,
                                    out.ptr, probs.ptr, units, g, d, scale, splits, work.ptr,
                                    nullptr, kernel);
            return std::make_pair(widened(out.get()), probs.get());
          };
          // The default, and where it runs on the tensor cores the CUDA cores' kernel too.
          std::vector<std::vector<float>> outs;
          for (const DecodeKernel kernel : {DecodeKernel::kTensorCores, DecodeKernel::kCudaCores}) {
            if (kernel == DecodeKernel::kCudaCores && !tensor_cores) break;
            SCOPED_TRACE(kernel == DecodeKernel::kTensorCores ? "default" : "CUDA cores");
            const auto [got, got_probs] = attend(kernel);
            EXPECT_LT(relative_error(got, want), tol);
            for (int64_t i = 0; i < g * d; ++i) EXPECT_EQ(got[size_t(i)], 0.f) << "empty unit";
            EXPECT_LT(relative_error(got_probs, want_probs), 1e-5);
            outs.push_back(got);
          }
          // Two kernels ran, not one twice: p rounded to T before p v moves some outputs.
          if (tensor_cores) EXPECT_NE(outs[0], outs[1]);
        }
    }
}

TEST(CudaKernels, DecodeAttentionRaggedUnitsInEveryDtype) {
  KVB_REQUIRE_GPU();
  {
    SCOPED_TRACE("f32");
    check_decode_attention<float>(KvElement::kF32);
  }
  {
    SCOPED_TRACE("bf16");
    check_decode_attention<bf16>(KvElement::kBF16);
  }
  {
    SCOPED_TRACE("f16");
    check_decode_attention<kernels::f16>(KvElement::kF16);
  }
}

// ---- the dense step's norms, RoPE and K/V writes ---------------------------------------------

// RMSNorm with and without the residual add, rows of T (a decode row of 4096 and an odd width):
// the sum bit for bit (one rounding of x + residual); out within `units` units in the last
// place of T (`mantissa_bits` after the point) of round(round(x * r) * w), r from a double sum
// of squares. The kernel's sum is fp32, so its r can differ in the last bit; where x * r sits
// on a rounding tie, round(x * r) then moves one unit, and its product with w rounds up to two
// units of the output away (seed 3292614799 found it at a bound relative to the value).
template <class T>
void check_rms_norm(KvElement type, int mantissa_bits, float units) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const float eps = 1e-5f;
  for (const int64_t dim : {4096, 77}) {
    const int64_t rows = 3;
    std::vector<float> x, res, w;
    const std::vector<T> x_t = rounded<T>(rng, size_t(rows * dim), x),
                         res_t = rounded<T>(rng, size_t(rows * dim), res),
                         w_t = rounded<T>(rng, size_t(dim), w);
    for (const bool with_residual : {false, true}) {
      SCOPED_TRACE(shape_trace({{"dim", dim}, {"residual", with_residual}}));
      std::vector<float> sum(x.size()), want(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        sum[i] = with_residual ? rounded_to<T>(x[i] + res[i]) : x[i];
      for (int64_t r = 0; r < rows; ++r) {
        double squares = 0;
        for (int64_t i = 0; i < dim; ++i)
          squares += double(sum[size_t(r * dim + i)]) * sum[size_t(r * dim + i)];
        const float inv = float(1.0 / std::sqrt(squares / double(dim) + eps));
        for (int64_t i = 0; i < dim; ++i)
          want[size_t(r * dim + i)] =
              rounded_to<T>(rounded_to<T>(sum[size_t(r * dim + i)] * inv) * w[size_t(i)]);
      }
      DeviceBuffer<T> dx(x_t), dres(res_t), dw(w_t),
          dsum(std::vector<T>(x.size(), from_float<T>(NAN))),
          dout(std::vector<T>(x.size(), from_float<T>(NAN)));
      if (with_residual)
        add_rms_norm(dx.ptr, dres.ptr, dw.ptr, dsum.ptr, dout.ptr, type, rows, dim, eps);
      else
        rms_norm(dx.ptr, dw.ptr, dout.ptr, type, rows, dim, eps);
      const std::vector<float> got = widened(dout.get());
      if (with_residual) {
        EXPECT_EQ(widened(dsum.get()), sum);
      }
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;  // inf would make its own unit
        const float larger = std::max(std::abs(got[i]), std::abs(want[i]));
        const float ulp = std::ldexp(1.f, std::max(std::ilogb(larger), -126) - mantissa_bits);
        ASSERT_LE(std::abs(got[i] - want[i]), units * ulp) << "element " << i;
      }
    }
  }
}

TEST(CudaKernels, RmsNormAndItsResidualAdd) {
  KVB_REQUIRE_GPU();
  {
    SCOPED_TRACE("f32");
    // 8 units: r from an fp32 sum of 4096 squares can be a few units off the double one's.
    check_rms_norm<float>(KvElement::kF32, 23, 8);
  }
  {
    SCOPED_TRACE("bf16");
    check_rms_norm<bf16>(KvElement::kBF16, 7, 2);
  }
}

// RoPE with rotate-half pairs, bit for bit: out = round(round(x * cos) + round(swap(x) * sin))
// over the first r channels (swap: the halves exchanged), the rest copied; rows of T.
template <class T>
void check_rope(KvElement type) {
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  const int64_t n = 3, L = 5;
  for (const int64_t d : {128, 40})
    for (const int64_t r : {d, d / 2}) {
      SCOPED_TRACE(shape_trace({{"d", d}, {"r", r}}));
      std::vector<float> x, cos, sin;
      const std::vector<T> x_t = rounded<T>(rng, size_t(n * L * d), x),
                           cos_t = rounded<T>(rng, size_t(L * r), cos),
                           sin_t = rounded<T>(rng, size_t(L * r), sin);
      std::vector<float> want(x.size());
      for (int64_t h = 0; h < n; ++h)
        for (int64_t p = 0; p < L; ++p)
          for (int64_t i = 0; i < d; ++i) {
            const float* row = x.data() + (h * L + p) * d;
            float& o = want[size_t((h * L + p) * d + i)];
            if (i >= r) {
              o = row[i];
              continue;
            }
            const float swapped = i < r / 2 ? row[i + r / 2] : row[i - r / 2];
            o = rounded_to<T>(rounded_to<T>(row[i] * cos[size_t(p * r + i)]) +
                              rounded_to<T>(swapped * sin[size_t(p * r + i)]));
          }
      DeviceBuffer<T> dx(x_t), dc(cos_t), ds(sin_t),
          out(std::vector<T>(x.size(), from_float<T>(NAN)));
      rope_rotate_half(dx.ptr, dc.ptr, ds.ptr, out.ptr, type, n, L, d, r);
      EXPECT_EQ(widened(out.get()), want);
    }
}

TEST(CudaKernels, RopeRotateHalfBitForBit) {
  KVB_REQUIRE_GPU();
  {
    SCOPED_TRACE("f32");
    check_rope<float>(KvElement::kF32);
  }
  {
    SCOPED_TRACE("bf16");
    check_rope<bf16>(KvElement::kBF16);
  }
}

// A step's K and V rows into their pools at distinct rows (read through a strided row list);
// rows of 4-byte and of 16-byte multiples; the other pool rows untouched.
TEST(CudaKernels, WriteKvRowsIntoBothPools) {
  KVB_REQUIRE_GPU();
  KernelRng rng;
  SCOPED_TRACE(rng.trace());
  for (const int64_t row_bytes : {256, 20}) {
    SCOPED_TRACE("row bytes " + std::to_string(row_bytes));
    const int64_t pool_rows = 50, n = 8, stride = 3;
    std::vector<uint8_t> k_pool(size_t(pool_rows * row_bytes)), v_pool(k_pool.size()),
        k(size_t(n * row_bytes)), v(k.size());
    for (auto* b : {&k_pool, &v_pool, &k, &v})
      for (auto& x : *b) x = uint8_t(rng.uniform(0, 255));
    std::vector<int64_t> order(static_cast<size_t>(pool_rows));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng.gen);
    std::vector<int64_t> rows(size_t(n * stride), -1);
    std::vector<uint8_t> want_k = k_pool, want_v = v_pool;
    for (int64_t i = 0; i < n; ++i) {
      rows[size_t(i * stride)] = order[size_t(i)];
      std::copy_n(k.begin() + i * row_bytes, row_bytes, want_k.begin() + order[size_t(i)] * row_bytes);
      std::copy_n(v.begin() + i * row_bytes, row_bytes, want_v.begin() + order[size_t(i)] * row_bytes);
    }
    DeviceBuffer<uint8_t> dkp(k_pool), dvp(v_pool), dk(k), dv(v);
    DeviceBuffer<int64_t> drows(rows);
    write_kv_rows(dkp.ptr, dvp.ptr, drows.ptr, stride, dk.ptr, dv.ptr, n, row_bytes);
    EXPECT_EQ(dkp.get(), want_k);
    EXPECT_EQ(dvp.get(), want_v);
  }
}

}  // namespace
}  // namespace kvb::cuda
