// Suite files: the validator's messages on malformed input (file, JSON path, expectation), the
// cartesian expansion into cells, and the --set overrides.
#include "harness/suite/suite.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "engine/common/error.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

const std::string kPath = "suites/under_test.json";

// A small valid suite; tests break one field of it.
json good() {
  return {{"name", "t"},
          {"description", "a test suite"},
          {"models", {"random-tiny"}},
          {"datasets", {{{"name", "passkey"}, {"params", {{"context_length", 128}}}}}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32, 64}},
          {"seeds", {0}}};
}

// The InputError message of parse_suite; fails the test when it parses.
std::string error_of(const json& j, const std::vector<std::string>& overrides = {}) {
  try {
    parse_suite(j, kPath, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError for " << j.dump();
  return "";
}

// Asserts that `message` names the file and the JSON path, and contains `expectation`.
void expect_message(const std::string& message, const std::string& json_path,
                    const std::string& expectation) {
  EXPECT_NE(message.find(kPath + ": " + json_path), std::string::npos)
      << "no \"" << kPath << ": " << json_path << "\" in: " << message;
  EXPECT_NE(message.find(expectation), std::string::npos)
      << "no \"" << expectation << "\" in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
}

// SCBench prefills a context before its questions: a suite that leaves context_sharing at its
// default (each question prefilled with the context) is refused; stated either way, it runs.
TEST(SuiteValidation, ScbenchNeedsContextSharingStated) {
  json j = good();
  j["datasets"] = {{{"name", "scbench"}, {"params", {{"task", "kv"}, {"data_dir", "/d"}}}}};
  expect_message(error_of(j), "$.context_sharing",
                 "scbench's reference prefills and compresses a context before reading its "
                 "questions: state per_sample");
  EXPECT_NO_THROW(parse_suite(j, kPath, {"context_sharing=per_sample"}));
  j["context_sharing"] = "none";
  EXPECT_NO_THROW(parse_suite(j, kPath));
  j.erase("context_sharing");  // a suite stored before the rule is read as it ran
  EXPECT_NO_THROW(parse_stored_suite(j, kPath));
}

// A method field that the config's other fields make unused is refused when given (H2O's
// prefill window in its decode mode; KV-Compress's pooling under variant full, set by a preset),
// and read as it ran in a stored suite.
TEST(SuiteValidation, AMethodFieldSetWhereItIsUnusedIsRefused) {
  json j = good();
  j["methods"] = {{{"name", "h2o"}, {"config", {{"window", 16}}}}};
  expect_message(error_of(j), "$.methods[0].config.window",
                 "16 is set, but nothing reads it when mode is \"decode\" (heavy_ratio splits "
                 "B); leave it at its default, 8");
  EXPECT_NO_THROW(parse_stored_suite(j, kPath));
  j["methods"] = {{{"name", "h2o"}, {"config", {{"window", 16}, {"mode", "prefill"}}}}};
  EXPECT_NO_THROW(parse_suite(j, kPath));
  j["methods"] = {{{"name", "kv_compress:vllm-kvcompress"}, {"config", {{"variant", "full"}}}}};
  expect_message(error_of(j), "$.methods[0].config.window",
                 "32 is set by preset kv_compress:vllm-kvcompress, but nothing reads it when "
                 "variant is \"full\" (every query scores); give \"window\": 8 here");
  j["methods"] = {{{"name", "kv_compress:vllm-kvcompress"},
                   {"config", {{"variant", "full"}, {"window", 8}, {"kernel", 7}}}}};
  j["budgets"] = {128};  // room beside its 50 protected positions
  EXPECT_NO_THROW(parse_suite(j, kPath));
  j["methods"] = {{{"name", "kv_compress"},
                   {"config", {{"protected", 0}, {"pool_scope", "evictable"}}}}};
  expect_message(error_of(j), "$.methods[0].config.pool_scope",
                 "\"evictable\" is set, but nothing reads it when variant is \"full\", kernel "
                 "is 1 (no pooling) or protected is 0 (all keys are evictable); leave it at its "
                 "default, \"all\"");
  j["methods"] = {{{"name", "ada_snapkv:kvcache-factory"}, {"config", {{"alpha", 1.0}}}}};
  expect_message(error_of(j), "$.methods[0].config.normalize",
                 "true is set by preset ada_snapkv:kvcache-factory, but nothing reads it when "
                 "alpha is 1 (every head keeps B - W, whatever its scores); give \"normalize\": "
                 "false here");
  j["methods"] = {{{"name", "ada_snapkv"}, {"config", {{"alpha", 1.0}}}}};
  EXPECT_NO_THROW(parse_suite(j, kPath));
}

TEST(SuiteValidation, GoodSuiteParses) {
  Suite s = parse_suite(good(), kPath);
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.path, kPath);
  ASSERT_EQ(s.models, std::vector<std::string>{"random-tiny"});
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[1].label, "streaming_llm");
  EXPECT_EQ(s.budgets, (std::vector<int64_t>{32, 64}));
}

