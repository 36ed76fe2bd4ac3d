// The kvbench binary, run as a child process: exit codes (0 ok, 1 failures recorded, 2 usage or
// input error), help texts, one-line errors, nothing written on bad input, and a run killed with
// SIGKILL that resumes without duplicates.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "datasets/dataset.h"
#include "engine/decode_graphs.h"
#include "engine/model/llama_model.h"
#include "engine/model/model_config.h"
#include "harness/store/result_store.h"
#include "harness/suite/suite.h"
#include "methods/method.h"
#include "tests/cli/kvbench_process.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using nlohmann::json;
using test::contains, test::describe, test::kvbench, test::kvbench_all, test::lines,
    test::lines_with, test::Output, test::read_file, test::spawn, test::wait_for,
    test::write_suite;

json passkey(int64_t context_length) {
  return {{"name", "passkey"},
          {"params", {{"context_length", context_length}, {"samples", 1}, {"max_new_tokens", 2}}}};
}

// random-tiny, passkey at 384 tokens, 1 sample: full + streaming_llm @ 32 (2 cells, ~0.2 s).
json small_suite(const std::string& name) {
  return {{"name", name},
          {"models", {"random-tiny"}},
          {"datasets", {passkey(384)}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32}}};
}

TEST(CliUsage, UsageErrors) {
  test::TempDir dir;
  const std::vector<Output> r = kvbench_all({{},
                                             {"frobnicate"},
                                             {"run", "smoke", "--no-such-option"},
                                             {"run", "smoke", "--threads", "-1"}},
                                            dir.path());
  for (const Output& o : r) EXPECT_EQ(o.code, 2) << describe(o);
  EXPECT_FALSE(r[0].err.empty() && r[0].out.empty()) << "no subcommand: nothing said";
  EXPECT_FALSE(std::filesystem::exists(dir.file("results")));
}

// Usage mistakes get one line in the style of the input errors: the subcommand, what is wrong,
// the nearest valid name, where to read more.
TEST(CliUsage, MessagesNameTheMistakeAndSuggestTheFix) {
  test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{}, {"kvbench: error: no command given; commands: run, list,", "kvbench --help"}},
      {{"runn", "smoke"}, {"unknown command \"runn\" (did you mean run?)", "commands: run,"}},
      {{"frobnicate"}, {"unknown command \"frobnicate\"; commands: run,"}},
      {{"list"}, {"list: missing WHAT (methods | datasets | suites | config-keys)",
                  "see kvbench list --help"}},
      {{"list", "method"}, {"list: what: \"method\" is not one of methods, datasets, suites, "
                            "config-keys (did you mean methods?)"}},
      {{"run"}, {"run: missing SUITE ("}},
      {{"run", "smoke", "--threads", "-1"},
       {"run: --threads: -1 is negative; expected 0 or more (0: all cores)"}},
      {{"run", "smoke", "--threads", "two"}, {"run: --threads: \"two\" is not a number"}},
      {{"run", "smoke", "--fersh"}, {"run: unknown option --fersh (did you mean --fresh?)"}},
      {{"report", "--db"}, {"report: --db needs a value"}},
      {{"plan", "smoke", "--shards", "0"}, {"plan: --shards: 0 is not positive"}},
      // 100000 threads took minutes to start, printing nothing.
      {{"run", "smoke", "--threads", "100000"}, {"run: --threads: 100000 is more than ", " cores)"}},
      // CLI11's own checks said "Value 0 not in range 0.000000 to 1797693...".
      {{"run", "smoke", "--workers", "0"}, {"run: --workers: 0 is not positive"}},
      {{"samples", "smoke", "-n", "-1"}, {"samples: ", "-1 is negative"}},
      // Flags that changed nothing were ignored.
      {{"run", "smoke", "--devices", "0,1"}, {"--devices: names the GPU of each worker"}},
      {{"reproduce", "clusterkv_table1", "--data", "/tmp"}, {"--data: the LongBench files"}},
      {{"generate", "--model", "random-tiny", "--prompt", "a", "--budget", "5"},
       {"--budget: method full takes no budget"}},
  };
  std::vector<std::vector<std::string>> invocations;
  for (const auto& c : cases) invocations.push_back(c.first);
  const std::vector<Output> r = kvbench_all(invocations, dir.path());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(r[i].code, 2) << describe(r[i]);
    EXPECT_EQ(lines(r[i].err), 1u) << describe(r[i]);
    EXPECT_LT(r[i].err.size(), 300u) << describe(r[i]);
    EXPECT_EQ(r[i].err.rfind("kvbench: error: ", 0), 0u) << describe(r[i]);
    for (const std::string& part : cases[i].second) EXPECT_TRUE(contains(r[i].err, part)) << describe(r[i]);
  }
}

// A --set value is blamed on the flag; a suite's missing shared material names where it was
// looked for and how to point elsewhere.
TEST(CliRun, ErrorsNameTheFlagAndTheSharedFolder) {
  test::TempDir dir;
  const Output bad_set = kvbench({"run", "smoke", "--set", "budget=-5"}, dir.path());
  EXPECT_EQ(bad_set.code, 2) << describe(bad_set);
  EXPECT_TRUE(contains(bad_set.err, "kvbench: error: --set budget=-5: budget -5 must be > 0"))
      << describe(bad_set);
  EXPECT_FALSE(contains(bad_set.err, "smoke.json")) << describe(bad_set);

  // --dtype and --chat-template are blamed as typed; a bad database is one line, nothing before.
  std::ofstream(dir.file("notdb.db")) << "not sqlite";
  const std::vector<Output> r = kvbench_all(
      {{"run", "smoke", "--dtype", "f8"},
       {"generate", "--model", "random-tiny", "--prompt", "hi", "--chat-template", "chatm"},
       {"run", "smoke", "--db", dir.file("notdb.db")}},
      dir.path());
  for (const Output& o : r) EXPECT_EQ(o.code, 2) << describe(o);
  for (const Output& o : r) EXPECT_EQ(lines(o.err), 1u) << describe(o);
  EXPECT_TRUE(contains(r[0].err, "kvbench: error: --dtype: \"f8\" is not one of")) << describe(r[0]);
  EXPECT_TRUE(contains(r[1].err, "--chat-template")) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].err, "auto")) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].err, "did you mean chatml?")) << describe(r[1]);
  EXPECT_TRUE(contains(r[2].err, "not a kvbench results database")) << describe(r[2]);

  // `auto` on a model without a template runs as `none`, and says so.
  const Output untemplated = kvbench(
      {"generate", "--model", "random-tiny", "--prompt", "hi", "--chat-template", "auto",
       "--max-new", "1"}, dir.path());
  EXPECT_EQ(untemplated.code, 0) << describe(untemplated);
  EXPECT_TRUE(contains(untemplated.err, "the model has no chat template")) << describe(untemplated);

  test::ScopedSharedFolder shared(dir.file("nowhere"));
  const Output missing = kvbench({"run", "recall"}, dir.path());
  EXPECT_EQ(missing.code, 2) << describe(missing);
  EXPECT_EQ(lines(missing.err), 1u) << describe(missing);
  for (const std::string& part : {std::string("${SHARED}/models/stories260K"),
                                  dir.file("nowhere/models/stories260K"), std::string("set KVBENCH_SHARED")})
    EXPECT_TRUE(contains(missing.err, part)) << part << " missing: " << describe(missing);
  EXPECT_FALSE(std::filesystem::exists(dir.file("results")));
}

TEST(CliUsage, HelpOfEverySubcommand) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::vector<std::string>>> options = {
      {"run", {"suite", "--db", "--set", "--fresh", "--threads", "--cache-dir"}},
      {"reproduce", {"name", "--model", "--data", "--db", "--cache-dir", "--context-sharing"}},
      {"list", {"what", "methods", "datasets", "suites"}},
      {"show", {"run", "--db", "last"}},
      {"samples", {"suite", "--set", "--dataset", "--model", "--seed", "--samples", "--full",
                   "--json"}},
      {"generate",
       {"--model", "--prompt", "--max-new", "--method", "--budget", "--chat-template", "--threads",
        "--cache-dir"}},
      {"inspect", {"--model", "--method", "--budget", "--out", "--cache-dir"}},
      {"forward", {"--model", "--tokens", "--out", "--all-positions", "--threads",
                   "random-llama3-8b"}},  // every built-in model named
      {"train-tiny", {"--out", "--seed", "--threads", "--wordlists", "--haystack", "--scale"}},
  };
  std::vector<std::vector<std::string>> invocations = {{"--help"}};
  for (const auto& [sub, opts] : options) invocations.push_back({sub, "--help"});
  const std::vector<Output> r = kvbench_all(invocations, dir.path());

  EXPECT_EQ(r[0].code, 0) << describe(r[0]);
  for (const auto& [sub, opts] : options)
    EXPECT_TRUE(contains(r[0].out, sub)) << sub << " missing from:\n" << r[0].out;
  for (size_t i = 0; i < options.size(); ++i) {
    const auto& [sub, opts] = options[i];
    const Output& o = r[i + 1];
    EXPECT_EQ(o.code, 0) << sub << ": " << describe(o);
    for (const auto& opt : opts)
      EXPECT_TRUE(contains(o.out, opt)) << sub << " --help does not mention " << opt << ":\n"
                                        << o.out;
  }
}

