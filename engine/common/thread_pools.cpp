#include "engine/common/thread_pools.h"

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

}  // namespace kvb