TEST(SuiteValidation, UnknownTopLevelKey) {
  json j = good();
  j["colour"] = "red";
  expect_message(error_of(j), "$", "unknown key \"colour\"");
}

TEST(SuiteValidation, NotAnObject) {
  expect_message(error_of(json::array()), "$", "expected an object");
}

TEST(SuiteValidation, MissingName) {
  json j = good();
  j.erase("name");
  expect_message(error_of(j), "$", "missing required field \"name\"");
}

TEST(SuiteValidation, ModelsNotAnArray) {
  json j = good();
  j["models"] = "random-tiny";
  expect_message(error_of(j), "$.models", "expected an array of strings, got a string");
}

TEST(SuiteValidation, BudgetsContainingAString) {
  json j = good();
  j["budgets"] = {32, "64"};
  expect_message(error_of(j), "$.budgets", "expected an array of integers, got a string");
}

TEST(SuiteValidation, NegativeSeed) {
  json j = good();
  j["seeds"] = {0, -1};
  expect_message(error_of(j), "$.seeds", ">= 0");
}

TEST(SuiteValidation, UnknownMethodName) {
  json j = good();
  j["methods"] = {"full", "nosuch_method"};
  const std::string m = error_of(j);
  expect_message(m, "$.methods[1].name", "unknown method \"nosuch_method\"");
  EXPECT_NE(m.find("streaming_llm"), std::string::npos) << "known names not listed: " << m;
}

TEST(SuiteValidation, UnknownDatasetName) {
  json j = good();
  j["datasets"] = {"passkey", "nosuch_dataset"};
  const std::string m = error_of(j);
  expect_message(m, "$.datasets[1].name", "unknown dataset \"nosuch_dataset\"");
  EXPECT_NE(m.find("passkey"), std::string::npos) << "known names not listed: " << m;
}

TEST(SuiteValidation, UnknownMethodConfigKey) {
  json j = good();
  j["methods"] = {{{"name", "streaming_llm"}, {"config", {{"sink", 4}}}}};
  const std::string m = error_of(j);
  expect_message(m, "$.methods[0].config", "unknown key \"sink\" (did you mean sinks?)");
  EXPECT_NE(m.find("sinks"), std::string::npos) << "known keys not listed: " << m;
}

// A mistyped method, preset, dataset or config value gets the nearest valid name.
TEST(SuiteValidation, MistypedNamesGetTheNearestValidOne) {
  json j = good();
  j["methods"] = {"snapkvv"};
  expect_message(error_of(j), "$.methods[0].name", "unknown method \"snapkvv\" (did you mean snapkv?)");
  j["methods"] = {"kv_compress:papr"};
  expect_message(error_of(j), "$.methods[0]", "has no preset \"papr\" (did you mean paper?)");
  j["methods"] = {"full"};
  j["datasets"] = {"paskey"};
  expect_message(error_of(j), "$.datasets[0].name", "unknown dataset \"paskey\" (did you mean passkey?)");
  j["datasets"] = {"passkey"};
  j["methods"] = {{{"name", "snapkv"}, {"config", {{"pooling", "maxx"}}}}};
  expect_message(error_of(j), "$.methods[0].config", "is not one of max, avg (did you mean max?)");
  j["methods"] = {"zzzzzz"};
  EXPECT_EQ(error_of(j).find("did you mean"), std::string::npos) << "a guess for no near name";
}

