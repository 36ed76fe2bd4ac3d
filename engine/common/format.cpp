#include "engine/common/format.h"

#include <cstdio>

namespace kvb {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v + 0.0);  // + 0.0: -0.0 becomes 0.0
  return buf;
}

}  // namespace kvb