// train-tiny refuses, before any work, a non-empty output folder and missing data sources.
TEST(CliTrainTiny, BadArgumentsAreOneLineErrors) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("full"));
  std::ofstream(dir.file("full/x")) << "keep";
  const std::vector<Output> r = kvbench_all(
      {{"train-tiny", "--out", dir.file("full")},
       {"train-tiny", "--out", dir.file("new"), "--wordlists", dir.file("none")},
       {"train-tiny", "--out", dir.file("new"), "--wordlists", dir.path(), "--haystack", dir.file("none.json")},
       {"train-tiny", "--out", dir.file("new"), "--scale", "0"},
       {"train-tiny", "--out", dir.file("new"), "--dtype", "f16"},
       {"train-tiny", "--out", dir.file("new"), "--device", "cuda:7"}},
      dir.path());
  for (const Output& o : r) EXPECT_EQ(o.code, 2) << describe(o);
  for (const Output& o : r) EXPECT_EQ(lines(o.err), 1u) << describe(o);
  EXPECT_TRUE(contains(r[4].err, "--dtype f16: training takes f32 or bf16")) << describe(r[4]);
  EXPECT_TRUE(contains(r[5].err, "--device")) << describe(r[5]);
  EXPECT_TRUE(contains(r[0].err, "not an empty folder")) << describe(r[0]);
  EXPECT_TRUE(contains(r[1].err, "--wordlists")) << describe(r[1]);
  EXPECT_TRUE(contains(r[2].err, "--haystack")) << describe(r[2]);
  EXPECT_FALSE(std::filesystem::exists(dir.file("new")));
}

// --cuda-graphs where kvbench cannot capture CUDA graphs (no CUDA kernels built in): one
// line, exit 2, nothing written, for both commands that take it.
TEST(CliCudaGraphs, RefusedByABuildWithoutCuda) {
  if (DecodeGraphs::available()) GTEST_SKIP() << "skipped: this build can capture CUDA graphs";
  test::TempDir dir;
  const std::string db = dir.file("g.db");
  const std::vector<Output> r = kvbench_all(
      {{"run", "smoke", "--db", db, "--cuda-graphs"},
       {"generate", "--model", "random-tiny", "--prompt", "hi", "--cuda-graphs"}},
      dir.path());
  for (const Output& o : r) {
    EXPECT_EQ(o.code, 2) << describe(o);
    EXPECT_EQ(lines(o.err), 1u) << describe(o);
    EXPECT_TRUE(contains(o.err, "--cuda-graphs: this kvbench is built without its CUDA kernels"))
        << describe(o);
  }
  EXPECT_FALSE(std::filesystem::exists(db));
}

// generate --profile: the decode steps after the warm-up recorded per phase into a TSV file;
// too few steps, or a file that cannot be written, refused before the run.
TEST(CliGenerate, ProfileWritesEachPhaseOrRefusesBeforeTheRun) {
  test::TempDir dir;
  const std::string tsv = dir.file("p.tsv");
  const std::vector<std::string> base = {"generate", "--model", "kvbench-tiny", "--prompt",
                                         "Once upon a time", "--method", "quest", "--budget",
                                         "32"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<Output> r = kvbench_all(
      {with({"--max-new", "8", "--profile", tsv}),
       with({"--max-new", "12", "--profile", dir.file("none/p.tsv")}),
       with({"--max-new", "12", "--profile", tsv})},
      dir.path());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r[i].code, 2) << describe(r[i]);
    EXPECT_EQ(lines(r[i].err), 1u) << describe(r[i]);
  }
  EXPECT_TRUE(contains(r[0].err, "--profile: needs --max-new > 8")) << describe(r[0]);
  EXPECT_TRUE(contains(r[1].err, "cannot write")) << describe(r[1]);
  EXPECT_EQ(r[2].code, 0) << describe(r[2]);
  EXPECT_TRUE(contains(r[2].err, "profile of decode steps 9..12")) << describe(r[2]);
  std::ifstream in(tsv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "phase\tkind\tname\tcalls_per_step\tus_per_step");
  std::set<std::string> phases;
  while (std::getline(in, line)) phases.insert(line.substr(0, line.find('\t')));
  for (const std::string phase : {"decode", "select", "attention"})
    EXPECT_TRUE(phases.count(phase)) << phase << " missing from " << tsv;
  EXPECT_FALSE(std::filesystem::exists(tsv + ".tmp"));
}

// --profile-prefill: the prefill's operators in its phases (SnapKV compresses the 29-token
// prompt to B = 12 in its prefill hook), the decode not recorded; an unwritable file is refused
// before the run, as is a budget the method cannot hold (SnapKV's window of 8 needs B > 8; it
// once reached the prefill and failed inside ATen, exit 3).
TEST(CliGenerate, ProfilePrefillRecordsThePrefillsPhases) {
  test::TempDir dir;
  const std::string tsv = dir.file("prefill.tsv");
  auto args = [&](const std::string& budget, const std::string& file) {
    return std::vector<std::string>{
        "generate", "--model", "kvbench-tiny", "--prompt",
        "Once upon a time there was a little girl named Lily who liked to play", "--max-new", "3",
        "--method", "snapkv", "--budget", budget, "--profile-prefill", file};
  };
  const std::vector<Output> r = kvbench_all(
      {args("12", dir.file("none/p.tsv")), args("4", tsv), args("12", tsv)}, dir.path());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r[i].code, 2) << describe(r[i]);
    EXPECT_EQ(lines(r[i].err), 1u) << describe(r[i]);
  }
  EXPECT_TRUE(contains(r[0].err, "--profile-prefill")) << describe(r[0]);
  EXPECT_TRUE(contains(r[1].err, "snapkv.window: window 8 must be smaller than the budget 4"))
      << describe(r[1]);
  ASSERT_EQ(r[2].code, 0) << describe(r[2]);
  EXPECT_TRUE(contains(r[2].err, "profile of the prefill")) << describe(r[2]);
  std::ifstream in(tsv);
  std::string line;
  std::set<std::string> phases, method_ops;
  std::string outside;  // rows outside every phase, for the message (seen once, not reproduced)
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    const std::string phase = line.substr(0, line.find('\t'));
    phases.insert(phase);
    if (phase == "none") outside += line + "\n";
    if (phase == "prefill_method" && line.find("\top\t(kvbench code)") == std::string::npos)
      method_ops.insert(line);
  }
  EXPECT_EQ(phases, (std::set<std::string>{"prefill", "prefill_attention", "prefill_method"}))
      << tsv << "\n" << outside;
  EXPECT_FALSE(method_ops.empty()) << "SnapKV's scoring not recorded in prefill_method";
}

// The plan's columns are as wide as their entries: the longest model name stays apart from the
// seed after it, and every row's seed starts where the header's does.
TEST(CliPlan, ColumnsHoldTheirLongestEntry) {
  test::TempDir dir;
  const Output r = kvbench({"plan", "latency_gpu_32k", "--set", "method=full,streaming_llm"}, dir.path());
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "random-llama3-8b  0\n")) << r.out;
  std::istringstream in(r.out);
  std::string line;
  size_t seed_column = std::string::npos, rows = 0;
  while (std::getline(in, line)) {
    if (line.rfind("id ", 0) == 0) seed_column = line.find("seed");
    if (seed_column == std::string::npos || line.find("random-llama3-8b") == std::string::npos) continue;
    EXPECT_EQ(line.size(), seed_column + 1) << line;  // the seed, one digit, under "seed"
    ++rows;
  }
  EXPECT_EQ(rows, 2u) << r.out;
}

// Each shard's command carries the plan's --set values: without them it would split other cells.
TEST(CliPlan, ShardCommandsCarryTheSetValues) {
  test::TempDir dir;
  const Output r = kvbench({"plan", "smoke", "--shards", "2", "--set", "budget=32,64"}, dir.path());
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "(kvbench run 'smoke' --set 'budget=32,64' --shard 1/2)\n")) << r.out;
}

TEST(CliRun, UnknownSuiteIsOneLineError) {
  test::TempDir dir;
  const Output r = kvbench({"run", "nosuchsuite"}, dir.path());
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(lines(r.err), 1u) << describe(r);
  EXPECT_TRUE(contains(r.err, "kvbench: error:")) << r.err;
  EXPECT_TRUE(contains(r.err, "nosuchsuite")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("results")));
}

