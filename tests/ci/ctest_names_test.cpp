// CTest's test names stay readable: every value-parameterised test has a name generator (so no
// test is called ".../3"), and CMake's test discovery does not append a dump of the parameter's
// bytes (`# GetParam() = 176-byte object <E0-8F ...>`).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

TEST(CtestNames, ParameterisedTestsHaveReadableNames) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int parameterised = 0;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(j);
      if (!test.value_param()) continue;
      ++parameterised;
      const std::string name = test.name();
      EXPECT_FALSE(all_digits(name.substr(name.rfind('/') + 1)))
          << suite.name() << "." << name
          << ": give its INSTANTIATE_TEST_SUITE_P a name generator (a readable name per value)";
    }
  }
  EXPECT_GT(parameterised, 0) << "no parameterised test seen: the check checks nothing";
}

TEST(CtestNames, CtestListsNoParameterDumps) {
  const std::string build_dir = std::filesystem::path(KVBENCH_BINARY).parent_path().string();
  const test::CliRun r = test::run_shell("ctest -N --test-dir '" + build_dir + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_NE(r.output.find("DenseDecodeAttention.MatchesReference/"), std::string::npos) << r.output;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.find("GetParam()"), std::string::npos) << line;
    EXPECT_EQ(line.find("-byte object"), std::string::npos) << line;
    EXPECT_LT(line.size(), 160u) << line;
  }
}

}  // namespace
}  // namespace kvb
