// How the process's two CPU thread pools share the cores: LibTorch's OpenMP threads and, on
// Debian's LibTorch, OpenBLAS's own pthreads.
#pragma once

namespace kvb {

// libgomp reads OMP_WAIT_POLICY once, when it is loaded, before main(). By default its idle
// threads spin for a while after every parallel region; a decode step alternates small torch
// ops (OpenMP) with matrix-vector products (OpenBLAS's threads), so the two pools took turns
// spinning on the same cores and a CPU decode step ran 2-4x slower than with PASSIVE
// (PERFORMANCE.md). When the variable is unset, this sets it to PASSIVE and executes the
// program again (argv as given) so that libgomp sees it; a user's own setting is kept, and if
// the re-execution fails the process simply goes on.
void use_passive_omp_wait(char** argv);

}  // namespace kvb