TEST(CliRun, MalformedSuiteWritesNothing) {
  test::TempDir dir;
  json bad_budget = small_suite("bad");
  bad_budget["budgets"] = {0};
  json bad_method = small_suite("bad");
  bad_method["methods"] = {"full", "nosuch_method"};
  json bad_config = small_suite("bad");
  bad_config["methods"] = {{{"name", "streaming_llm"}, {"config", {{"sink", 4}}}}};
  const std::string broken = dir.file("broken.json");
  std::ofstream(broken) << "{\"name\": \"x\",";
  const std::string good = write_suite(dir, "good.json", small_suite("good"));
  const std::string db = dir.file("out/bad.db");
  // (suite file, what its one-line error must contain)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {write_suite(dir, "bad0.json", bad_budget), "$.budgets"},
      {write_suite(dir, "bad1.json", bad_method), "$.methods[1].name"},
      {write_suite(dir, "bad2.json", bad_config), "$.methods[0].config"},
      {broken, "malformed JSON"},
  };
  std::vector<std::vector<std::string>> invocations;
  for (const auto& c : cases) invocations.push_back({"run", c.first, "--db", db});
  invocations.push_back({"run", good, "--db", db, "--set", "budget=abc"});
  invocations.push_back({"run", cases[0].first});  // default database under results/
  const std::vector<Output> r = kvbench_all(invocations, dir.path());

  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(r[i].code, 2) << describe(r[i]);
    EXPECT_EQ(lines(r[i].err), 1u) << describe(r[i]);
    EXPECT_TRUE(contains(r[i].err, cases[i].first)) << "file not named: " << r[i].err;
    EXPECT_TRUE(contains(r[i].err, cases[i].second)) << r[i].err;
    EXPECT_TRUE(r[i].out.empty()) << r[i].out;
  }
  EXPECT_TRUE(contains(r[1].err, cases[1].first + ": $.methods[1].name")) << r[1].err;
  EXPECT_EQ(r[4].code, 2) << describe(r[4]);
  EXPECT_TRUE(contains(r[4].err, "--set budget")) << r[4].err;
  EXPECT_EQ(r[5].code, 2) << describe(r[5]);
  EXPECT_FALSE(std::filesystem::exists(db)) << "database written for a bad suite";
  EXPECT_FALSE(std::filesystem::exists(dir.file("out"))) << "database folder created";
  EXPECT_FALSE(std::filesystem::exists(dir.file("results"))) << "results/ created";
}

// Tasks given a GPU run on it unless a device is named; cuda without a GPU is refused. The merge
// job names the same cells (the same --set).
TEST(CliSlurm, TasksWithGpusRunOnCudaUnlessToldOtherwise) {
  test::TempDir dir;
  const std::string file = write_suite(dir, "gpus.json", small_suite("gpus"));
  json on_cpu = small_suite("oncpu");
  on_cpu["devices"] = {"cpu"};  // named in the file: kept
  const std::string cpu_file = write_suite(dir, "oncpu.json", on_cpu);
  const std::vector<Output> r = kvbench_all(
      {{"slurm", file, "--shards", "2", "--gpus-per-task", "1", "--dir", dir.file("a")},
       {"slurm", file, "--shards", "2", "--gpus-per-task", "1", "--device", "cpu", "--dir",
        dir.file("b")},
       {"slurm", file, "--shards", "2", "--device", "cuda:1", "--dir", dir.file("c")},
       {"slurm", file, "--shards", "2", "--set", "device=cuda", "--dir", dir.file("d")},
       {"slurm", file, "--shards", "2", "--gpus-per-task", "1", "--set", "devices=cpu", "--dir",
        dir.file("e")},
       {"slurm", cpu_file, "--shards", "2", "--gpus-per-task", "1", "--dir", dir.file("f")}},
      dir.path());
  EXPECT_EQ(r[0].code, 0) << describe(r[0]);
  EXPECT_TRUE(contains(r[0].out, "note: --gpus-per-task: the cells run on cuda")) << r[0].out;
  for (const char* script : {"/gpus.array.sbatch", "/gpus.merge.sbatch"})
    EXPECT_TRUE(contains(read_file(dir.file("a") + script), "--set 'device=cuda'")) << script;
  EXPECT_EQ(r[1].code, 0) << describe(r[1]);
  EXPECT_FALSE(contains(r[1].out, "note:")) << r[1].out;
  EXPECT_TRUE(contains(read_file(dir.file("b") + "/gpus.array.sbatch"), "--set 'device=cpu'"));
  for (int i : {2, 3}) {
    EXPECT_EQ(r[size_t(i)].code, 2) << describe(r[size_t(i)]);
    EXPECT_TRUE(contains(r[size_t(i)].err, "the array tasks get no GPU (add --gpus-per-task N)"))
        << r[size_t(i)].err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("c")));
  for (int i : {4, 5}) {
    EXPECT_EQ(r[size_t(i)].code, 0) << describe(r[size_t(i)]);
    EXPECT_FALSE(contains(r[size_t(i)].out, "note:")) << r[size_t(i)].out;
  }
  EXPECT_FALSE(contains(read_file(dir.file("e") + "/gpus.array.sbatch"), "device=cuda"));
  EXPECT_FALSE(contains(read_file(dir.file("f") + "/oncpu.array.sbatch"), "device=cuda"));
}

// Output paths that cannot be written, and Slurm tasks that do not exist: one line, exit 2.
TEST(CliOutputs, UnwritablePathsAndMissingTasksAreOneLineErrors) {
  test::TempDir dir;
  const std::string file = write_suite(dir, "adhoc.json", small_suite("adhoc"));
  const std::string db = dir.file("adhoc.db");
  ASSERT_EQ(kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path()).code, 0);
  std::filesystem::create_directories(dir.file("a_folder"));
  std::ofstream(dir.file("a_file")) << "x";
  const std::vector<Output> r = kvbench_all(
      {{"baseline", "--db", db, "--out", dir.file("a_folder")},
       {"report", "--db", db, "--out", dir.file("a_file")},
       {"plan", file, "--out", dir.file("no/such/folder/plan.json")},
       {"slurm", file, "--shards", "2", "--submit", "--array", "5", "--sbatch", "/bin/false",
        "--dir", dir.file("slurm")},
       {"slurm", file, "--shards", "2", "--submit", "--array", "1-0", "--sbatch", "/bin/false",
        "--dir", dir.file("slurm")}},
      dir.path());
  for (const Output& o : r) EXPECT_EQ(o.code, 2) << describe(o);
  for (const Output& o : r) EXPECT_EQ(lines(o.err), 1u) << describe(o);
  EXPECT_TRUE(contains(r[0].err, dir.file("a_folder") + ": cannot write")) << describe(r[0]);
  EXPECT_TRUE(contains(r[1].err, dir.file("a_file"))) << describe(r[1]);
  EXPECT_TRUE(contains(r[2].err, "plan.json: cannot write")) << describe(r[2]);
  EXPECT_TRUE(contains(r[3].err, "--array 5: expected task ids of shards 0..1")) << describe(r[3]);
  EXPECT_TRUE(contains(r[4].err, "--array 1-0")) << describe(r[4]);
  EXPECT_FALSE(std::filesystem::exists(dir.file("a_folder.tmp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("slurm")));

  // The commands that only read a database do not make one of an empty file.
  std::ofstream(dir.file("empty.db")).close();
  const std::vector<Output> readers = kvbench_all(
      {{"show", "--db", dir.file("empty.db")},
       {"report", "--db", dir.file("empty.db"), "--out", dir.file("rep")},
       {"baseline", "--db", dir.file("empty.db"), "--out", dir.file("b.json")}},
      dir.path());
  for (const Output& o : readers) {
    EXPECT_EQ(o.code, 2) << describe(o);
    EXPECT_TRUE(contains(o.err, "empty.db: empty file, not a kvbench results database")) << describe(o);
  }
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty.db")), 0u);
}

TEST(CliRun, GoodSuiteRunsAndShowPrintsTable) {
  test::TempDir dir;
  const std::string file = write_suite(dir, "adhoc.json", small_suite("adhoc"));
  const std::string db = dir.file("adhoc.db");
  const Output r = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "2 ran, 0 already complete, 0 failed")) << r.out;
  ASSERT_TRUE(std::filesystem::exists(db));

  const Output show = kvbench({"show", "--db", db, "last"}, dir.path());
  EXPECT_EQ(show.code, 0) << describe(show);
  for (const char* part : {"suite: adhoc", "status: complete", "method", "budget", "full",
                           "streaming_llm", "passkey", "random-tiny", "passkey_accuracy"})
    EXPECT_TRUE(contains(show.out, part)) << "no \"" << part << "\" in:\n" << show.out;
  // Two table rows, both complete.
  size_t complete_rows = 0;
  std::istringstream in(show.out);
  for (std::string line; std::getline(in, line);)
    if (contains(line, "random-tiny") && contains(line, " complete ")) ++complete_rows;
  EXPECT_EQ(complete_rows, 2u) << show.out;
  const Output config = kvbench({"show", "--db", db, "last", "--config"}, dir.path());
  EXPECT_EQ(config.code, 0) << describe(config);
  for (const char* part : {"suite JSON:", "\"name\": \"adhoc\"", "cell configs:", "\"method\""})
    EXPECT_TRUE(contains(config.out, part)) << "no \"" << part << "\" in:\n" << config.out;
  const std::vector<Output> more = kvbench_all({{"show", "--db", db},
                                                {"show", "--db", db, "1"},
                                                {"show", "--db", db, "abc"},
                                                {"show", "--db", db, "99"}},
                                               dir.path());
  EXPECT_EQ(more[0].out, show.out);  // "last" is the default
  EXPECT_EQ(more[1].out, show.out);  // run 1 is the last one
  EXPECT_EQ(more[2].code, 2) << describe(more[2]);
  EXPECT_EQ(more[3].code, 2) << describe(more[3]);
  // A second run (after the shows: it adds a run) skips both cells.
  const Output again = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  EXPECT_EQ(again.code, 0) << describe(again);
  EXPECT_TRUE(contains(again.out, "0 ran, 2 already complete, 0 failed")) << again.out;
}

