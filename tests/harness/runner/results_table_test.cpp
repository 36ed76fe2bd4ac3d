// The printed results table: a run on the embedded model says in one line what kvbench-tiny is
// and where its README is; other runs get no such line.
#include "harness/runner/results_table.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

std::string table_of_a_run_on(const std::string& model) {
  test::TempDir dir;
  ResultStore store(dir.file("r.db"));
  RunInfo info;
  info.suite = "t";
  info.suite_json = R"({"name": "t"})";
  info.command = "kvbench run t";
  const int64_t run = store.begin_run(info);
  const int64_t cell = store.claim_cell(run, R"({"model": ")" + model + R"("})", model, "passkey",
                                        "full", std::nullopt, 0).cell_id;
  store.complete_cell(cell, {{"passkey-0", 100, "1", "[\"1\"]", 100.0}},
                      {{std::nullopt, "score", 100.0, "passkey_accuracy"}}, 0.1);
  store.finish_run(run, "complete");
  std::ostringstream out;
  print_run(store, run, out);
  return out.str();
}

TEST(ResultsTable, SaysWhatTheEmbeddedModelIsUnderTheTable) {
  const std::string table = table_of_a_run_on("kvbench-tiny");
  const size_t note = table.find("\nkvbench-tiny: ");
  ASSERT_NE(note, std::string::npos) << table;
  const std::string line = table.substr(note + 1, table.find('\n', note + 1) - note - 1);
  EXPECT_NE(line.find("trained itself"), std::string::npos) << line;
  EXPECT_NE(line.find("kvbench-tiny/README.md"), std::string::npos) << line;
  EXPECT_GT(note, table.find("-----")) << "the note belongs under the table";
  EXPECT_EQ(table_of_a_run_on("random-tiny").find("kvbench-tiny:"), std::string::npos);
}

}  // namespace
}  // namespace kvb
