// Helpers for the kernel tests: fresh random inputs per test (the seed is printed on failure),
// NaN-poisoned outputs, relative errors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd.h"

namespace kvb::test {

// Runs check() with the kernels capped at each instruction-set level they dispatch to (AVX-512,
// AVX2, portable), so one machine tests every path its CPU has; a level above the CPU's runs the
// CPU's widest path again. The cap is restored afterwards.
template <class Check>
void for_each_simd_level(Check check) {
  using kernels::SimdLevel;
  for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAvx2, SimdLevel::kPortable}) {
    SCOPED_TRACE(level == SimdLevel::kAvx512 ? "AVX-512" : level == SimdLevel::kAvx2 ? "AVX2" : "portable");
    kernels::simd_limit() = level;
    check();
  }
  kernels::simd_limit() = SimdLevel::kAvx512;
}

struct KernelRng {
  uint32_t seed = std::random_device{}();
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

}  // namespace kvb::test
