// ci/setup.sh on a two-file stand-in project (the real one takes minutes): one line per stage, a
// progress count, the full output only in the log; a failing build names the stage, shows the
// log's tail and the log's path, and exits 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/ci/script_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::contains;

namespace fs = std::filesystem;

void expect_all(const std::string& output, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_TRUE(contains(output, part)) << part << " missing:\n" << output;
}

size_t line_count(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

// A project with two programs (2 files to compile, 2 links) and ci/setup.sh.
void make_project(const test::TempDir& dir, const std::string& second_source) {
  fs::create_directories(dir.file("ci"));
  fs::copy_file(KVBENCH_SOURCE_DIR "/ci/setup.sh", dir.file("ci/setup.sh"));
  std::ofstream(dir.file("CMakeLists.txt"))
      << "cmake_minimum_required(VERSION 3.25)\nproject(standin CXX)\n"
         "add_executable(kvbench a.cpp)\nadd_executable(kvbench_tests b.cpp)\n";
  std::ofstream(dir.file("a.cpp")) << "int main() { return 0; }\n";
  std::ofstream(dir.file("b.cpp")) << second_source;
}

test::CliRun setup(const test::TempDir& dir) {
  return test::run_shell("KVBENCH_SETUP_PACKAGES=skip bash " + dir.file("ci/setup.sh") + " < /dev/null");
}

TEST(Setup, ShowsOneLinePerStageAndLogsTheRest) {
  test::TempDir dir;
  make_project(dir, "int main() { return 0; }\n");
  const test::CliRun r = setup(dir);
  ASSERT_EQ(r.code, 0) << r.output;
  expect_all(r.output, {"setup: [1/3] Debian packages: left alone", "setup: [2/3] configuring build/",
                        "setup: [3/3] building: 2 files to compile", "setup: [3/3] compiling 2/2 (100%)",
                        "setup: [3/3] linking kvbench_tests", "full log: build/setup.log"});
  EXPECT_FALSE(contains(r.output, "Building CXX object")) << r.output;  // only in the log
  EXPECT_FALSE(contains(r.output, "-- Configuring done")) << r.output;
  EXPECT_LE(line_count(r.output), 9u) << r.output;
  std::ifstream log(dir.file("build/setup.log"));
  const std::string logged((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(logged, "Building CXX object")) << logged;
  EXPECT_TRUE(contains(logged, "Configuring done")) << logged;

  std::ofstream(dir.file("b.cpp")) << "int main() { return 1; }\n";  // one file changed
  const test::CliRun again = setup(dir);
  ASSERT_EQ(again.code, 0) << again.output;
  expect_all(again.output, {"[3/3] building: 1 file to compile", "[3/3] compiling 1/1 (100%)"});
  const test::CliRun third = setup(dir);
  EXPECT_TRUE(contains(third.output, "[3/3] building: nothing to compile")) << third.output;
}

TEST(Setup, AFailedBuildNamesTheStageAndShowsTheLogTail) {
  test::TempDir dir;
  make_project(dir, "int main() { return missing_symbol_for_the_test; }\n");
  const test::CliRun r = setup(dir);
  EXPECT_EQ(r.code, 1) << r.output;
  expect_all(r.output, {"setup: FAILED while building",
                        "missing_symbol_for_the_test",  // from the log's tail
                        "full log: build/setup.log"});
  EXPECT_FALSE(contains(r.output, "setup: done")) << r.output;
}

}  // namespace
}  // namespace kvb
