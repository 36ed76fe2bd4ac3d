// Sharding: stable cell ids, every cell in exactly one shard, balance by estimated cost,
// independence from cell order, `i/N` parsing; and the Slurm scripts' shape.
#include "harness/scaleout/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "harness/scaleout/slurm.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

json passkey(int64_t context_length, int64_t samples) {
  return {{"name", "passkey"},
          {"params", {{"context_length", context_length}, {"samples", samples}}}};
}

// 3 datasets of different costs x (full + 2 methods x 3 budgets) x 2 seeds = 42 cells.
Suite mixed_suite() {
  json j = {{"name", "shard-test"},
            {"models", {"random-tiny"}},
            {"datasets", {passkey(512, 3), passkey(2048, 1), passkey(4096, 5)}},
            {"methods", {"full", "streaming_llm", "oracle_topk"}},
            {"budgets", {32, 64, 128}},
            {"seeds", {0, 1}}};
  return parse_suite(j, "shard_test.json");
}

TEST(CellId, IsFnv1aOfTheNormalisedConfig) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(cell_id_of_key(""), "cbf29ce48422");
  const Suite suite = mixed_suite();
  std::set<std::string> ids;
  for (const Cell& c : suite.cells()) {
    const std::string id = cell_id(c);
    EXPECT_EQ(id.size(), 12u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_EQ(id, cell_id_of_key(c.key()));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), suite.cells().size()) << "ids collide";
  // The same config parsed again (another process, another suite file) has the same id.
  const Suite again = mixed_suite();
  EXPECT_EQ(cell_id(again.cells()[7]), cell_id(suite.cells()[7]));
}

TEST(EstimatedCost, ContextTimesSamples) {
  const Suite suite = mixed_suite();
  std::map<int64_t, double> cost;  // context_length -> cost
  for (const Cell& c : suite.cells()) cost[c.dataset.params["context_length"]] = estimated_cost(c);
  EXPECT_EQ(cost[512], 512.0 * 3);
  EXPECT_EQ(cost[2048], 2048.0);
  EXPECT_EQ(cost[4096], 4096.0 * 5);
  Cell perplexity;
  perplexity.dataset.params = {{"prefix_tokens", 1000}, {"eval_tokens", 24}, {"samples", 2}};
  EXPECT_EQ(estimated_cost(perplexity), 2048.0);
  Cell longbench;
  longbench.dataset.params = {{"max_length", 100}, {"samples", 0}};
  EXPECT_EQ(estimated_cost(longbench), 100.0 * 200);
  Cell bare;
  EXPECT_EQ(estimated_cost(bare), 1.0);
}

TEST(PlanShards, EveryCellInExactlyOneShardAndBalanced) {
  const std::vector<Cell> cells = mixed_suite().cells();
  ASSERT_EQ(cells.size(), 42u);
  double max_cost = 0;
  for (const Cell& c : cells) max_cost = std::max(max_cost, estimated_cost(c));
  for (int n : {1, 2, 3, 4, 7, 42, 50}) {
    const ShardPlan plan = plan_shards(cells, n);
    ASSERT_EQ(plan.cells.size(), cells.size());
    std::multiset<std::string> all;
    std::vector<double> cost(size_t(n), 0.0);
    std::vector<int> count(size_t(n), 0);
    for (size_t i = 0; i < plan.cells.size(); ++i) {
      EXPECT_EQ(plan.cells[i].cell.key(), cells[i].key()) << "suite order kept";
      ASSERT_GE(plan.cells[i].shard, 0);
      ASSERT_LT(plan.cells[i].shard, n);
      cost[size_t(plan.cells[i].shard)] += plan.cells[i].cost;
      ++count[size_t(plan.cells[i].shard)];
    }
    EXPECT_EQ(cost, plan.shard_cost);
    EXPECT_EQ(count, plan.shard_cells);
    for (int s = 0; s < n; ++s)
      for (const Cell& c : cells_of_shard(cells, ShardSpec{s, n})) all.insert(c.key());
    EXPECT_EQ(all.size(), cells.size()) << n << " shards";
    for (const Cell& c : cells) EXPECT_EQ(all.count(c.key()), 1u);
    // Greedy LPT: the spread between shards never exceeds the largest single cell.
    const auto [lo, hi] = std::minmax_element(cost.begin(), cost.end());
    EXPECT_LE(*hi - *lo, max_cost) << n << " shards";
    if (n <= int(cells.size())) {
      for (int c : count) EXPECT_GT(c, 0) << n << " shards: an empty shard";
    }
  }
  // 2 shards of this suite split its cost exactly in half (the costs pair up).
  const ShardPlan two = plan_shards(cells, 2);
  EXPECT_EQ(two.shard_cost[0], two.shard_cost[1]);
}

