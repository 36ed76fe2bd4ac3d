// Helpers shared by the tests: paths to ../shared and to the kvbench binary, temp dirs.
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvb::test {

// ../shared beside the checkout (KVBENCH_SHARED overrides). Empty when absent.
inline std::string shared_dir() {
  const char* env = std::getenv("KVBENCH_SHARED");
  std::string dir = env ? env : KVBENCH_SHARED_DIR;
  return std::filesystem::exists(dir) ? dir : std::string();
}

inline std::string stories260k_dir() {
  std::string shared = shared_dir();
  std::string dir = shared.empty() ? "" : shared + "/models/stories260K";
  return !dir.empty() && std::filesystem::exists(dir + "/model.safetensors") ? dir : "";
}

// Skips the test, loudly, when ../shared/models/stories260K is not there.
#define KVB_REQUIRE_STORIES260K(dir_var)                                                  \
  std::string dir_var = ::kvb::test::stories260k_dir();                                   \
  if (dir_var.empty()) GTEST_SKIP() << "skipped: ../shared/models/stories260K is absent " \
                                       "(set KVBENCH_SHARED to the shared folder)"

// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvbench-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::error_code ec; std::filesystem::remove_all(path_, ec); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs the kvbench binary with `args` (one shell command line); stdout and stderr together.
struct CliRun {
  int code;
  std::string output;
};
inline CliRun run_kvbench(const std::string& args) {
  const std::string cmd = std::string(KVBENCH_BINARY) + " " + args + " 2>&1";
  CliRun r{-1, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 512> buf;
  while (fgets(buf.data(), int(buf.size()), pipe)) r.output += buf.data();
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kvb::test
