// Errors that reach the user. InputError = bad input (file, field, flag): exit code 2.
#pragma once
#include <stdexcept>
#include <string>

namespace kvb {

// Bad user input: a missing or malformed file, an unknown name, an invalid option.
// The message names the file and the field; the CLI prints it on one line and exits 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kvb
