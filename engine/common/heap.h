// How the process's heap returns memory to the system.
#pragma once

namespace kvb {

// glibc returns freed memory at the top of the heap to the system (above 128 KiB by default)
// and serves blocks above a dynamic threshold with fresh mmap()s. A decode step frees and
// reallocates the same tensors on every layer, so every step paid page faults to get that
// memory back: half of a CPU run's time was system time, and `kvbench run smoke` took 8.7 s
// instead of 2.9 s (PERFORMANCE.md). This keeps up to 1 GiB of freed memory in the heap
// and serves only blocks of 64 MiB or more with mmap() (model weights, large caches), unless
// the user set MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_. No effect without glibc.
void keep_freed_heap_memory();

}  // namespace kvb