// A model folder saved over with other weights: `kvbench run` (alone or with --workers) is
// refused before anything runs or is announced, exit 2, the error one line naming the database; with
// --redo-changed-models the cells are redone; then a run skips them.
TEST(CliRun, AChangedModelIsRefusedUnlessRedone) {
  test::TempDir dir;
  const std::string model = dir.file("model");
  save_model(*LlamaModel::random(random_tiny_config(), 1), model);
  json suite = small_suite("changed");
  suite["models"] = {model};
  const std::string file = write_suite(dir, "changed.json", suite);
  const std::string db = dir.file("changed.db");
  const std::vector<std::string> run = {"run", file, "--db", db, "--threads", "1"};
  ASSERT_EQ(kvbench(run, dir.path()).code, 0);
  std::filesystem::remove_all(model);
  save_model(*LlamaModel::random(random_tiny_config(), 2), model);
  const std::string error = "kvbench: error: " + db + ": 2 cells of this run stored results of "
                            "another model under the name they give it (" + model + " is now v1:";
  for (const std::vector<std::string>& extra : {std::vector<std::string>{},
                                                std::vector<std::string>{"--workers", "2"}}) {
    std::vector<std::string> args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    const Output refused = kvbench(args, dir.path());
    EXPECT_EQ(refused.code, 2) << describe(refused);
    ASSERT_TRUE(contains(refused.err, error)) << describe(refused);
    EXPECT_EQ(refused.err.rfind(error, 0), 0u) << describe(refused);  // nothing before it
    EXPECT_EQ(lines(refused.err), 1u) << describe(refused);
  }
  std::vector<std::string> redo = run;
  redo.insert(redo.end(), {"--redo-changed-models", "--workers", "2"});
  const Output redone = kvbench(redo, dir.path());
  EXPECT_EQ(redone.code, 0) << describe(redone);
  EXPECT_TRUE(contains(redone.err, "--redo-changed-models: forgot 2 results of another model"))
      << describe(redone);
  EXPECT_TRUE(contains(redone.out, "2 ran, 0 already complete, 0 failed")) << redone.out;
  const Output again = kvbench(run, dir.path());
  EXPECT_EQ(again.code, 0) << describe(again);
  EXPECT_TRUE(contains(again.out, "0 ran, 2 already complete, 0 failed")) << again.out;
}

TEST(CliRun, FailingCellExitsOne) {
  test::TempDir dir;
  json suite = small_suite("failing");
  // Valid JSON, but 32 tokens cannot hold the passkey template: fails when the cells run.
  suite["datasets"] = {passkey(32), passkey(384)};
  const std::string file = write_suite(dir, "failing.json", suite);
  const std::string db = dir.file("failing.db");
  const Output r = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_TRUE(contains(r.out, "2 ran, 0 already complete, 2 failed")) << r.out;
  EXPECT_TRUE(contains(r.out, "context_length 32 is too short")) << r.out;
  const Output show = kvbench({"show", "--db", db}, dir.path());
  EXPECT_EQ(show.code, 0) << describe(show);
  EXPECT_TRUE(contains(show.out, " failed ")) << show.out;
  EXPECT_TRUE(contains(show.out, " complete ")) << show.out;
  EXPECT_TRUE(contains(show.out, "status: failures")) << show.out;
}

TEST(CliList, MethodsDatasetsSuites) {
  test::TempDir dir;
  const std::vector<Output> r = kvbench_all(
      {{"list", "methods"}, {"list", "datasets"}, {"list", "suites"}, {"list", "foo"}, {"list"},
       {"list", "config-keys"}},
      dir.path());
  EXPECT_EQ(r[5].code, 0) << describe(r[5]);
  for (const ConfigKey& k : config_key_table())
    EXPECT_TRUE(contains(r[5].out, std::string("  ") + k.key + ": ")) << k.key << " not listed";
  EXPECT_EQ(r[0].code, 0) << describe(r[0]);
  for (const char* m : {"full", "streaming_llm", "oracle_topk", "defaults:", "\"sinks\":4"})
    EXPECT_TRUE(contains(r[0].out, m)) << m << " missing:\n" << r[0].out;
  for (const MethodInfo* m : method_registry().all()) {
    EXPECT_TRUE(contains(r[0].out, m->name + "  [")) << m->name << " not listed";
    for (const FieldDoc& f : m->config_fields)  // every config field, with its doc line
      EXPECT_TRUE(contains(r[0].out, "      " + f.name + "  " + f.type + " = " +
                                         f.default_value + "  " + f.doc + "\n"))
          << m->name << "." << f.name << " not documented:\n" << r[0].out;
  }
  EXPECT_TRUE(contains(r[0].out, "      sinks  int = 4  first tokens always kept")) << r[0].out;
  EXPECT_TRUE(contains(r[0].out, "      clusters  int or \"L/<k>\" = \"L/80\"  ")) << r[0].out;

  EXPECT_EQ(r[1].code, 0) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].out, "passkey")) << r[1].out;
  // Every registered dataset is listed with its defaults, those with required params as well.
  for (const DatasetInfo* d : dataset_registry().all())
    EXPECT_TRUE(contains(r[1].out, d->name + "  ")) << d->name << " not listed:\n" << r[1].out;
  EXPECT_FALSE(contains(r[1].out, "defaults: none")) << r[1].out;
  for (const DatasetInfo* d : dataset_registry().all()) {  // what is not faithful yet, where known
    if (!d->fidelity.empty()) {
      EXPECT_TRUE(contains(r[1].out, "    fidelity: " + d->fidelity + "\n")) << d->name;
    }
  }
  EXPECT_TRUE(contains(r[1].out, "    fidelity: chat_template reference (the default) wraps Llama-2"))
      << r[1].out;
  const std::string niah = r[1].out.substr(r[1].out.find("niah_single_1  "));
  EXPECT_TRUE(contains(niah.substr(0, niah.find("\n", niah.find("required:"))),
                       "\"context_length\":4096"))
      << niah;
  EXPECT_TRUE(contains(niah, "    required: wordlist_dir (no default")) << niah;
  EXPECT_TRUE(contains(niah, "      wordlist_dir  string = required  folder with")) << niah;
  EXPECT_TRUE(contains(niah, "      max_new_tokens  int = ")) << niah;

  // Every built-in suite is listed, also one that does not validate from this directory.
  EXPECT_EQ(r[2].code, 0) << describe(r[2]);
  EXPECT_TRUE(contains(r[2].out, "smoke  (5 cells)")) << r[2].out;
  for (const std::string& name : builtin_suite_names())
    EXPECT_TRUE(contains(r[2].out, name + "  (")) << name << " not listed:\n" << r[2].out;

  EXPECT_EQ(r[3].code, 2) << describe(r[3]);
  EXPECT_EQ(r[4].code, 2) << describe(r[4]);
}

TEST(CliShow, MissingDatabase) {
  test::TempDir dir;
  std::ofstream(dir.file("text.db")) << std::string(4096, 'x');
  const std::vector<Output> r = kvbench_all({{"show", "--db", dir.file("missing.db")},
                                             {"show", "--db", dir.file("text.db")},
                                             {"show"}},
                                            dir.path());
  EXPECT_EQ(r[0].code, 2) << describe(r[0]);
  EXPECT_TRUE(contains(r[0].err, "missing.db")) << r[0].err;
  EXPECT_EQ(lines(r[0].err), 1u) << describe(r[0]);
  EXPECT_FALSE(std::filesystem::exists(dir.file("missing.db")));
  // A file that is not a database is an input error too.
  EXPECT_EQ(r[1].code, 2) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].err, "text.db")) << r[1].err;
  EXPECT_EQ(r[2].code, 2) << describe(r[2]);  // --db is required
}

