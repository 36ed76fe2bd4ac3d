#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvb::kernels {
namespace {

// One query row against rows rows[0..n) (pointers), two-pass softmax in double.
void attend_one(const float* q, const std::vector<const float*>& ks,
                const std::vector<const float*>& vs, int64_t d, float scale, float* out,
                float* probs) {
  const size_t n = ks.size();
  std::vector<double> s(n);
  double mx = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += double(q[c]) * ks[j][c];
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (size_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
  std::vector<double> o(size_t(d), 0.0);
  for (size_t j = 0; j < n; ++j) {
    const double p = s[j] / sum;
    if (probs) probs[j] = float(p);
    for (int64_t c = 0; c < d; ++c) o[c] += p * vs[j][c];
  }
  for (int64_t c = 0; c < d; ++c) out[c] = float(o[c]);
}

}  // namespace

void dense_decode_attention_reference(const float* q, const float* k, const float* v, float* out,
                                      int64_t Hq, int64_t Hkv, int64_t n, int64_t d,
                                      int64_t kv_head_stride, float scale) {
  const int64_t g = Hq / Hkv;
  for (int64_t h = 0; h < Hkv; ++h) {
    std::vector<const float*> ks(static_cast<size_t>(n)), vs(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      ks[j] = k + h * kv_head_stride + j * d;
      vs[j] = v + h * kv_head_stride + j * d;
    }
    for (int64_t i = 0; i < g; ++i)
      attend_one(q + (h * g + i) * d, ks, vs, d, scale, out + (h * g + i) * d, nullptr);
  }
}

void sparse_decode_attention_reference(const float* q, const float* k_pool, const float* v_pool,
                                       const int64_t* offsets, const int64_t* rows, float* out,
                                       int64_t Hq, int64_t Hkv, int64_t d, float scale,
                                       float* probs) {
  const int64_t g = Hq / Hkv;
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t n = offsets[h + 1] - offsets[h];
    std::vector<const float*> ks(static_cast<size_t>(n)), vs(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      ks[j] = k_pool + rows[offsets[h] + j] * d;
      vs[j] = v_pool + rows[offsets[h] + j] * d;
    }
    for (int64_t i = 0; i < g; ++i)
      attend_one(q + (h * g + i) * d, ks, vs, d, scale, out + (h * g + i) * d,
                 probs ? probs + g * offsets[h] + i * n : nullptr);
  }
}

void quest_page_scores_reference(const float* q, const float* kmin, const float* kmax,
                                 float* scores, int64_t H, int64_t g, int64_t P, int64_t d,
                                 int64_t head_stride, bool sum_group) {
  for (int64_t h = 0; h < H; ++h)
    for (int64_t p = 0; p < P; ++p) {
      double total = 0;
      for (int64_t i = 0; i < g; ++i) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c) {
          const double qc = q[(h * g + i) * d + c];
          const double lo = kmin[h * head_stride + p * d + c], hi = kmax[h * head_stride + p * d + c];
          s += qc >= 0 ? qc * hi : qc * lo;
        }
        total += s;
        if (!sum_group) scores[(h * g + i) * P + p] = float(s);
      }
      if (sum_group) scores[h * P + p] = float(total);
    }
}

void rms_norm_reference(const float* x, const float* weight, float* out, int64_t rows,
                        int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * dim;
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += double(row[i]) * double(row[i]);
    const double scale = 1.0 / std::sqrt(sum / double(dim) + double(eps));
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = float(double(row[i]) * scale * weight[i]);
  }
}

double cosine_reference(const float* keys, const float* centroids, int64_t h, int64_t j,
                        int64_t c, int64_t n, int64_t C, int64_t d) {
  const float* k = keys + (h * n + j) * d;
  const float* m = centroids + (h * C + c) * d;
  double dot = 0, kk = 0, mm = 0;
  for (int64_t x = 0; x < d; ++x) {
    dot += double(k[x]) * m[x];
    kk += double(k[x]) * k[x];
    mm += double(m[x]) * m[x];
  }
  return dot / (std::max(std::sqrt(kk), 1e-12) * std::max(std::sqrt(mm), 1e-12));
}

void cosine_assign_reference(const float* keys, const float* centroids, int32_t* labels,
                             int64_t H, int64_t n, int64_t C, int64_t d) {
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < n; ++j) {
      double best = -INFINITY;
      int32_t arg = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double s = cosine_reference(keys, centroids, h, j, c, n, C, d);
        if (s > best) {
          best = s;
          arg = int32_t(c);
        }
      }
      labels[h * n + j] = arg;
    }
}

void centroid_update_reference(const float* keys, const int32_t* labels, const float* old,
                               float* out, int64_t H, int64_t n, int64_t C, int64_t d,
                               int64_t* counts) {
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> sum(size_t(d), 0.0);
      int64_t cnt = 0;
      for (int64_t j = 0; j < n; ++j)
        if (labels[h * n + j] == c) {
          ++cnt;
          for (int64_t x = 0; x < d; ++x) sum[x] += keys[(h * n + j) * d + x];
        }
      for (int64_t x = 0; x < d; ++x)
        out[(h * C + c) * d + x] = cnt ? float(sum[x] / double(cnt)) : old[(h * C + c) * d + x];
      if (counts) counts[h * C + c] = cnt;
    }
}

void pq_scores_reference(const float* q, const float* centroids, const uint8_t* codes,
                         float* scores, int64_t H, int64_t g, int64_t m, int64_t K, int64_t s,
                         int64_t n, int64_t codes_row) {
  for (int64_t h = 0; h < H; ++h)
    for (int64_t gi = 0; gi < g; ++gi)
      for (int64_t j = 0; j < n; ++j) {
        double total = 0;
        for (int64_t i = 0; i < m; ++i) {
          const int64_t code = codes[(h * m + i) * codes_row + j];
          for (int64_t x = 0; x < s; ++x)
            total += double(q[(h * g + gi) * m * s + i * s + x]) *
                     centroids[((h * m + i) * K + code) * s + x];
        }
        scores[(h * g + gi) * n + j] = float(total);
      }
}

void pq_top_k_reference(const float* q, const float* centroids, const uint8_t* codes, int64_t H,
                        int64_t g, int64_t m, int64_t K, int64_t s, int64_t n, int64_t codes_row,
                        float scale, int64_t k, int64_t lead, int64_t trailing, int64_t* out,
                        double* weights) {
  std::vector<float> scores(size_t(H * g * n));
  pq_scores_reference(q, centroids, codes, scores.data(), H, g, m, K, s, n, codes_row);
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> w(size_t(n), 0.0);
    for (int64_t gi = 0; gi < g; ++gi) {
      const float* x = scores.data() + (h * g + gi) * n;
      double top = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) top = std::max(top, double(scale) * x[j]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(scale) * x[j] - top);
      for (int64_t j = 0; j < n; ++j) w[size_t(j)] += std::exp(double(scale) * x[j] - top) / sum;
    }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return w[size_t(a)] > w[size_t(b)]; });
    std::sort(order.begin(), order.begin() + k);
    int64_t* o = out + h * (lead + k + trailing);
    for (int64_t j = 0; j < lead; ++j) o[j] = j;
    for (int64_t i = 0; i < k; ++i) o[lead + i] = lead + order[size_t(i)];
    for (int64_t j = 0; j < trailing; ++j) o[lead + k + j] = lead + n + j;
    if (weights) std::copy(w.begin(), w.end(), weights + h * n);
  }
}

}  // namespace kvb::kernels
