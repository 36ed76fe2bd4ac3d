// CUDA's pipeline primitives (cp.async: a copy from global into shared memory that lands
// later), emulated for tests/cuda_emulation: a thread's copies are made when it waits for
// their commit group, not before, so a kernel that reads its slot too early reads the block's
// 0xFF garbage (on a GPU: stale bytes), and a thread that ends with copies not waited for fails
// its launch.
#pragma once
#include <cstddef>

namespace kvb_emu {
void pipeline_copy(void* dst, const void* src, size_t bytes, size_t zfill);
void pipeline_commit();
void pipeline_wait_prior(size_t prior);
}  // namespace kvb_emu

inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0) {
  kvb_emu::pipeline_copy(dst_shared, src_global, size_and_align, zfill);
}
inline void __pipeline_commit() { kvb_emu::pipeline_commit(); }
inline void __pipeline_wait_prior(size_t prior) { kvb_emu::pipeline_wait_prior(prior); }