TEST(SuiteValidation, WrongMethodConfigType) {
  json j = good();
  j["methods"] = {{{"name", "streaming_llm"}, {"config", {{"sinks", "4"}}}}};
  expect_message(error_of(j), "$.methods[0].config", ".sinks: expected an integer, got a string");
  j["methods"] = {{{"name", "streaming_llm"}, {"config", 4}}};
  expect_message(error_of(j), "$.methods[0].config", "expected an object, got an integer");
  j["methods"] = {{{"name", "full"}, {"config", {{"x", 1}}}}};
  expect_message(error_of(j), "$.methods[0].config", "unknown key \"x\"");
}

TEST(SuiteValidation, MethodConfigInvalidForABudget) {
  // streaming_llm keeps `sinks` first tokens: a budget must leave room beyond them.
  json j = good();
  j["methods"] = {{{"name", "streaming_llm"}, {"label", "sinks40"}, {"config", {{"sinks", 40}}}}};
  j["budgets"] = {64, 32};
  const std::string m = error_of(j);
  expect_message(m, "$.methods", "sinks");
  EXPECT_NE(m.find("budget 32"), std::string::npos) << m;
  EXPECT_NE(m.find("sinks40"), std::string::npos) << "the entry is not named: " << m;
  j["budgets"] = {64, 41};
  EXPECT_EQ(parse_suite(j, kPath).cells().size(), 2u);
}

TEST(SuiteValidation, WrongDatasetParams) {
  json j = good();
  j["datasets"] = {{{"name", "passkey"}, {"params", {{"context_length", 2.5}}}}};
  expect_message(error_of(j), "$.datasets[0].params.context_length", "expected an integer");
  j["datasets"] = {{{"name", "passkey"}, {"params", {{"samples", 0}}}}};
  expect_message(error_of(j), "$.datasets[0].params.samples", ">= 1");
  j["datasets"] = {{{"name", "passkey"}, {"parameters", json::object()}}};
  expect_message(error_of(j), "$.datasets[0]", "unknown key \"parameters\"");
}

TEST(SuiteValidation, BudgetNotPositive) {
  json j = good();
  j["budgets"] = {32, 0};
  expect_message(error_of(j), "$.budgets", "must be > 0");
  j["budgets"] = {-8};
  expect_message(error_of(j), "$.budgets", "must be > 0");
}

TEST(SuiteValidation, EmptyMethods) {
  json j = good();
  j["methods"] = json::array();
  expect_message(error_of(j), "$.methods", "non-empty array");
}

TEST(SuiteValidation, EmptyDatasetsAndModels) {
  json j = good();
  j["datasets"] = json::array();
  expect_message(error_of(j), "$.datasets", "non-empty array");
  j = good();
  j["models"] = json::array();
  expect_message(error_of(j), "$.models", "non-empty array");
}

