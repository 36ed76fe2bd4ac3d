#include "datasets/dataset.h"

namespace kvb {

Registry<DatasetInfo>& dataset_registry() {
  static Registry<DatasetInfo> registry("dataset");
  return registry;
}

}  // namespace kvb
