// ci/gpu_test.sh --pack on a stand-in project whose set-up cannot start (as on a machine
// without a CUDA LibTorch): on exit the archive holds build-gpu/'s logs, ncu CSVs and
// databases, a database's rows still only in its -wal file (a run killed by a time limit)
// included, and not the profiles' Chrome traces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/ci/script_test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

TEST(GpuTestPack, ArchivesTheResultsWithTheirWalRowsWhateverTheSteps) {
  test::TempDir dir;
  test::write_gpu_test_stand_in(dir, "echo 'setup: error: no CUDA LibTorch' >&2\nexit 2\n");
  std::ofstream(dir.file("build-gpu/setup.log")) << "a log\n";
  std::ofstream(dir.file("build-gpu/profile-full.tsv.trace.json")) << "{}\n";
  std::ofstream(dir.file("build-gpu/ncu-gpu_quest_select.csv")) << "\"ID\"\n";
  // Rows committed to the -wal file, the process gone without a checkpoint.
  const test::CliRun wal = test::run_shell(
      "python3 -c 'import os, sqlite3; c = sqlite3.connect(\"" + dir.file("build-gpu/run.db") +
      "\"); c.execute(\"PRAGMA journal_mode=WAL\"); c.execute(\"PRAGMA wal_autocheckpoint=0\"); "
      "c.execute(\"CREATE TABLE cells(x)\"); c.execute(\"INSERT INTO cells VALUES (42)\"); "
      "c.commit(); os._exit(0)'");
  ASSERT_EQ(wal.code, 0) << wal.output;
  ASSERT_TRUE(fs::exists(dir.file("build-gpu/run.db-wal")));

  const test::CliRun r =
      test::run_shell("bash " + dir.file("ci/gpu_test.sh") + " --pack out.tar.gz < /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("packed 3 files into " + dir.file("out.tar.gz")), std::string::npos)
      << r.output;
  fs::create_directories(dir.file("unpacked"));
  const test::CliRun listed = test::run_shell("tar xzvf " + dir.file("out.tar.gz") + " -C " +
                                              dir.file("unpacked"));
  ASSERT_EQ(listed.code, 0) << listed.output;
  EXPECT_EQ(listed.output.find("trace.json"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("build-gpu/setup.log"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("build-gpu/ncu-gpu_quest_select.csv"), std::string::npos)
      << listed.output;
  ASSERT_FALSE(fs::exists(dir.file("unpacked/build-gpu/run.db-wal")));
  const test::CliRun rows = test::run_shell(
      "python3 -c 'import sqlite3; print(sqlite3.connect(\"" +
      dir.file("unpacked/build-gpu/run.db") + "\").execute(\"SELECT x FROM cells\").fetchall())'");
  EXPECT_EQ(rows.output, "[(42,)]\n");

  const test::CliRun no_file = test::run_shell("bash " + dir.file("ci/gpu_test.sh") + " --pack");
  EXPECT_EQ(no_file.code, 2) << no_file.output;
  EXPECT_NE(no_file.output.find("--pack needs a file name"), std::string::npos) << no_file.output;
}

}  // namespace
}  // namespace kvb