TEST(PlanShards, IndependentOfCellOrderAndDuplicates) {
  std::vector<Cell> cells = mixed_suite().cells();
  const ShardPlan reference = plan_shards(cells, 4);
  std::map<std::string, int> shard_of;
  for (const PlannedCell& p : reference.cells) shard_of[p.id] = p.shard;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(cells.begin(), cells.end(), rng);
    std::vector<Cell> with_duplicates = cells;
    with_duplicates.push_back(cells[3]);
    const ShardPlan plan = plan_shards(with_duplicates, 4);
    ASSERT_EQ(plan.cells.size(), cells.size()) << "a duplicate config is planned once";
    for (const PlannedCell& p : plan.cells) EXPECT_EQ(p.shard, shard_of.at(p.id)) << p.id;
    EXPECT_EQ(plan.shard_cost, reference.shard_cost);
  }
}

TEST(PlanShards, JsonListsIdsShardsAndConfigs) {
  const ShardPlan plan = plan_shards(mixed_suite().cells(), 3);
  const json j = plan_to_json(plan);
  EXPECT_EQ(j["shards"], 3);
  ASSERT_EQ(j["cells"].size(), plan.cells.size());
  EXPECT_EQ(j["cells"][0]["id"], plan.cells[0].id);
  EXPECT_EQ(j["cells"][0]["config"].dump(), plan.cells[0].cell.key());
  EXPECT_EQ(j["shard_cells"].size(), 3u);
}

