// kvbench baseline / check: an identical run passes, an injected regression fails and is
// listed, missing cells fail, new cells are notes; the CLI's exit codes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <sys/wait.h>

#include "engine/common/error.h"
#include "reports/baseline.h"
#include "tests/reports/report_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::FakeCell;

std::vector<FakeCell> cells() {
  return {{"passkey", 256, "full", std::nullopt, 0, {100, 0}},
          {"passkey", 256, "h2o", 32, 0, {100, 0}},
          {"passkey", 256, "snapkv", 32, 0, {100, 100}}};
}

json baseline_of(const std::string& db) {
  ResultStore store(db);
  return make_baseline(store, default_baseline_metrics(), db);
}

CheckReport check(const std::string& db, const json& baseline, CheckOptions options = {}) {
  ResultStore store(db);
  return check_baseline(store, baseline, "smoke.json", options);
}

void fill(const std::string& db, const std::vector<FakeCell>& c) {
  ResultStore store(db);
  test::fill_store(store, c);
}

TEST(Check, IdenticalRunPasses) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  fill(dir.file("b.db"), cells());  // a second, identical run
  const json baseline = baseline_of(dir.file("a.db"));
  ASSERT_EQ(baseline["cells"].size(), 3u);
  const CheckReport r = check(dir.file("b.db"), baseline);
  EXPECT_TRUE(r.passed()) << r.text();
  EXPECT_EQ(r.compared, 3);
}

TEST(Check, InjectedScoreDropFailsAndIsListed) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  std::vector<FakeCell> worse = cells();
  worse[2].sample_scores = {100, 0};  // snapkv: 100 -> 50
  fill(dir.file("b.db"), worse);
  const CheckReport r = check(dir.file("b.db"), baseline_of(dir.file("a.db")));
  EXPECT_FALSE(r.passed());
  ASSERT_EQ(r.regressions.size(), 1u) << r.text();
  EXPECT_NE(r.regressions[0].find("score: snapkv @ 32 on passkey"), std::string::npos) << r.regressions[0];
  EXPECT_NE(r.regressions[0].find("100 -> 50"), std::string::npos) << r.regressions[0];
  // Within a configured tolerance it passes (the predictions are unchanged).
  CheckOptions lenient;
  lenient.tolerances["score"] = 60;
  EXPECT_TRUE(check(dir.file("b.db"), baseline_of(dir.file("a.db")), lenient).passed());
}

TEST(Check, ChangedPredictionsAndImprovementsFailUnlessAllowed) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  std::vector<FakeCell> changed = cells();
  changed[1].sample_scores = {100, 100};  // h2o better
  changed[0].prediction = "54321";         // full generates something else
  fill(dir.file("b.db"), changed);
  const json baseline = baseline_of(dir.file("a.db"));
  const CheckReport strict = check(dir.file("b.db"), baseline);
  EXPECT_FALSE(strict.passed());
  EXPECT_TRUE(strict.regressions.empty());
  EXPECT_EQ(strict.improvements.size(), 2u) << strict.text();  // h2o score, full predictions
  CheckOptions allow;
  allow.allow_improvements = true;
  EXPECT_TRUE(check(dir.file("b.db"), baseline, allow).passed());
}

// A metric with no better direction, or a value no longer finite, is never an improvement: a
// cell attending three times its budget passed --allow-improvements as a note, as did a score
// of inf.
TEST(Check, NeutralMetricsAndNonFiniteValuesFailEvenWhenImprovementsAreAllowed) {
  test::TempDir dir;
  std::vector<FakeCell> base = cells();
  base[1].extra_metrics = {{std::nullopt, "attended_mean", 32, "entries"}};
  fill(dir.file("a.db"), base);
  const json baseline = baseline_of(dir.file("a.db"));
  CheckOptions allow;
  allow.allow_improvements = true;
  std::vector<FakeCell> wider = base;
  wider[1].extra_metrics = {{std::nullopt, "attended_mean", 96, "entries"}};
  fill(dir.file("wider.db"), wider);
  const CheckReport w = check(dir.file("wider.db"), baseline, allow);
  EXPECT_FALSE(w.passed()) << w.text();
  ASSERT_EQ(w.changes.size(), 1u) << w.text();
  EXPECT_NE(w.changes[0].find("attended_mean: h2o @ 32"), std::string::npos) << w.changes[0];
  std::vector<FakeCell> infinite = base;
  infinite[2].sample_scores = {100, std::numeric_limits<double>::infinity()};
  infinite[0].kv_bytes = -std::numeric_limits<double>::infinity();  // "better": lower
  fill(dir.file("inf.db"), infinite);
  const CheckReport i = check(dir.file("inf.db"), baseline, allow);
  EXPECT_FALSE(i.passed()) << i.text();
  EXPECT_EQ(i.regressions.size(), 2u) << i.text();
}

// JSON has no inf (the library writes null, which the check then refused as its own
// baseline's malformed field): `kvbench baseline` refuses it, naming cell and metric.
TEST(Check, ABaselineOfANonFiniteValueIsRefused) {
  test::TempDir dir;
  std::vector<FakeCell> c = cells();
  c[1].sample_scores = {std::numeric_limits<double>::infinity()};
  fill(dir.file("inf.db"), c);
  try {
    baseline_of(dir.file("inf.db"));
    ADD_FAILURE() << "an infinite score recorded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("score of h2o @ 32"), std::string::npos) << e.what();
  }
}

