// The kvbench binary run as a child process by the CLI tests: its exit code and outputs.
#pragma once
#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace kvb::test {

struct Output {
  int code = -1;  // exit code, or 128 + signal
  std::string out, err;
};

std::string read_file(const std::string& path);

// Starts kvbench with `args` in `cwd`, stdout and stderr to files in `cwd`. Returns the pid.
// `launcher`: a command kvbench runs under (e.g. prlimit, setpriv), with its arguments.
pid_t spawn(const std::vector<std::string>& args, const std::string& cwd,
            const std::string& tag = "cli", const std::vector<std::string>& launcher = {});

// Waits for `pid` (spawned with `tag` in `cwd`) and reads what it printed.
Output wait_for(pid_t pid, const std::string& cwd, const std::string& tag = "cli");

Output kvbench(const std::vector<std::string>& args, const std::string& cwd);

// Runs independent invocations at once (startup, mostly loading LibTorch, dominates their time).
std::vector<Output> kvbench_all(const std::vector<std::vector<std::string>>& invocations,
                                const std::string& cwd);

bool contains(const std::string& text, const std::string& part);
size_t lines(const std::string& text);
size_t lines_with(const std::string& text, const std::string& part);
// The exit code and both outputs, for a failed expectation's message.
std::string describe(const Output& r);
// The rows `query` returns from database `db` (opened read-only), each column as text.
std::vector<std::vector<std::string>> sql_rows(const std::string& db, const std::string& query);
// Writes suite `j` as `name` in `dir`; returns its path.
std::string write_suite(const TempDir& dir, const std::string& name, const nlohmann::json& j);

}  // namespace kvb::test
