#include "engine/common/thread_pools.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace kvb {

void use_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;  // set by the user, or by the first execution
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: go on with the default policy
}

std::optional<int> omp_num_threads(const char* value) {
  if (!value || !*value) return 0;
  char* end = nullptr;
  errno = 0;
  const long count = std::strtol(value, &end, 10);
  if (end == value || errno == ERANGE || count < 1 || count > INT_MAX) return std::nullopt;
  if (*end != '\0' && *end != ',') return std::nullopt;
  return int(count);
}

int set_cpu_threads(int threads) {
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
  return at::get_num_threads();
}

std::optional<int> openblas_threads() {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!get) return std::nullopt;
  return get();
}

}  // namespace kvb
