// Command-line mistakes as one-line messages in kvbench's style: the subcommand, what is wrong,
// the nearest valid name, where to read more. CLI11's own say "what is required", "A subcommand
// is required" for a typo, or print a 300-digit range bound.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/common/nearest_name.h"

namespace kvb {

// For a first word that is not a subcommand of `app` ("kvbench runn smoke"): the message; ""
// when `args` (argv without the program) starts with a subcommand or an option, or is empty.
std::string unknown_command_message(const CLI::App& app, const std::vector<std::string>& args);

// The message for a CLI11 parse error of `app` (exit code 2; help requests are not errors).
std::string usage_error_message(const CLI::App& app, const CLI::ParseError& e);

// Option checks with messages in that style, e.g. "--threads: -1 is negative; expected 0 or
// more (0: all cores)".
CLI::Validator non_negative(const std::string& zero_means = "");
CLI::Validator positive();
// The machine's cores (hardware threads), at least 1.
int machine_cores();
// --threads: 0 (all cores) up to max(256, 4 x the machine's cores).
CLI::Validator thread_count();
CLI::Validator one_of(const std::vector<std::string>& values);

}  // namespace kvb