TEST(ShardSpec, ParsesZeroBasedIndexOverCount) {
  const ShardSpec s = parse_shard_spec("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(shard_text(s), "2/5");
  EXPECT_EQ(parse_shard_spec("0/1").count, 1);
  for (const char* bad : {"5/5", "1/0", "-1/3", "1", "a/b", "1/2/3", "/2", "1/", " 1/2"})
    EXPECT_THROW(parse_shard_spec(bad), InputError) << bad;
  try {
    parse_shard_spec("4/4");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("0..3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_shards({}, 0), InputError);
  EXPECT_EQ(default_shard_db_path("smoke", ShardSpec{1, 4}), "results/runs/smoke.shard-1-of-4.db");
}

TEST(SlurmScripts, ArrayTaskPicksItsShardAndMergeWaits) {
  test::TempDir dir;
  SlurmOptions o;
  o.suite = "my suite.json";
  o.suite_name = "smoke";
  o.overrides = {"budget=64", "seed=0,1"};
  o.shards = 3;
  o.kvbench = "/opt/kv bench/kvbench";
  o.workdir = "/work/dir";
  o.script_dir = dir.path();
  o.merged_db = "results/runs/smoke.db";
  o.job_name = "kvb-smoke";
  o.partition = "gpu";
  o.time = "01:00:00";
  o.gpus_per_task = 1;
  o.cpus_per_task = 2;
  const std::string array = array_script(o), merge = merge_script(o);
  for (const char* line : {"#SBATCH --array=0-2\n", "#SBATCH --partition=gpu\n",
                           "#SBATCH --gpus-per-task=1\n", "#SBATCH --time=01:00:00\n",
                           "#SBATCH --cpus-per-task=2\n", "#SBATCH --chdir=/work/dir\n",
                           "SLURM_ARRAY_TASK_ID", "--shard \"${shard}/3\"", "--threads 2",
                           "'/opt/kv bench/kvbench' run 'my suite.json' --set 'budget=64' "
                           "--set 'seed=0,1'"})
    EXPECT_NE(array.find(line), std::string::npos) << line << "\n" << array;
  for (const char* line : {"'/opt/kv bench/kvbench' merge 'results/runs/smoke.db'",
                           "'results/runs/smoke.shard-0-of-3.db'",
                           "'results/runs/smoke.shard-2-of-3.db'", "--skip-missing",
                           "--suite 'my suite.json'", "#SBATCH --partition=gpu\n"})
    EXPECT_NE(merge.find(line), std::string::npos) << line << "\n" << merge;
  EXPECT_EQ(merge.find("--gpus-per-task"), std::string::npos) << "the merge needs no GPU";
  EXPECT_EQ(merge.find("--array"), std::string::npos);
  EXPECT_EQ(array.find("--redo-changed-models"), std::string::npos);
  SlurmOptions redo = o;
  redo.redo_changed_models = true;
  EXPECT_NE(array_script(redo).find("--threads 2 --redo-changed-models\n"), std::string::npos)
      << array_script(redo);
  EXPECT_EQ(shard_db_path(o, 1), "results/runs/smoke.shard-1-of-3.db");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  // Both are valid bash, and the array task's database follows SLURM_ARRAY_TASK_ID.
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"a.sh", array},
                                   {"m.sh", merge}}) {
    std::ofstream(dir.file(name)) << text;
    EXPECT_EQ(std::system(("bash -n " + dir.file(name)).c_str()), 0) << text;
  }
  std::string probe = array.substr(0, array.find("exec "));
  std::ofstream(dir.file("probe.sh")) << probe << "printf %s \"$db\" > " << dir.file("db.txt")
                                      << "\n";
  ASSERT_EQ(std::system(("SLURM_ARRAY_TASK_ID=2 bash " + dir.file("probe.sh") + " 2>/dev/null")
                            .c_str()),
            0);
  std::ifstream in(dir.file("db.txt"));
  std::string db;
  std::getline(in, db);
  EXPECT_EQ(db, "results/runs/smoke.shard-2-of-3.db");
  EXPECT_NE(std::system(("bash " + dir.file("probe.sh") + " 2>/dev/null").c_str()), 0)
      << "outside an array task the script refuses to run";
}

// sbatch splits an #SBATCH value at blanks and expands '%' in file names, and a newline would
// start a script line of its own: such values are refused, naming the flag.
TEST(SlurmScripts, ValuesSbatchWouldSplitOrExpandAreRefused) {
  SlurmOptions o;
  o.suite = "smoke";
  o.suite_name = "smoke";
  o.kvbench = "/opt/kvbench";
  o.workdir = "/work/dir";
  o.script_dir = "/work/dir/results/slurm/smoke-2shards";
  o.merged_db = "results/runs/smoke.db";
  o.job_name = "kvb-smoke";
  EXPECT_NO_THROW(array_script(o));
  const std::vector<std::pair<std::function<void(SlurmOptions&)>, std::string>> edits = {
      {[](SlurmOptions& s) { s.workdir = "/work/my dir"; }, "--chdir"},
      {[](SlurmOptions& s) { s.script_dir = "/work/100%"; }, "--dir"},
      {[](SlurmOptions& s) { s.job_name = "a'b"; }, "--job-name"},
      {[](SlurmOptions& s) { s.partition = "gpu\nrm -rf x"; }, "--partition"},
      {[](SlurmOptions& s) { s.mem = "16 G"; }, "--mem"},
      {[](SlurmOptions& s) { s.extra_sbatch = {"--qos=a\necho x"}; }, "--sbatch-option"},
      {[](SlurmOptions& s) { s.merged_db = "a\nb.db"; }, "control character"}};
  for (const auto& [edit, named] : edits) {
    SlurmOptions bad = o;
    edit(bad);
    for (auto script : {array_script, merge_script}) {
      try {
        script(bad);
        ADD_FAILURE() << "accepted an edit naming " << named;
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace kvb
