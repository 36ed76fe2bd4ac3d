// Helpers shared by the tests: paths to ../shared and to the kvbench binary, temp dirs.
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/common/files.h"
#include "engine/common/shared_folder.h"

namespace kvb::test {

// The shared folder, found as kvbench finds it (engine/common/shared_folder.h: KVBENCH_SHARED,
// else ../shared beside the checkout). Empty when absent.
inline std::string shared_dir() {
  const std::string dir = shared_folder();
  return std::filesystem::exists(dir) ? dir : std::string();
}

// Points KVBENCH_SHARED at a folder (or, with nullopt, unsets it) for one scope, then restores it.
class ScopedSharedFolder {
 public:
  explicit ScopedSharedFolder(const std::optional<std::string>& dir) {
    if (const char* old = std::getenv("KVBENCH_SHARED")) old_ = old;
    set(dir);
  }
  ~ScopedSharedFolder() { set(old_); }

 private:
  static void set(const std::optional<std::string>& dir) {
    if (dir) setenv("KVBENCH_SHARED", dir->c_str(), 1);
    else unsetenv("KVBENCH_SHARED");
  }
  std::optional<std::string> old_;
};

// The end of a skip message: where the shared folder was looked for, how to point elsewhere.
inline std::string shared_absent(const std::string& what) {
  return what + " is absent (" + shared_folder_hint() + ")";
}

inline std::string stories260k_dir() {
  std::string shared = shared_dir();
  std::string dir = shared.empty() ? "" : shared + "/models/stories260K";
  return !dir.empty() && std::filesystem::exists(dir + "/model.safetensors") ? dir : "";
}

// Skips the test, loudly, when ${SHARED}/models/stories260K is not there.
#define KVB_REQUIRE_STORIES260K(dir_var)                \
  std::string dir_var = ::kvb::test::stories260k_dir(); \
  if (dir_var.empty())                                  \
  GTEST_SKIP() << "skipped: " << ::kvb::test::shared_absent("${SHARED}/models/stories260K")

// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvbench-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { remove_tree(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs one shell command line; stdout and stderr together.
struct CliRun {
  int code;
  std::string output;
};
inline CliRun run_shell(const std::string& command) {
  const std::string cmd = "(" + command + ") 2>&1";
  CliRun r{-1, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 512> buf;
  while (fgets(buf.data(), int(buf.size()), pipe)) r.output += buf.data();
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the kvbench binary with `args` (one shell command line); stdout and stderr together.
inline CliRun run_kvbench(const std::string& args) {
  return run_shell(std::string(KVBENCH_BINARY) + " " + args);
}

}  // namespace kvb::test
