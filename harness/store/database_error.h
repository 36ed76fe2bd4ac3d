// The results database's own failures, told apart from a cell's.
#pragma once
#include "engine/common/error.h"

namespace kvb {

// The database file itself failed: disk full, read-only, an I/O error, not a database. An
// InputError naming the file (the CLI prints one line and exits 2); its own type so that the
// runner stops there instead of recording the failure against a cell.
class DatabaseError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace kvb
