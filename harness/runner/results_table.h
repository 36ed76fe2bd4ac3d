// The plain-text results table of a run (printed by `run` and `show`).
#pragma once
#include <ostream>

#include "harness/store/result_store.h"

namespace kvb {

void print_run(const ResultStore& store, int64_t run_id, std::ostream& out);

}  // namespace kvb