// A dataset's revision (bumped when its samples change) is part of its cells' configs from 1 on,
// so results of an earlier revision are redone; revision 0 leaves configs as they were.
TEST(SuiteCells, ADatasetsRevisionIsPartOfItsCellsConfig) {
  json j = good();
  // Under generator ruler niah is at revision 2 (its joins, then RULER's sizing), vt at 1 (the
  // sizing); passkey at 1 (its scoring); kvbench_v1 did not change.
  j["datasets"] = {{{"name", "passkey"}, {"params", {{"context_length", 128}}}},
                   {{"name", "vt"}, {"params", {{"context_length", 1024}}}},
                   {{"name", "niah_multikey_3"}, {"params", {{"context_length", 1024}}}},
                   {{"name", "niah_multikey_3"},
                    {"params", {{"context_length", 1024}, {"generator", "kvbench_v1"}}}}};
  const std::vector<Cell> cells = parse_suite(j, "t.json").cells();
  ASSERT_FALSE(cells.empty());
  int revised = 0;
  for (const Cell& c : cells) {
    const json dataset = c.to_json()["dataset"];
    const bool ruler = c.dataset.name != "passkey" && c.dataset.params["generator"] == "ruler";
    if (ruler) {
      EXPECT_EQ(dataset.value("revision", 0), c.dataset.name == "vt" ? 1 : 2) << dataset;
    } else if (c.dataset.name == "passkey") {
      EXPECT_EQ(dataset.value("revision", 0), 1) << dataset;
    }
    else EXPECT_FALSE(dataset.contains("revision")) << dataset;
    revised += ruler;
  }
  EXPECT_GT(revised, 0);
}

// A label is one line of text (a table row, a plot tic, a progress line).
TEST(SuiteValidation, ALabelWithAControlCharacterIsRefused) {
  for (const char* label : {"a\nb", "a\tb"}) {
    json j = good();
    j["methods"] = {{{"name", "streaming_llm"}, {"label", label}}};
    expect_message(error_of(j), "$.methods[0].label", "control character");
  }
}

// A suite's name names files (results/runs/NAME.db) and stands in Slurm scripts, where one of
// `s$(cmd)` ran the command and one of "../x" wrote the database elsewhere.
TEST(SuiteValidation, ANameThatIsNoPlainFileNameIsRefused) {
  for (const char* name : {"s$(echo hi)", "a b", "../up", "x/y", ".hidden", "-flag", "a\nb", "",
                           "o<b>&\"s\"", "%s"}) {
    json j = good();
    j["name"] = name;
    expect_message(error_of(j), "$.name", "names files and scripts");
  }
  for (const char* name : {"smoke", "longbench_e-2.v1", "A9"}) {
    json j = good();
    j["name"] = name;
    EXPECT_EQ(parse_suite(j, kPath).name, name);
  }
}

TEST(SuiteValidation, DuplicateMethodLabels) {
  json j = good();
  j["methods"] = {"streaming_llm", {{"name", "streaming_llm"}, {"config", {{"sinks", 8}}}}};
  expect_message(error_of(j), "$.methods", "share the label \"streaming_llm\"");
  // Distinct labels make the two configs legal.
  j["methods"][1]["label"] = "streaming_llm_8";
  Suite s = parse_suite(j, kPath);
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[1].label, "streaming_llm_8");
  EXPECT_EQ(s.methods[1].config["sinks"], 8);
}

TEST(SuiteValidation, MissingBudgetsForBudgetedMethod) {
  json j = good();
  j.erase("budgets");
  expect_message(error_of(j), "$.budgets", "\"streaming_llm\" needs a budget");
  // A suite of budget-less methods needs no budgets.
  j["methods"] = {"full"};
  EXPECT_EQ(parse_suite(j, kPath).cells().size(), 1u);
}

TEST(SuiteValidation, UnknownModelReference) {
  json j = good();
  j["models"] = {"random-tiny", "/no/such/model-folder"};
  expect_message(error_of(j), "$.models[1]", "neither a built-in model");
  j["models"] = {"no/such/relative-folder"};
  expect_message(error_of(j), "$.models[0]", "relative paths are taken from the working directory");
}

json suite_on_shared_material() {
  json j = good();
  j["models"] = {"${SHARED}/models/m"};
  j["datasets"] = {{{"name", "perplexity"}, {"params", {{"text_file", "${SHARED}/data/essays.txt"}}}}};
  return j;
}

TEST(SuiteSharedFolder, PlaceholderExpandsToKvbenchShared) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("models/m"));
  std::filesystem::create_directories(dir.file("data"));
  std::ofstream(dir.file("data/essays.txt")) << "text";
  test::ScopedSharedFolder shared(dir.path());
  const Suite s = parse_suite(suite_on_shared_material(), kPath);
  EXPECT_EQ(s.models, std::vector<std::string>{dir.file("models/m")});
  EXPECT_EQ(s.datasets[0].params["text_file"], dir.file("data/essays.txt"));
  EXPECT_EQ(s.source["models"][0], "${SHARED}/models/m");  // the file as written, for provenance
}