// A tolerance for a metric no cell records (a misspelling) configured nothing and was ignored.
TEST(Check, AToleranceForAnUnrecordedMetricIsRefused) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  CheckOptions options;
  options.tolerances["scor"] = 1;
  EXPECT_THROW(check(dir.file("a.db"), baseline_of(dir.file("a.db")), options), InputError);
  options.tolerances = {{"default", 1}, {"score", 1}};
  EXPECT_TRUE(check(dir.file("a.db"), baseline_of(dir.file("a.db")), options).passed());
  // The file's own, and a key of the file kvbench does not know, alike.
  json misspelt = baseline_of(dir.file("a.db"));
  misspelt["tolerances"]["scor"] = 1;
  EXPECT_THROW(check(dir.file("a.db"), misspelt), InputError);
  json extra = baseline_of(dir.file("a.db"));
  extra["tolerance"] = json::object();
  EXPECT_THROW(check(dir.file("a.db"), extra), InputError);
}

TEST(Check, MissingCellFailsNewCellIsANote) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  std::vector<FakeCell> other = cells();
  other[2].budget = 64;  // snapkv @ 32 missing, snapkv @ 64 new
  fill(dir.file("b.db"), other);
  const CheckReport r = check(dir.file("b.db"), baseline_of(dir.file("a.db")));
  EXPECT_FALSE(r.passed());
  ASSERT_EQ(r.missing.size(), 1u);
  EXPECT_NE(r.missing[0].find("snapkv @ 32"), std::string::npos);
  ASSERT_EQ(r.added.size(), 1u);
  EXPECT_NE(r.added[0].find("snapkv @ 64"), std::string::npos);
  // A config that differs elsewhere than the label shows: told apart by the cell id and params.
  other = cells();
  other[2].context = 1024;
  fill(dir.file("c.db"), other);
  const CheckReport c = check(dir.file("c.db"), baseline_of(dir.file("a.db")));
  ASSERT_EQ(c.missing.size(), 1u);
  ASSERT_EQ(c.added.size(), 1u);
  EXPECT_NE(c.missing[0], c.added[0]);
  EXPECT_NE(c.added[0].find("\"context_length\":1024"), std::string::npos) << c.added[0];
}

TEST(Check, MalformedBaselineIsAnInputError) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  EXPECT_THROW(check(dir.file("a.db"), json{{"cells", json::array()}}), InputError);
  json empty = baseline_of(dir.file("a.db"));
  empty["cells"] = json::array();  // it would pass any database
  EXPECT_THROW(check(dir.file("a.db"), empty), InputError);
}

// A hand-edited cell of another shape is an InputError naming its field (it was an internal
// error, exit 3, from the JSON library).
TEST(Check, ACellOfAnotherShapeIsAnInputErrorNamingItsField) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  const json good = baseline_of(dir.file("a.db"));
  const std::vector<std::pair<std::function<void(json&)>, std::string>> edits = {
      {[](json& c) { c["config"] = 5; }, "$.cells[0].config: expected an object"},
      {[](json& c) { c["config"] = {{"x", 1}}; }, "$.cells[0].config.dataset: expected an object"},
      {[](json& c) { c["config"]["dataset"] = "passkey"; }, "$.cells[0].config.dataset: expected"},
      {[](json& c) { c["config"]["method"]["label"] = 3; }, "$.cells[0].config.method.label: expected a string"},
      {[](json& c) { c["score_unit"] = 5; }, "$.cells[0].score_unit: expected a string"},
      {[](json& c) { c["config"]["budget"] = "64"; }, "$.cells[0].config.budget: expected an integer or null"},
      {[](json& c) { c["metrics"] = json::array(); }, "$.cells[0].metrics: expected an object"}};
  for (const auto& [edit, message] : edits) {
    json baseline = good;
    edit(baseline["cells"][0]);
    try {
      check(dir.file("a.db"), baseline);
      ADD_FAILURE() << "accepted " << baseline["cells"][0].dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Check, ABaselineOfNoCompleteCellIsRefused) {
  test::TempDir dir;
  fill(dir.file("empty.db"), {});
  EXPECT_THROW(baseline_of(dir.file("empty.db")), InputError);
}

int run(const std::string& args) {
  const int status = std::system((std::string(KVBENCH_BINARY) + " " + args + " > /dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CheckCli, ExitCodes) {
  test::TempDir dir;
  fill(dir.file("a.db"), cells());
  std::vector<FakeCell> worse = cells();
  worse[1].sample_scores = {0, 0};
  fill(dir.file("b.db"), worse);
  const std::string base = dir.file("base.json");
  ASSERT_EQ(run("baseline --db " + dir.file("a.db") + " --out " + base), 0);
  EXPECT_EQ(run("check --db " + dir.file("a.db") + " --baseline " + base), 0);
  EXPECT_EQ(run("check --db " + dir.file("b.db") + " --baseline " + base), 1);
  EXPECT_EQ(run("check --db " + dir.file("b.db") + " --baseline " + base + " --tolerance score=60"), 0);
  EXPECT_EQ(run("check --db " + dir.file("b.db") + " --baseline " + base + " --tolerance score"), 2);
  EXPECT_EQ(run("check --db " + dir.file("b.db") + " --baseline " + base + " --tolerance score=nan"), 2);
  // --metrics naming what no cell has recorded {} for every cell: a check of nothing.
  EXPECT_EQ(run("baseline --db " + dir.file("a.db") + " --out " + dir.file("m.json") +
                " --metrics scor,recal"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.json")));
  EXPECT_EQ(run("baseline --db " + dir.file("a.db") + " --out " + dir.file("m.json") +
                " --metrics score,recall"), 0);
  EXPECT_EQ(run("check --db " + dir.file("missing.db") + " --baseline " + base), 2);
  fill(dir.file("empty.db"), {});
  EXPECT_EQ(run("baseline --db " + dir.file("empty.db") + " --out " + dir.file("e.json")), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("e.json")));
}

}  // namespace
}  // namespace kvb
