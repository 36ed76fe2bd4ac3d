#include "methods/method.h"

namespace kvb {

Registry<MethodInfo>& method_registry() {
  static Registry<MethodInfo> registry("method");
  return registry;
}

}  // namespace kvb