TEST(SuiteSharedFolder, MissingMaterialSaysWhereItLookedAndHowToPointElsewhere) {
  test::TempDir dir;
  test::ScopedSharedFolder shared(dir.file("absent"));
  std::string m = error_of(suite_on_shared_material());
  expect_message(m, "$.models[0]", "\"${SHARED}/models/m\" is neither a built-in model");
  EXPECT_NE(m.find("no folder " + dir.file("absent/models/m")), std::string::npos) << m;
  EXPECT_NE(m.find("set KVBENCH_SHARED"), std::string::npos) << m;

  std::filesystem::create_directories(dir.file("absent/models/m"));
  m = error_of(suite_on_shared_material());
  expect_message(m, "$.datasets[0].params.text_file", dir.file("absent/data/essays.txt"));
  EXPECT_NE(m.find("set KVBENCH_SHARED"), std::string::npos) << m;
}

TEST(SuiteSharedFolder, BuiltinSuitesUseThePlaceholder) {
  for (const std::string& name : builtin_suite_names()) {
    std::ifstream in(resolve_suite_path(name));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("../shared"), std::string::npos)
        << name << ": write ${SHARED}/..., which KVBENCH_SHARED can move";
  }
}

TEST(SuiteValidation, MaxNewTokensNegative) {
  json j = good();
  j["max_new_tokens"] = -1;
  expect_message(error_of(j), "$.max_new_tokens", ">= 0");
}

TEST(SuiteFiles, MissingAndMalformedFiles) {
  test::TempDir dir;
  try {
    load_suite("nosuchsuite");
    ADD_FAILURE() << "no error for a missing suite";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nosuchsuite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("smoke"), std::string::npos)
        << "built-in suites not listed: " << e.what();
  }
  try {
    load_suite("smok");
    ADD_FAILURE() << "no error for a mistyped suite";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean smoke?)"), std::string::npos) << e.what();
  }
  const std::string broken = dir.file("broken.json");
  std::ofstream(broken) << "{\"name\": \"x\", ";
  try {
    load_suite(broken);
    ADD_FAILURE() << "no error for malformed JSON";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(broken), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  }
  const std::string bad = dir.file("bad.json");
  json j = good();
  j["budgets"] = {0};
  std::ofstream(bad) << j.dump();
  try {
    load_suite(bad);
    ADD_FAILURE() << "no error for budget 0";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ": $.budgets"), std::string::npos) << e.what();
  }
}

TEST(SuiteFiles, BuiltinSmokeSuite) {
  const auto names = builtin_suite_names();
  ASSERT_NE(std::find(names.begin(), names.end(), "smoke"), names.end());
  Suite s = load_suite("smoke");
  EXPECT_EQ(s.name, "smoke");
  // full: 1 cell; streaming_llm and oracle_topk: 2 budgets each.
  EXPECT_EQ(s.cells().size(), 5u);
}

// 1 model x 2 dataset configs x {full, streaming_llm, oracle_topk} x 2 budgets x 2 seeds.
json product_suite() {
  return {{"name", "product"},
          {"models", {"random-tiny"}},
          {"datasets",
           {{{"name", "passkey"}, {"params", {{"context_length", 128}}}},
            {{"name", "passkey"}, {"params", {{"context_length", 256}, {"samples", 2}}}}}},
          {"methods", {"full", "streaming_llm", "oracle_topk"}},
          {"budgets", {32, 64}},
          {"seeds", {0, 7}}};
}

