// How the process's two CPU thread pools share the cores: LibTorch's OpenMP threads and, on
// Debian's LibTorch, OpenBLAS's own pthreads.
#pragma once

#include <optional>

namespace kvb {

// libgomp reads OMP_WAIT_POLICY once, when it is loaded, before main(). By default its idle
// threads spin for a while after every parallel region; a decode step alternates small torch
// ops (OpenMP) with matrix-vector products (OpenBLAS's threads), so the two pools took turns
// spinning on the same cores and a CPU decode step ran 2-4x slower than with PASSIVE
// (PERFORMANCE.md). When the variable is unset, this sets it to PASSIVE and executes the
// program again (argv as given) so that libgomp sees it; a user's own setting is kept, and if
// the re-execution fails the process simply goes on.
void use_passive_omp_wait(char** argv);

// The thread count an OMP_NUM_THREADS value asks for: 0 where it is unset or empty (the
// caller's default), the first level of a list ("4,2": 4), nullopt where it is no positive
// count ("abc", "0", "4x"), which libgomp warns about and ignores.
std::optional<int> omp_num_threads(const char* value);

// Both pools to `threads` (> 0), for a count the user asked for: at::set_num_threads sets
// LibTorch's OpenMP threads (and MKL's, in builds with MKL) but leaves OpenBLAS's pool at its
// own default, every core it may use, so `--threads 1` still ran matrix products on two.
// OpenBLAS is found in the process by its symbol (it comes in through libblas.so.3, not linked
// by name). Returns the OpenMP pool's size.
int set_cpu_threads(int threads);

// OpenBLAS's pool size where the process has OpenBLAS, else nullopt (for tests and provenance).
std::optional<int> openblas_threads();

}  // namespace kvb
