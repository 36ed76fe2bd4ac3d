// Helpers shared by the tests of ci/'s scripts.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace kvb::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The script's output holds `part`, printed whole where it does not.
inline void expect_output(const CliRun& r, const std::string& part) {
  EXPECT_NE(r.output.find(part), std::string::npos) << "no \"" << part << "\" in:\n" << r.output;
}

// A stand-in project in `dir` to run ci/gpu_test.sh in: ci/gpu_test.sh and the other `scripts`
// of ci/ copied from the source tree, ci/setup.sh holding `setup` (the set-up's stand-in), and an
// empty build-gpu/.
inline void write_gpu_test_stand_in(const TempDir& dir, const std::string& setup,
                                    const std::vector<std::string>& scripts = {}) {
  namespace fs = std::filesystem;
  fs::create_directories(dir.file("ci"));
  fs::create_directories(dir.file("build-gpu"));
  fs::copy_file(KVBENCH_SOURCE_DIR "/ci/gpu_test.sh", dir.file("ci/gpu_test.sh"));
  for (const std::string& script : scripts)
    fs::copy_file(KVBENCH_SOURCE_DIR "/ci/" + script, dir.file("ci/" + script));
  std::ofstream(dir.file("ci/setup.sh")) << setup;
}

}  // namespace kvb::test