TEST(SuiteExpansion, CartesianProduct) {
  Suite s = parse_suite(product_suite(), kPath);
  const std::vector<Cell> cells = s.cells();
  // full ignores budgets: 2 datasets x 2 seeds = 4; the others 2 x 2 x 2 = 8 each.
  ASSERT_EQ(cells.size(), 4u + 8u + 8u);
  std::map<std::string, int> per_method;
  for (const Cell& c : cells) {
    ++per_method[c.method.name];
    EXPECT_EQ(c.model, "random-tiny");
    EXPECT_EQ(c.dataset.name, "passkey");
    EXPECT_TRUE(c.seed == 0 || c.seed == 7);
    if (c.method.name == "full") {
      EXPECT_FALSE(c.budget.has_value());
      EXPECT_EQ(c.budget_text(), "-");
    } else {
      ASSERT_TRUE(c.budget.has_value());
      EXPECT_TRUE(*c.budget == 32 || *c.budget == 64);
    }
  }
  EXPECT_EQ(per_method["full"], 4);
  EXPECT_EQ(per_method["streaming_llm"], 8);
  EXPECT_EQ(per_method["oracle_topk"], 8);

  // Order: model, dataset, method, budget, seed (the last axis varies fastest).
  EXPECT_EQ(cells[0].method.name, "full");
  EXPECT_EQ(cells[0].seed, 0u);
  EXPECT_EQ(cells[1].method.name, "full");
  EXPECT_EQ(cells[1].seed, 7u);
  EXPECT_EQ(cells[2].method.name, "streaming_llm");
  EXPECT_EQ(*cells[2].budget, 32);
  EXPECT_EQ(cells[2].seed, 0u);
  EXPECT_EQ(*cells[3].budget, 32);
  EXPECT_EQ(cells[3].seed, 7u);
  EXPECT_EQ(*cells[4].budget, 64);
  EXPECT_EQ(cells[0].dataset.params["context_length"], 128);
  EXPECT_EQ(cells[10].dataset.params["context_length"], 256);

  // Every cell has its own key.
  std::set<std::string> keys;
  for (const Cell& c : cells) keys.insert(c.key());
  EXPECT_EQ(keys.size(), cells.size());
}

TEST(SuiteExpansion, NormalisedConfigHasDefaults) {
  Suite s = parse_suite(product_suite(), kPath);
  const std::vector<Cell> cells = s.cells();
  const json full = cells[0].to_json();
  EXPECT_EQ(full["model"], "random-tiny");
  EXPECT_EQ(full["dataset"]["name"], "passkey");
  // Defaults of passkey filled in beside the given context_length.
  EXPECT_EQ(full["dataset"]["params"]["context_length"], 128);
  EXPECT_EQ(full["dataset"]["params"]["samples"], 8);
  EXPECT_EQ(full["dataset"]["params"]["max_new_tokens"], 8);
  EXPECT_EQ(full["method"], (json{{"name", "full"}, {"label", "full"}, {"config", json::object()}}));
  EXPECT_TRUE(full["budget"].is_null());
  EXPECT_EQ(full["seed"], 0);
  EXPECT_EQ(full["max_new_tokens"], 0);

  const json streaming = cells[2].to_json();
  EXPECT_EQ(streaming["method"]["config"],
            (json{{"sinks", 4}, {"decode_eviction", true}}));  // the defaults
  EXPECT_EQ(streaming["budget"], 32);
  // The key is the dump of the normalised JSON.
  EXPECT_EQ(json::parse(cells[2].key()), streaming);
  EXPECT_FALSE(streaming.contains("recall_revision"));
  // A recall cell names how its recall is measured: results of an earlier measurement redone.
  Cell with_recall = cells[2];
  with_recall.recall = true;
  EXPECT_EQ(with_recall.to_json()["recall_revision"], 1);
  EXPECT_NE(with_recall.key(), cells[2].key());

  // Spelling a default out, or leaving it implicit, gives the same cell.
  json explicit_defaults = product_suite();
  explicit_defaults["methods"][1] = {{"name", "streaming_llm"}, {"config", {{"sinks", 4}}}};
  explicit_defaults["datasets"][0]["params"]["samples"] = 8;
  const std::vector<Cell> again = parse_suite(explicit_defaults, kPath).cells();
  ASSERT_EQ(again.size(), cells.size());
  for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ(again[i].key(), cells[i].key()) << i;
}

