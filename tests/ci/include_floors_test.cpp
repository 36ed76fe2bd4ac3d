// ci/check_layers.py: no source includes a floor above its own (ARCHITECTURE.md), checked on
// the repository itself and on small trees with one upward include each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

const std::string kCheck = "python3 " KVBENCH_SOURCE_DIR "/ci/check_layers.py ";

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(IncludeFloors, TheRepositoryIncludesOnlyDownward) {
  const test::CliRun r = test::run_shell(kCheck + KVBENCH_SOURCE_DIR);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("include floors: ok"), std::string::npos) << r.output;
}

TEST(IncludeFloors, AnEngineFileIncludingAMethodIsReported) {
  test::TempDir dir;
  write_file(dir.file("methods/method.h"), "#pragma once\n");
  write_file(dir.file("engine/session.h"), "#include <vector>\n#include \"methods/method.h\"\n");
  const test::CliRun r = test::run_shell(kCheck + dir.path());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("engine/session.h:2: includes methods/method.h"), std::string::npos)
      << r.output;
}

TEST(IncludeFloors, SiblingWorkloadsAndTheCliFromReportsAreReported) {
  test::TempDir dir;
  write_file(dir.file("methods/a.cpp"), "#include \"datasets/dataset.h\"\n");
  write_file(dir.file("reports/report.cpp"), "#include \"cli/commands.h\"\n");
  write_file(dir.file("cli/main.cpp"), "#include \"reports/report.h\"\n");  // downward: fine
  const test::CliRun r = test::run_shell(kCheck + dir.path());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("methods/a.cpp:1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reports/report.cpp:1:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("cli/main.cpp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 include(s) against the floors"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kvb