TEST(CliForward, BadTokens) {
  test::TempDir dir;
  const std::string out = dir.file("logits.json");
  const std::vector<Output> r = kvbench_all(
      {{"forward", "--model", "random-tiny", "--tokens", "1,x", "--out", out},
       {"forward", "--model", "random-tiny", "--tokens", "1,5", "--out", out, "--model"},
       {"forward", "--model", "/no/such/model", "--tokens", "1,5", "--out", out},
       {"forward", "--model", "random-tiny", "--tokens", "1,99999", "--out", out}},
      dir.path());
  EXPECT_EQ(r[0].code, 2) << describe(r[0]);
  EXPECT_TRUE(contains(r[0].err, "--tokens")) << r[0].err;
  EXPECT_TRUE(contains(r[0].err, "\"x\"")) << r[0].err;
  EXPECT_EQ(lines(r[0].err), 1u) << describe(r[0]);
  EXPECT_EQ(r[1].code, 2) << describe(r[1]);  // --model without its value
  EXPECT_EQ(r[2].code, 2) << describe(r[2]);
  EXPECT_EQ(r[3].code, 2) << describe(r[3]);  // outside the vocabulary
  EXPECT_TRUE(contains(r[3].err, "--tokens: token id 99999 is outside the model's vocabulary [0, "))
      << describe(r[3]);
  EXPECT_EQ(lines(r[3].err), 1u) << describe(r[3]);
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliForward, WritesLogits) {
  test::TempDir dir;
  const std::string out = dir.file("logits.json"), all = dir.file("all.json");
  const std::vector<Output> r = kvbench_all(
      {{"forward", "--model", "random-tiny", "--tokens", "1,5,9", "--out", out, "--threads", "1"},
       {"forward", "--model", "random-tiny", "--tokens", "1,5,9", "--out", all, "--all-positions",
        "--threads", "1"}},
      dir.path());
  ASSERT_EQ(r[0].code, 0) << describe(r[0]);
  ASSERT_EQ(r[1].code, 0) << describe(r[1]);
  json j = json::parse(read_file(out));
  EXPECT_EQ(j["tokens"], (json{1, 5, 9}));
  ASSERT_TRUE(j["logits"].is_array());
  // One logit per vocabulary entry of random-tiny (its byte-level vocabulary plus specials).
  const size_t vocab = size_t(LlamaModel::from_reference("random-tiny")->config.vocab_size);
  EXPECT_GE(vocab, 259u);
  EXPECT_EQ(j["logits"].size(), vocab);
  EXPECT_TRUE(j["logits"][0].is_number());
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));

  json a = json::parse(read_file(all));
  ASSERT_EQ(a["logits"].size(), 3u);
  ASSERT_EQ(a["logits"][2].size(), vocab);
  // The last position's logits agree with the single-position output.
  for (size_t v = 0; v < vocab; v += 37)
    EXPECT_NEAR(a["logits"][2][v].get<double>(), j["logits"][v].get<double>(), 1e-5) << v;
}

// generate and inspect keep InfiniGen's calibration in --cache-dir when given, and write no
// cache anywhere without it.
TEST(CliGenerate, CacheDirKeepsTheCalibration) {
  test::TempDir dir;
  const std::vector<std::string> infinigen = {"--model", "random-tiny", "--method", "infinigen",
                                              "--budget", "16", "--threads", "1"};
  auto with = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), infinigen.begin(), infinigen.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  const std::string prompt(300, 'a');
  const std::vector<Output> r = kvbench_all(
      {with({"generate"}, {"--prompt", prompt, "--max-new", "2", "--cache-dir", dir.file("gen")}),
       with({"inspect"}, {"--prompt", prompt, "--steps", "2", "--out", dir.file("inspected"),
                          "--cache-dir", dir.file("insp")}),
       with({"generate"}, {"--prompt", prompt, "--max-new", "2"})},
      dir.path());
  for (const Output& o : r) ASSERT_EQ(o.code, 0) << describe(o);
  auto calibrations = [&](const std::string& folder) {
    int n = 0;
    if (std::filesystem::exists(folder))
      for (const auto& entry : std::filesystem::directory_iterator(folder))
        n += entry.path().filename().string().rfind("infinigen-", 0) == 0;
    return n;
  };
  EXPECT_EQ(calibrations(dir.file("gen")), 1);
  EXPECT_EQ(calibrations(dir.file("insp")), 1);
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    entries += entry.is_directory();
  EXPECT_EQ(entries, 3) << "gen, insp and inspected only: no cache without --cache-dir";
}

// A saved random-tiny folder whose config.json gets `edit`.
std::string model_with_config(const test::TempDir& dir, const std::function<void(json&)>& edit) {
  const std::string model = dir.file("model");
  save_model(*LlamaModel::from_reference("random-tiny"), model);
  json config = json::parse(read_file(model + "/config.json"));
  edit(config);
  std::ofstream(model + "/config.json") << config.dump(2);
  return model;
}

// config.json keys kvbench does not know, and rope forms that disagree, are refused with one
// line and exit 2 by every command that loads a model; --allow-unknown-config-keys turns the
// unknown keys into warnings, which `run` stores in the run's provenance.
TEST(CliModelConfig, RefusedUnlessAllowedAndThenRecorded) {
  test::TempDir dir;
  const std::string model = model_with_config(dir, [](json& c) { c["fancy_attention"] = true; });
  test::TempDir other;
  const std::string disagreeing = model_with_config(other, [](json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  });
  json suite = small_suite("configkeys");
  suite["models"] = {model};
  suite["methods"] = {"full"};
  const std::string file = write_suite(dir, "configkeys.json", suite);
  const std::string db = dir.file("k.db");
  const std::vector<Output> r = kvbench_all(
      {{"forward", "--model", model, "--tokens", "1,5", "--out", dir.file("a.json")},
       {"forward", "--model", disagreeing, "--tokens", "1,5", "--out", dir.file("b.json")},
       {"run", file, "--db", db, "--threads", "1"},
       {"forward", "--model", model, "--tokens", "1,5", "--out", dir.file("c.json"),
        "--allow-unknown-config-keys"}},
      dir.path());
  for (int i : {0, 1, 2}) {
    EXPECT_EQ(r[size_t(i)].code, 2) << describe(r[size_t(i)]);
    EXPECT_EQ(lines(r[size_t(i)].err), 1u) << describe(r[size_t(i)]);
  }
  EXPECT_TRUE(contains(r[0].err, model + "/config.json: field 'fancy_attention': unknown key")) << r[0].err;
  EXPECT_TRUE(contains(r[1].err, "'rope_parameters': disagrees with rope_theta/rope_scaling")) << r[1].err;
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused run wrote its database";
  EXPECT_EQ(r[3].code, 0) << describe(r[3]);
  EXPECT_TRUE(contains(r[3].err, "warning: " + model + "/config.json: unknown key 'fancy_attention'"))
      << r[3].err;

  const Output allowed =
      kvbench({"run", file, "--db", db, "--threads", "1", "--allow-unknown-config-keys"}, dir.path());
  EXPECT_EQ(allowed.code, 0) << describe(allowed);
  const Output show = kvbench({"show", "--db", db}, dir.path());
  EXPECT_TRUE(contains(show.out, "warnings: " + model + "/config.json: unknown key 'fancy_attention' "
                                 "ignored (--allow-unknown-config-keys)")) << show.out;
}

