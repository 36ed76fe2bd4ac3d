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

}  // namespace kvb