TEST(SuiteOverrides, Budgets) {
  Suite s = parse_suite(good(), kPath, {"budget=128,256"});
  EXPECT_EQ(s.budgets, (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(s.source["budgets"], (json{128, 256}));
  // 1 full + 2 streaming_llm.
  EXPECT_EQ(s.cells().size(), 3u);
  // The plural spelling works as well.
  EXPECT_EQ(parse_suite(good(), kPath, {"budgets=16"}).budgets, (std::vector<int64_t>{16}));
}

TEST(SuiteOverrides, MethodsKeepFileConfigsAndAddDefaults) {
  json j = good();
  j["methods"] = {"full", {{"name", "streaming_llm"}, {"label", "s8"}, {"config", {{"sinks", 8}}}}};
  Suite s = parse_suite(j, kPath, {"method=streaming_llm,oracle_topk"});
  ASSERT_EQ(s.methods.size(), 2u);
  EXPECT_EQ(s.methods[0].name, "streaming_llm");
  EXPECT_EQ(s.methods[0].label, "s8");
  EXPECT_EQ(s.methods[0].config, (json{{"sinks", 8}, {"decode_eviction", true}}));
  EXPECT_EQ(s.methods[1].name, "oracle_topk");
  EXPECT_EQ(s.methods[1].label, "oracle_topk");
  EXPECT_EQ(s.methods[1].config, json::object());

  Suite t = parse_suite(good(), kPath, {"method=full,oracle_topk"});
  ASSERT_EQ(t.methods.size(), 2u);
  EXPECT_EQ(t.methods[0].name, "full");
  EXPECT_EQ(t.methods[1].name, "oracle_topk");
  // full: 1 cell, oracle_topk: 2 budgets.
  EXPECT_EQ(t.cells().size(), 3u);

  // An unknown method given by override is still validated, and blamed on the flag.
  const std::string m = error_of(good(), {"method=full,nosuch"});
  EXPECT_EQ(m.rfind("--set method=full,nosuch: $.methods[1].name: unknown method \"nosuch\"", 0), 0u)
      << m;
}

// A value naming an entry's label picks that entry alone; a method's name picks every entry of
// that name, its labelled variants too.
TEST(SuiteOverrides, MethodsByLabelOrByName) {
  json j = good();
  j["methods"] = {"streaming_llm",
                  {{"name", "streaming_llm"}, {"label", "s8"}, {"config", {{"sinks", 8}}}},
                  "full"};
  Suite by_label = parse_suite(j, kPath, {"method=s8"});
  ASSERT_EQ(by_label.methods.size(), 1u);
  EXPECT_EQ(by_label.methods[0].label, "s8");
  EXPECT_EQ(by_label.methods[0].config["sinks"], 8);

  Suite by_name = parse_suite(j, kPath, {"method=streaming_llm"});
  ASSERT_EQ(by_name.methods.size(), 2u);
  EXPECT_EQ(by_name.methods[0].label, "streaming_llm");
  EXPECT_EQ(by_name.methods[1].label, "s8");
  // A label the name already picked is not taken twice (two entries of one label are refused).
  EXPECT_EQ(parse_suite(j, kPath, {"method=streaming_llm,s8"}).methods.size(), 2u);
  // An entry with a label of the wrong type, which --set leaves out here, does not crash it
  // (it threw nlohmann's type_error: exit 3).
  j["methods"].push_back({{"name", "h2o"}, {"label", 5}});
  Suite t;
  EXPECT_NO_THROW(t = parse_suite(j, kPath, {"method=full"}));
  ASSERT_EQ(t.methods.size(), 1u);
  EXPECT_EQ(t.methods[0].name, "full");
}

TEST(SuiteOverrides, SeedsModelsDatasetsAndMaxNewTokens) {
  Suite s = parse_suite(good(), kPath, {"seed=3", "max_new_tokens=4"});
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{3}));
  EXPECT_EQ(s.max_new_tokens, 4);
  for (const Cell& c : s.cells()) {
    EXPECT_EQ(c.seed, 3u);
    EXPECT_EQ(c.max_new_tokens, 4);
    EXPECT_EQ(c.to_json()["max_new_tokens"], 4);
  }
  EXPECT_EQ(s.source["seeds"], (json{3}));
  EXPECT_EQ(s.source["max_new_tokens"], 4);

  // Overrides compose; a later one of the same axis wins.
  Suite t = parse_suite(good(), kPath, {"seed=1,2", "budget=8", "budget=16"});
  EXPECT_EQ(t.seeds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(t.budgets, (std::vector<int64_t>{16}));

  // dataset= keeps the file's params of a listed dataset.
  Suite d = parse_suite(good(), kPath, {"dataset=passkey"});
  ASSERT_EQ(d.datasets.size(), 1u);
  EXPECT_EQ(d.datasets[0].params["context_length"], 128);

}

// A bad value given by --set is blamed on the flag, not on the suite file.
TEST(SuiteOverrides, ErrorsNameTheFlag) {
  auto expect_flag = [](const std::string& message, const std::string& start) {
    EXPECT_EQ(message.rfind(start, 0), 0u) << "does not start with \"" << start << "\": " << message;
    EXPECT_EQ(message.find(kPath), std::string::npos) << "names the suite file: " << message;
  };
  expect_flag(error_of(good(), {"budget=-5"}), "--set budget=-5: budget -5 must be > 0");
  expect_flag(error_of(good(), {"seed=-1"}), "--set seed=-1: seeds must be >= 0");
  expect_flag(error_of(good(), {"max_new_tokens=-2"}), "--set max_new_tokens=-2: must be >= 0");
  expect_flag(error_of(good(), {"model=/no/such/model"}),
              "--set model=/no/such/model: $.models[0]: \"/no/such/model\" is neither a built-in model");
  expect_flag(error_of(good(), {"method=fulll"}), "--set method=fulll: $.methods[0].name: unknown method");
  // A field no flag touched is still reported against the file.
  json j = good();
  j["budgets"] = {0};
  expect_message(error_of(j, {"seed=1"}), "$.budgets", "must be > 0");
}

TEST(SuiteOverrides, BadForms) {
  auto override_error = [](const std::string& text) {
    try {
      parse_suite(good(), kPath, {text});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error for --set " << text;
    return std::string();
  };
  std::string m = override_error("budget=abc");
  EXPECT_NE(m.find("--set budget"), std::string::npos) << m;
  EXPECT_NE(m.find("\"abc\" is not an integer"), std::string::npos) << m;
  m = override_error("budget=12x");
  EXPECT_NE(m.find("\"12x\" is not an integer"), std::string::npos) << m;
  m = override_error("colour=red");
  EXPECT_NE(m.find("--set colour"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown axis"), std::string::npos) << m;
  m = override_error("budgt=64");
  EXPECT_NE(m.find("(did you mean budget?)"), std::string::npos) << m;
  m = override_error("model=random-tiy");
  EXPECT_NE(m.find("(did you mean random-tiny?)"), std::string::npos) << m;
  m = override_error("=3");
  EXPECT_NE(m.find("expected KEY=VALUE"), std::string::npos) << m;
  m = override_error("budget=");
  EXPECT_NE(m.find("expected KEY=VALUE"), std::string::npos) << m;
  m = override_error("budget");
  EXPECT_NE(m.find("expected KEY=VALUE"), std::string::npos) << m;
  m = override_error("max_new_tokens=4,5");
  EXPECT_NE(m.find("--set max_new_tokens"), std::string::npos) << m;
  m = override_error("budget=1,,2");
  EXPECT_NE(m.find("empty value"), std::string::npos) << m;
  m = override_error("budget=1,2,");  // a trailing comma is not silently dropped
  EXPECT_NE(m.find("empty value"), std::string::npos) << m;
}

}  // namespace
}  // namespace kvb