// tokenizer_config.json keys kvbench does not know are refused as config.json's are: before a
// run writes anything, and as a stored warning when let through.
TEST(CliModelConfig, UnknownTokenizerConfigKeysRefusedUnlessAllowed) {
  test::TempDir dir;
  const std::string model = model_with_config(dir, [](json&) {});
  json tokenizer_config = json::object();
  if (std::filesystem::exists(model + "/tokenizer_config.json"))
    tokenizer_config = json::parse(read_file(model + "/tokenizer_config.json"));
  tokenizer_config["auto_map"] = {{"AutoTokenizer", {"tokenization_x.XTokenizer", nullptr}}};
  std::ofstream(model + "/tokenizer_config.json") << tokenizer_config.dump(2);
  // A generation setting kvbench does not apply (Qwen2-Instruct's), let through the same way.
  json generation = json::object();
  if (std::filesystem::exists(model + "/generation_config.json"))
    generation = json::parse(read_file(model + "/generation_config.json"));
  generation["repetition_penalty"] = 1.05;
  std::ofstream(model + "/generation_config.json") << generation.dump(2);
  json suite = small_suite("tokenizerkeys");
  suite["models"] = {model};
  suite["methods"] = {"full"};
  const std::string file = write_suite(dir, "tokenizerkeys.json", suite);
  const std::string db = dir.file("t.db");
  const Output refused = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  EXPECT_EQ(refused.code, 2) << describe(refused);
  EXPECT_EQ(lines(refused.err), 1u) << describe(refused);
  EXPECT_TRUE(contains(refused.err, model + "/tokenizer_config.json: field 'auto_map': unknown key"))
      << refused.err;
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused run wrote its database";
  const Output allowed =
      kvbench({"run", file, "--db", db, "--threads", "1", "--allow-unknown-config-keys"}, dir.path());
  EXPECT_EQ(allowed.code, 0) << describe(allowed);
  const Output show = kvbench({"show", "--db", db}, dir.path());
  EXPECT_TRUE(contains(show.out, model + "/tokenizer_config.json: unknown key 'auto_map' ignored"))
      << show.out;
  EXPECT_TRUE(contains(show.out,
                       model + "/generation_config.json: unknown key 'repetition_penalty' ignored"))
      << show.out;
}

// Counts of cells by status, read through a read-only connection; nullopt while unreadable.
std::optional<std::map<std::string, int64_t>> poll_status(const std::string& db) {
  sqlite3* handle = nullptr;
  std::optional<std::map<std::string, int64_t>> result;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(handle, 1000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle, "SELECT status, count(*) FROM cells GROUP BY status", -1,
                           &stmt, nullptr) == SQLITE_OK) {
      std::map<std::string, int64_t> counts;
      int rc;
      while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        counts[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))] =
            sqlite3_column_int64(stmt, 1);
      if (rc == SQLITE_DONE) result = counts;
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(handle);
  return result;
}

struct CellState {
  int64_t id, run_id;
  std::string status;
};

// config_json -> rows of that config.
std::map<std::string, std::vector<CellState>> cells_by_config(const std::string& db) {
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::map<std::string, std::vector<CellState>> rows;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(handle,
                               "SELECT config_json, id, run_id, status FROM cells ORDER BY id",
                               -1, &stmt, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(handle);
  while (sqlite3_step(stmt) == SQLITE_ROW)
    rows[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))].push_back(
        {sqlite3_column_int64(stmt, 1), sqlite3_column_int64(stmt, 2),
         reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3))});
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return rows;
}

