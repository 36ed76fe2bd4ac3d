// Helpers for the kernel tests: fresh random inputs per test (the seed is printed on failure),
// NaN-poisoned outputs, relative errors.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/simd.h"

namespace kvb::test {

// Runs check() with the kernels capped at each instruction-set level they dispatch to (AVX-512,
// AVX2, portable), so one machine tests every path its CPU has; a level above the CPU's runs the
// CPU's widest path again. The cap is restored afterwards.
template <class Check>
void for_each_simd_level(Check check) {
  using kernels::SimdLevel;
  const SimdLevel before = kernels::simd_limit();
  for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAvx2, SimdLevel::kPortable}) {
    SCOPED_TRACE(level == SimdLevel::kAvx512 ? "AVX-512" : level == SimdLevel::kAvx2 ? "AVX2" : "portable");
    kernels::simd_limit() = level;
    check();
  }
  kernels::simd_limit() = before;
}

// Random inputs from a fresh seed each run, named in a failure's trace ("seed N");
// KVBENCH_TEST_SEED=N runs that failure again.
inline uint32_t test_seed() {
  const char* fixed = std::getenv("KVBENCH_TEST_SEED");
  return fixed && *fixed ? uint32_t(std::strtoul(fixed, nullptr, 10)) : std::random_device{}();
}

struct KernelRng {
  uint32_t seed = test_seed();
  std::mt19937_64 gen{seed};
  std::string trace() const { return "seed " + std::to_string(seed); }
  std::vector<float> normal(size_t n, float stddev = 1.f) {
    std::normal_distribution<float> dist(0.f, stddev);
    std::vector<float> x(n);
    for (float& v : x) v = dist(gen);
    return x;
  }
  int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
};

template <class T>
std::vector<T> poisoned(size_t n) {
  if constexpr (std::is_floating_point_v<T>)
    return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
  else
    return std::vector<T>(n, T(-1));
}

// ||a - b|| / ||b||; NaN anywhere in a gives +inf.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    num += double(a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// Where `got` differs from `want` beyond near ties, both [rows, lead + k + trailing] as
// top_k_ascending lays them out: "" when each row has want's leading and trailing entries and
// an ascending top-k part that differs from want's only in entries whose weight (weights
// [rows, n], of entry lead + j at j) is within `tol`, relative, of the row's k-th largest
// weight (where a ranking in another summation order may swap them); else the first difference.
inline std::string top_k_difference(const std::vector<int64_t>& got,
                                    const std::vector<int64_t>& want,
                                    const std::vector<double>& weights, int64_t rows, int64_t n,
                                    int64_t lead, int64_t k, int64_t trailing, double tol) {
  const int64_t width = lead + k + trailing;
  if (got.size() != size_t(rows * width) || want.size() != got.size()) return "sizes differ";
  for (int64_t r = 0; r < rows; ++r) {
    const std::string row = "row " + std::to_string(r) + ": ";
    const int64_t* g = got.data() + r * width;
    const int64_t* w = want.data() + r * width;
    for (int64_t j = 0; j < width; ++j)
      if ((j < lead || j >= lead + k) && g[j] != w[j])
        return row + "lead or trailing entry differs";
    for (int64_t j = lead + 1; j < lead + k; ++j)
      if (g[j] <= g[j - 1]) return row + "top-k not ascending";
    if (k == 0) continue;
    std::vector<double> sorted(weights.begin() + r * n, weights.begin() + (r + 1) * n);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
    const double kth = sorted[size_t(k - 1)];
    std::vector<int64_t> a(g + lead, g + lead + k), b(w + lead, w + lead + k), only;
    std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only));
    for (int64_t e : only) {
      if (e < lead || e >= lead + n) return row + "entry " + std::to_string(e) + " out of range";
      const double x = weights[size_t(r * n + e - lead)];
      if (std::abs(x - kth) > tol * std::abs(kth))
        return row + "entry " + std::to_string(e) + " (weight " + std::to_string(x) +
               ") taken by one and not the other, k-th weight " + std::to_string(kth);
    }
  }
  return "";
}

// "" when, in every row [lead + k + trailing] of `taken`, each token lies in range and, of the
// tokens of one row with equal codes (whose weights are equal on every path), the earlier ones
// are taken first; else the first offence. codes: [rows, m, codes_row] (a row's first n
// columns are its tokens').
inline std::string equal_codes_taken_earliest(const std::vector<int64_t>& taken,
                                              const std::vector<int64_t>& codes, int64_t rows,
                                              int64_t m, int64_t n, int64_t codes_row,
                                              int64_t lead, int64_t k, int64_t trailing) {
  const int64_t base = codes.empty() ? 1 : *std::max_element(codes.begin(), codes.end()) + 1;
  if (m * std::log2(double(base)) > 62) return "codes too many to combine into one key";
  const int64_t width = lead + k + trailing;
  for (int64_t h = 0; h < rows; ++h) {
    std::vector<bool> is_taken(size_t(n), false);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t token = taken[size_t(h * width + lead + i)] - lead;
      if (token < 0 || token >= n) return "head " + std::to_string(h) + ": token out of range";
      is_taken[size_t(token)] = true;
    }
    std::unordered_set<int64_t> passed_over;  // combinations of which a token was not taken
    for (int64_t j = 0; j < n; ++j) {
      int64_t key = 0;
      for (int64_t u = 0; u < m; ++u) key = key * base + codes[size_t((h * m + u) * codes_row + j)];
      if (!is_taken[size_t(j)]) passed_over.insert(key);
      else if (passed_over.count(key))
        return "head " + std::to_string(h) + ": token " + std::to_string(j) +
               " taken after an earlier one with its codes was not";
    }
  }
  return "";
}

}  // namespace kvb::test
