// ci/skipped_tests.sh: the skipped tests of a CTest JUnit file, grouped by the reason each
// printed; passed and failed tests are not listed.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/ci/script_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::contains;

// What `ctest --output-junit` writes (CMake 3.25), trimmed.
const char* kJunit = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="6" failures="1" disabled="0" skipped="4">
	<testcase name="Passes.Always" classname="Passes.Always" time="0.1" status="run">
		<system-out>skipped: words a passing test printed
</system-out>
	</testcase>
	<testcase name="Needs.Shared" classname="Needs.Shared" time="0.1" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>[ RUN      ] Needs.Shared
/src/tests/x_test.cpp:12: Skipped
skipped: /w/shared/models/stories260K is absent (set KVBENCH_SHARED &amp; retry)
[  SKIPPED ] Needs.Shared (0 ms)
</system-out>
	</testcase>
	<testcase name="Needs.SharedToo" classname="Needs.SharedToo" time="0.1" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>/src/tests/y_test.cpp:40: Skipped
skipped: /w/shared/models/stories260K is absent (set KVBENCH_SHARED &amp; retry)
</system-out>
	</testcase>
	<testcase name="slurm_integration" classname="slurm_integration" time="0.1" status="notrun">
		<skipped message="SKIP_RETURN_CODE=77"/>
		<system-out>slurm_test: SKIPPED: slurmctld did not start
</system-out>
	</testcase>
	<testcase name="Silent.Skip" classname="Silent.Skip" time="0.1" status="notrun">
		<skipped message="SKIP_RETURN_CODE=77"/>
		<system-out></system-out>
	</testcase>
	<testcase name="Fails.Loudly" classname="Fails.Loudly" time="0.1" status="fail">
		<failure message=""/>
		<system-out>skipped: not a skip
</system-out>
	</testcase>
</testsuite>
)xml";

TEST(SkippedTests, ListsEachSkipWithItsReasonGrouped) {
  test::TempDir dir;
  std::ofstream(dir.file("junit.xml")) << kJunit;
  const test::CliRun r =
      test::run_shell("bash " KVBENCH_SOURCE_DIR "/ci/skipped_tests.sh " + dir.file("junit.xml"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "4 tests skipped:")) << r.output;
  EXPECT_TRUE(contains(r.output, "- /w/shared/models/stories260K is absent (set KVBENCH_SHARED & retry)\n"
                                 "      (2 tests: Needs.Shared, Needs.SharedToo)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "- slurmctld did not start\n      (slurm_integration)")) << r.output;
  // A test that printed no reason: CTest's.
  EXPECT_TRUE(contains(r.output, "- SKIP_RETURN_CODE=77\n      (Silent.Skip)")) << r.output;
  EXPECT_FALSE(contains(r.output, "Passes.Always")) << r.output;
  EXPECT_FALSE(contains(r.output, "Fails.Loudly")) << r.output;
}

TEST(SkippedTests, SaysNothingWhenNothingWasSkipped) {
  test::TempDir dir;
  std::ofstream(dir.file("junit.xml"))
      << "<testsuite>\n<testcase name=\"A.B\" status=\"run\">\n<system-out>ok\n</system-out>\n"
         "</testcase>\n</testsuite>\n";
  const test::CliRun r =
      test::run_shell("bash " KVBENCH_SOURCE_DIR "/ci/skipped_tests.sh " + dir.file("junit.xml"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.output, "");
}

}  // namespace
}  // namespace kvb