std::string integrity(const std::string& db) {
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string result = "no answer";
  if (sqlite3_prepare_v2(handle, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return result;
}

// Full and StreamingLLM at `budgets` on passkey: cells of about a second each (unloaded
// machine), 4 samples each.
json passkey_suite(const std::string& name, const std::vector<int>& budgets) {
  return {{"name", name},
          {"models", {"random-tiny"}},
          {"datasets",
           {{{"name", "passkey"},
             {"params", {{"context_length", 2048}, {"samples", 4}, {"max_new_tokens", 4}}}}}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", budgets}};
}

// One run's status in `db` (runs.status).
std::string run_status(const std::string& db, int64_t run) {
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string status = "no run";
  if (sqlite3_prepare_v2(handle, "SELECT status FROM runs WHERE id = ?", -1, &stmt, nullptr) ==
          SQLITE_OK &&
      sqlite3_bind_int64(stmt, 1, run) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    status = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return status;
}

// Waits until `db` has a complete cell and a running one; false when `pid` ended first or 60 s
// passed.
bool wait_for_a_cell_done_and_one_running(pid_t pid, const std::string& db) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(db)) {
      auto counts = poll_status(db);
      if (counts && (*counts)["complete"] >= 1 && (*counts)["running"] >= 1) return true;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Kills `pid`'s group where `pid` still runs (not reaped: its id is still its own).
void stop_if_running(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != 0) return;
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
}

// A stop signal (Ctrl-C, Slurm's SIGTERM) ends the run before its next sample: the process
// ends by the signal (a shell loop stops too), the run recorded as interrupted, its unfinished
// cell given up (no 'running' row left), and the same command resumes it. `workers`: with
// --workers 2, the signal sent to the process group (as a terminal's Ctrl-C) or, `group`
// false, to the supervisor alone (kill PID), which passes it on.
void expect_stop_and_resume(int signal, int workers, bool group = true) {
  test::TempDir dir;
  const json suite = passkey_suite("stopme", {32, 64, 128});
  constexpr size_t kCells = 4;
  const std::string file = write_suite(dir, "stopme.json", suite);
  const std::string db = dir.file("stopme.db");
  std::vector<std::string> args = {"run", file, "--db", db, "--threads", "1"};
  if (workers > 1) args.insert(args.end(), {"--workers", std::to_string(workers)});
  const pid_t pid = spawn(args, dir.path(), "stopped");
  const bool ready = wait_for_a_cell_done_and_one_running(pid, db);
  if (!ready) {
    stop_if_running(pid);
    FAIL() << "no complete and running cell within 60 s, or the run ended first";
  }
  ASSERT_EQ(kill(workers > 1 && group ? -pid : pid, signal), 0);
  const Output stopped = wait_for(pid, dir.path(), "stopped");
  EXPECT_EQ(stopped.code, 128 + signal) << describe(stopped);
  EXPECT_TRUE(contains(stopped.err, "rerun the same command to resume it")) << stopped.err;
  EXPECT_EQ(run_status(db, 1), "interrupted");
  auto counts = poll_status(db);
  ASSERT_TRUE(counts);
  EXPECT_EQ((*counts)["running"], 0) << "a stopped run left a claimed cell";
  EXPECT_EQ((*counts)["failed"], 0) << "a stopped cell was recorded as failed";
  const int64_t complete = (*counts)["complete"];
  ASSERT_LT(complete, int64_t(kCells)) << "the run finished before the signal";

  const Output resumed = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  ASSERT_EQ(resumed.code, 0) << describe(resumed);
  EXPECT_TRUE(contains(resumed.out, std::to_string(int64_t(kCells) - complete) + " ran, " +
                                        std::to_string(complete) + " already complete, 0 failed"))
      << resumed.out;
  for (const auto& [config, rows] : cells_by_config(db)) {
    ASSERT_EQ(rows.size(), 1u) << "duplicate rows for " << config;
    EXPECT_EQ(rows[0].status, "complete") << config;
  }
  EXPECT_EQ(integrity(db), "ok");
}

TEST(CliStop, SigintStopsTheRunBetweenSamplesAndItResumes) { expect_stop_and_resume(SIGINT, 1); }
TEST(CliStop, SigtermToTheGroupStopsEveryWorker) { expect_stop_and_resume(SIGTERM, 2); }
TEST(CliStop, SigtermToTheSupervisorAloneStopsItsWorkers) {
  expect_stop_and_resume(SIGTERM, 2, /*group=*/false);
}
TEST(CliStop, SighupStopsTheRunToo) { expect_stop_and_resume(SIGHUP, 1); }

// A signal kvbench was started with ignored (nohup, a shell's background job) stays ignored:
// the run goes on to its end.
TEST(CliStop, AnIgnoredSigintLeavesTheRunGoing) {
  test::TempDir dir;
  const std::string file = write_suite(dir, "nostop.json", passkey_suite("nostop", {32, 64}));
  const std::string db = dir.file("nostop.db");
  // sh ignores SIGINT, then becomes kvbench ($0) with the arguments ($@).
  const pid_t pid = spawn({"run", file, "--db", db, "--threads", "1"}, dir.path(), "nostop",
                          {"/bin/sh", "-c", "trap '' INT; exec \"$0\" \"$@\""});
  if (!wait_for_a_cell_done_and_one_running(pid, db)) {
    stop_if_running(pid);
    FAIL() << "no complete and running cell within 60 s, or the run ended first";
  }
  ASSERT_EQ(kill(pid, SIGINT), 0);
  const Output r = wait_for(pid, dir.path(), "nostop");
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(run_status(db, 1), "complete");
  EXPECT_TRUE(contains(r.out, "3 ran, 0 already complete, 0 failed")) << r.out;
}

TEST(CliResume, KilledRunResumesWithoutDuplicates) {
  test::TempDir dir;
  const json suite = passkey_suite("killme", {64, 128});
  constexpr size_t kCells = 3;
  const std::string file = write_suite(dir, "killme.json", suite);
  const std::string db = dir.file("killme.db");

  const pid_t pid = spawn({"run", file, "--db", db, "--threads", "1"}, dir.path(), "killed");
  // One cell complete and the next one running, then SIGKILL.
  if (!wait_for_a_cell_done_and_one_running(pid, db)) {
    stop_if_running(pid);
    FAIL() << "no complete and running cell within 60 s, or the run ended first";
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const Output killed = wait_for(pid, dir.path(), "killed");
  ASSERT_EQ(killed.code, 128 + SIGKILL) << describe(killed);

  EXPECT_EQ(integrity(db), "ok");
  const auto before = cells_by_config(db);
  std::map<std::string, int64_t> complete_before;  // config -> id
  std::vector<std::string> unfinished_before;
  int64_t killed_run = 0;
  for (const auto& [config, rows] : before) {
    ASSERT_EQ(rows.size(), 1u) << "duplicate rows before resume: " << config;
    killed_run = rows[0].run_id;
    if (rows[0].status == "complete") {
      complete_before[config] = rows[0].id;
    } else {
      EXPECT_EQ(rows[0].status, "running");
      unfinished_before.push_back(config);
    }
  }
  ASSERT_GE(complete_before.size(), 1u);
  ASSERT_LT(complete_before.size(), kCells) << "the run finished before the kill";
  ASSERT_EQ(unfinished_before.size(), 1u) << "expected the killed cell as a 'running' row";

  const Output resumed = kvbench({"run", file, "--db", db, "--threads", "1"}, dir.path());
  ASSERT_EQ(resumed.code, 0) << describe(resumed);
  EXPECT_TRUE(contains(resumed.out, std::to_string(kCells - complete_before.size()) + " ran, " +
                                        std::to_string(complete_before.size()) +
                                        " already complete, 0 failed"))
      << resumed.out;

  EXPECT_EQ(integrity(db), "ok");
  const auto after = cells_by_config(db);
  EXPECT_EQ(after.size(), kCells);
  for (const auto& [config, rows] : after) {
    ASSERT_EQ(rows.size(), 1u) << "duplicate rows for " << config;
    EXPECT_EQ(rows[0].status, "complete") << config;
    if (complete_before.count(config)) {
      EXPECT_EQ(rows[0].id, complete_before.at(config)) << "a complete cell was redone";
      EXPECT_EQ(rows[0].run_id, killed_run) << "a complete cell was redone";
    } else {
      EXPECT_NE(rows[0].run_id, killed_run) << "not redone by the resumed run: " << config;
    }
  }
  // The killed cell was redone: its config is complete in a row of the resumed run.
  const std::string& killed_config = unfinished_before[0];
  ASSERT_EQ(after.count(killed_config), 1u);
  EXPECT_NE(after.at(killed_config)[0].run_id, killed_run);
  EXPECT_EQ(after.at(killed_config)[0].status, "complete");

  // Every complete cell has its samples, and no sample row belongs to a vanished cell.
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(handle,
                               "SELECT (SELECT count(*) FROM samples), (SELECT count(*) FROM "
                               "samples WHERE cell_id NOT IN (SELECT id FROM cells))",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(stmt, 0), int64_t(kCells * 4));
  EXPECT_EQ(sqlite3_column_int64(stmt, 1), 0);
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
}


// Several `kvbench run` processes on one database: each cell is claimed by one of them, the
// others leave it; every process exits 0 and every cell ends complete exactly once.
void expect_concurrent_runs_share_the_cells(int processes) {
  test::TempDir dir;
  const json suite = {
      {"name", "shared"},
      {"models", {"random-tiny"}},
      {"datasets",
       {{{"name", "passkey"},
         {"params", {{"context_length", 1024}, {"samples", 2}, {"max_new_tokens", 4}}}}}},
      {"methods", {"full", "streaming_llm", "oracle_topk"}},
      {"budgets", {64, 128, 256}}};
  constexpr size_t kCells = 7;  // full once, the other two at three budgets
  const std::string file = write_suite(dir, "shared.json", suite);
  const std::string db = dir.file("shared.db");
  const std::vector<Output> runs = kvbench_all(
      std::vector<std::vector<std::string>>(
          size_t(processes), {"run", file, "--db", db, "--threads", "1"}),
      dir.path());
  for (const Output& r : runs) {
    EXPECT_EQ(r.code, 0) << describe(r);
    EXPECT_TRUE(contains(r.out, " 0 failed")) << describe(r);
  }
  EXPECT_EQ(integrity(db), "ok");
  const auto cells = cells_by_config(db);
  EXPECT_EQ(cells.size(), kCells);
  for (const auto& [config, rows] : cells) {
    ASSERT_EQ(rows.size(), 1u) << "a cell stored twice: " << config;
    EXPECT_EQ(rows[0].status, "complete") << config;
  }
}

TEST(CliConcurrentRuns, TwoProcessesOnOneDatabase) { expect_concurrent_runs_share_the_cells(2); }

TEST(CliConcurrentRuns, FourProcessesOnOneDatabase) { expect_concurrent_runs_share_the_cells(4); }


// config_json -> "sample_id=prediction:score;..." of its complete cell (what a run computed).
std::map<std::string, std::string> results_by_config(const std::string& db) {
  std::map<std::string, std::string> out;
  for (const auto& row : test::sql_rows(db, "SELECT c.config_json, s.sample_id, s.prediction, "
                                            "s.score FROM cells c JOIN samples s ON s.cell_id = "
                                            "c.id WHERE c.status = 'complete' ORDER BY "
                                            "c.config_json, s.sample_id"))
    out[row[0]] += row[1] + "=" + row[2] + ":" + std::to_string(std::stod(row[3])) + ";";
  return out;
}

// A passkey suite on random-tiny for the workers' tests.
json workers_suite(int64_t context, int samples, int max_new_tokens, const json& methods) {
  return {{"name", "workers"},
          {"models", {"random-tiny"}},
          {"datasets",
           {{{"name", "passkey"},
             {"params", {{"context_length", context}, {"samples", samples},
                         {"max_new_tokens", max_new_tokens}}}}}},
          {"methods", methods},
          {"budgets", {64, 128}}};
}

TEST(CliWorkers, TwoWorkersOnTheCpuEqualOneProcess) {
  test::TempDir dir;
  const json suite = workers_suite(512, 2, 4, {"full", "streaming_llm", "oracle_topk"});
  const std::string file = write_suite(dir, "workers.json", suite);
  const std::vector<Output> r = kvbench_all(
      {{"run", file, "--db", dir.file("one.db"), "--threads", "1"},
       {"run", file, "--db", dir.file("two.db"), "--workers", "2", "--threads", "1"}},
      dir.path());
  ASSERT_EQ(r[0].code, 0) << describe(r[0]);
  ASSERT_EQ(r[1].code, 0) << describe(r[1]);
  EXPECT_TRUE(contains(r[1].err, "5 cells -> " + dir.file("two.db") +
                                     " (2 workers, 1 thread each)")) << r[1].err;
  EXPECT_TRUE(contains(r[1].err, "[5/5 ")) << r[1].err;  // one display counts all the cells
  EXPECT_FALSE(contains(r[1].err, "[6/")) << r[1].err;
  EXPECT_TRUE(contains(r[1].out, "run 1: 2 workers, 5 ran, 0 already complete, 0 failed; database"))
      << r[1].out;
  EXPECT_EQ(lines_with(r[1].out, " complete "), 5u) << r[1].out;  // the table, printed once
  const auto one = results_by_config(dir.file("one.db"));
  EXPECT_EQ(one.size(), 5u);
  EXPECT_EQ(results_by_config(dir.file("two.db")), one);
  const auto cells = cells_by_config(dir.file("two.db"));
  for (const auto& [config, rows] : cells) EXPECT_EQ(rows.size(), 1u) << config;
}

// The workers' final counts are of the run's own cells: a shard's, not the whole suite's.
TEST(CliWorkers, TheCountsAreOfTheShardsCells) {
  test::TempDir dir;
  const json suite = workers_suite(256, 1, 2, {"full", "streaming_llm"});
  const std::string file = write_suite(dir, "workers.json", suite);
  const Output all = kvbench({"run", file, "--db", dir.file("r.db"), "--threads", "1"}, dir.path());
  ASSERT_EQ(all.code, 0) << describe(all);
  const Output shard = kvbench({"run", file, "--db", dir.file("r.db"), "--workers", "2",
                                "--threads", "1", "--shard", "0/2"}, dir.path());
  ASSERT_EQ(shard.code, 0) << describe(shard);
  EXPECT_TRUE(contains(shard.out, ": 2 workers, 0 ran, 2 already complete, 0 failed")) << shard.out;
}

TEST(CliWorkers, DevicesNeedCudaAndOneGpuPerWorker) {
  test::TempDir dir;
  const std::vector<Output> r = kvbench_all(
      {{"run", "smoke", "--db", dir.file("a.db"), "--workers", "2", "--devices", "0,1"},
       {"run", "smoke", "--db", dir.file("b.db"), "--workers", "0"}},
      dir.path());
  EXPECT_EQ(r[0].code, 2) << describe(r[0]);
  EXPECT_TRUE(contains(r[0].err, "--devices: needs --device cuda")) << describe(r[0]);
  EXPECT_EQ(r[1].code, 2) << describe(r[1]);
}

// The pids holding running cells of `db` (empty while none, or unreadable).
std::vector<int64_t> running_claims(const std::string& db) {
  std::vector<int64_t> pids;
  sqlite3* handle = nullptr;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(handle, 1000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(handle, "SELECT claim_pid FROM cells WHERE status = 'running'", -1,
                           &stmt, nullptr) == SQLITE_OK)
      while (sqlite3_step(stmt) == SQLITE_ROW) pids.push_back(sqlite3_column_int64(stmt, 0));
    sqlite3_finalize(stmt);
  }
  sqlite3_close(handle);
  return pids;
}

// SIGKILL one of two workers in the middle of a cell: the supervisor starts it again, the
// killed cell is redone once, the others are untouched, and the database holds what an
// undisturbed run stores (predictions and scores; timings aside).
TEST(CliWorkers, AKilledWorkersCellIsRedoneOnce) {
  test::TempDir dir;
  const json suite = {
      {"name", "killworker"},
      {"models", {"random-tiny"}},
      {"datasets",
       {{{"name", "passkey"},
         {"params", {{"context_length", 2048}, {"samples", 3}, {"max_new_tokens", 4}}}}}},
      {"methods", {"full", "streaming_llm", "oracle_topk"}},
      {"budgets", {64, 128}}};
  const std::string file = write_suite(dir, "killworker.json", suite);
  const std::string db = dir.file("workers.db");
  const pid_t undisturbed =
      spawn({"run", file, "--db", dir.file("one.db"), "--threads", "1"}, dir.path(), "one");
  const pid_t supervisor =
      spawn({"run", file, "--db", db, "--workers", "2", "--threads", "1"}, dir.path(), "two");
  // Poll until a worker holds a cell that has had time to start computing, then kill it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t victim = 0;
  while (victim == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    if (std::filesystem::exists(db))
      for (const int64_t pid : running_claims(db))
        if (pid > 0 && pid != supervisor) victim = pid;
  }
  ASSERT_GT(victim, 0) << "no worker held a cell within 60 s";
  ASSERT_EQ(kill(pid_t(victim), SIGKILL), 0);
  const Output two = wait_for(supervisor, dir.path(), "two");
  const Output one = wait_for(undisturbed, dir.path(), "one");
  ASSERT_EQ(one.code, 0) << describe(one);
  ASSERT_EQ(two.code, 0) << describe(two);
  EXPECT_TRUE(contains(two.err, "killed by signal 9; started again")) << two.err;
  EXPECT_TRUE(contains(two.out, "(1 killed and started again)")) << two.out;
  EXPECT_EQ(integrity(db), "ok");
  const auto cells = cells_by_config(db);
  EXPECT_EQ(cells.size(), 5u);
  for (const auto& [config, rows] : cells) {
    ASSERT_EQ(rows.size(), 1u) << "a cell stored twice: " << config;
    EXPECT_EQ(rows[0].status, "complete") << config;
  }
  EXPECT_EQ(results_by_config(db), results_by_config(dir.file("one.db")));
}

// Runs kvbench as an unprivileged user where this test runs as root (whom permissions do not
// stop), so that a read-only file is read-only to it; empty when that is not possible here.
std::optional<std::vector<std::string>> unprivileged_launcher() {
  if (geteuid() != 0) return std::vector<std::string>{};
  const std::vector<std::string> launcher = {"/usr/bin/setpriv", "--reuid=65534",
                                             "--regid=65534", "--clear-groups"};
  if (!std::filesystem::exists(launcher[0])) return std::nullopt;
  test::TempDir probe;
  std::filesystem::permissions(probe.path(), std::filesystem::perms::all);
  const pid_t pid = spawn({"--help"}, probe.path(), "probe", launcher);
  const Output r = wait_for(pid, probe.path(), "probe");
  if (r.code != 0) return std::nullopt;  // the binary is not reachable for that user
  return launcher;
}

// A read-only database: a one-line error naming the file, exit 2, before any cell runs, the
// file unchanged; `kvbench show` still reads it.
TEST(CliFaults, AReadOnlyDatabaseIsExit2BeforeAnyCell) {
  const auto launcher = unprivileged_launcher();
  if (!launcher) GTEST_SKIP() << "cannot run kvbench as another user here (setpriv, nobody)";
  test::TempDir dir;
  namespace fs = std::filesystem;
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read |
                                  fs::perms::group_exec | fs::perms::others_read |
                                  fs::perms::others_exec);
  const std::string db = dir.file("results.db");
  ASSERT_EQ(kvbench({"run", "smoke", "--db", db, "--set", "method=full"}, dir.path()).code, 0);
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string before = read_file(db);
  const pid_t pid = spawn({"run", "smoke", "--db", db}, dir.path(), "ro", *launcher);
  const Output r = wait_for(pid, dir.path(), "ro");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "kvbench: error: " + db + ": attempt to write a readonly database\n"))
      << describe(r);
  EXPECT_FALSE(contains(r.err, "[1/")) << describe(r);  // no cell began
  EXPECT_EQ(read_file(db), before);
  const pid_t show_pid = spawn({"show", "--db", db}, dir.path(), "show", *launcher);
  const Output show = wait_for(show_pid, dir.path(), "show");
  EXPECT_EQ(show.code, 0) << describe(show);
  EXPECT_TRUE(contains(show.out, "suite: smoke")) << describe(show);
  // A version-4 file (before model fingerprints) is read as it is, not migrated, and a run on
  // it fails as on any file it may only read.
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write);
  {
    ResultStore store(db);
    ASSERT_EQ(sqlite3_exec(store.handle(), "ALTER TABLE cells DROP COLUMN model_fingerprint; "
                           "UPDATE schema_version SET version = 4", nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string v4 = read_file(db);
  const pid_t old_show_pid = spawn({"show", "--db", db}, dir.path(), "show4", *launcher);
  const Output old_show = wait_for(old_show_pid, dir.path(), "show4");
  EXPECT_EQ(old_show.code, 0) << describe(old_show);
  EXPECT_TRUE(contains(old_show.out, "suite: smoke")) << describe(old_show);
  const pid_t old_run_pid = spawn({"run", "smoke", "--db", db}, dir.path(), "run4", *launcher);
  const Output old_run = wait_for(old_run_pid, dir.path(), "run4");
  EXPECT_EQ(old_run.code, 2) << describe(old_run);
  EXPECT_TRUE(contains(old_run.err, "attempt to write a readonly database")) << describe(old_run);
  EXPECT_EQ(read_file(db), v4);
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write);
}

// A full disk (here: a file-size limit) part-way through a suite: a one-line error naming the
// database, exit 2; the cells complete before it are whole, the one it stopped holds nothing;
// the same command without the limit then finishes the suite.
TEST(CliFaults, AFullDiskStopsTheRunWithExit2AndLosesNothing) {
  if (!std::filesystem::exists("/usr/bin/prlimit")) GTEST_SKIP() << "no /usr/bin/prlimit";
  test::TempDir dir;
  const std::string db = dir.file("full.db");
  const std::vector<std::string> run = {"run", "smoke", "--db", db, "--set",
                                        "budget=16,32,48,64,96,128", "--threads", "1"};
  const pid_t pid = spawn(run, dir.path(), "full", {"/usr/bin/prlimit", "--fsize=120000"});
  const Output r = wait_for(pid, dir.path(), "full");
  EXPECT_EQ(r.code, 2) << describe(r);
  const std::string error = "kvbench: error: " + db + ": ";
  ASSERT_TRUE(contains(r.err, error)) << describe(r);
  EXPECT_EQ(lines(r.err.substr(r.err.find(error))), 1u) << describe(r);
  EXPECT_EQ(integrity(db), "ok");
  // Every complete cell has its 3 samples; no other cell has any.
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(handle,
                               "SELECT c.status, (SELECT count(*) FROM samples s WHERE "
                               "s.cell_id = c.id) FROM cells c", -1, &stmt, nullptr),
            SQLITE_OK);
  int complete = 0;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const std::string status = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    complete += status == "complete";
    EXPECT_EQ(sqlite3_column_int64(stmt, 1), status == "complete" ? 3 : 0) << status;
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  EXPECT_LT(complete, 13) << "the limit never stopped the run";
  const Output again = kvbench(run, dir.path());
  EXPECT_EQ(again.code, 0) << describe(again);
  const auto cells = cells_by_config(db);
  EXPECT_EQ(cells.size(), 13u);
  for (const auto& [config, rows] : cells) {
    ASSERT_EQ(rows.size(), 1u) << config;
    EXPECT_EQ(rows[0].status, "complete") << config;
  }
}

}  // namespace
}  // namespace kvb
