// Portable random draws for the generated datasets. std::uniform_int_distribution and
// std::shuffle are implementation-defined (libstdc++ and libc++ give different numbers for the
// same engine), so prompts would differ between platforms; these helpers only use the raw
// std::mt19937_64 output, which the standard fixes, so a seed gives the same bytes everywhere.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace kvb {

// Uniform in [0, n) by rejection (no modulo bias). n >= 1.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // largest multiple of n, exclusive
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

// Uniform in [lo, hi] (both inclusive).
inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + int64_t(uniform_below(rng, uint64_t(hi - lo) + 1));
}

// Fisher-Yates, back to front.
template <typename T>
void portable_shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_below(rng, i)]);
}

// k distinct indices of [0, n), in draw order (k <= n).
inline std::vector<int64_t> sample_indices(std::mt19937_64& rng, int64_t n, int64_t k) {
  std::vector<int64_t> pool(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) pool[size_t(i)] = i;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < k; ++i) {  // partial Fisher-Yates from the front
    const int64_t j = i + int64_t(uniform_below(rng, uint64_t(n - i)));
    std::swap(pool[size_t(i)], pool[size_t(j)]);
    out.push_back(pool[size_t(i)]);
  }
  return out;
}

}  // namespace kvb
