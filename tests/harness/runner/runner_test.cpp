// run_suite against a result store: runs every cell once, skips complete cells on a second run,
// reruns everything with `fresh`, records a failing cell and goes on, retries only failed cells.
#include "harness/runner/results_table.h"
#include "harness/runner/runner.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/common/error.h"
#include "engine/model/llama_model.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

// random-tiny, passkey at 384 tokens (the byte-level tokenizer of random-tiny needs about 300
// for the passkey template alone), 1 sample, 2 new tokens: full + streaming_llm @ 32.
json passkey(int64_t context_length) {
  return {{"name", "passkey"},
          {"params", {{"context_length", context_length}, {"samples", 1}, {"max_new_tokens", 2}}}};
}

json small_suite() {
  return {{"name", "runner-test"},
          {"models", {"random-tiny"}},
          {"datasets", {passkey(384)}},
          {"methods", {"full", "streaming_llm"}},
          {"budgets", {32}},
          {"seeds", {0}}};
}

// The same, plus (first) a dataset config that passes validation but fails at run time: 32
// tokens cannot hold the passkey template, which only the model's tokenizer can tell.
json suite_with_failing_cells() {
  json j = small_suite();
  j["name"] = "runner-test-failing";
  j["datasets"] = {passkey(32), passkey(384)};
  return j;
}

int64_t count(const ResultStore& store, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store.handle(), sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  int64_t v = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

// One row of the cells table.
struct Row {
  int64_t id = 0, run_id = 0;
  std::string status;
  bool operator==(const Row& o) const {
    return id == o.id && run_id == o.run_id && status == o.status;
  }
};

void PrintTo(const Row& r, std::ostream* os) {
  *os << "{id " << r.id << ", run " << r.run_id << ", " << r.status << "}";
}

// config_json -> its row, for every cell row in the database (failing on duplicates).
std::map<std::string, Row> cell_rows(const std::string& db) {
  ResultStore store(db);
  std::map<std::string, Row> rows;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store.handle(), "SELECT config_json, id, run_id, status FROM cells",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const std::string key = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    EXPECT_EQ(rows.count(key), 0u) << "two rows for one config: " << key;
    rows[key] = Row{sqlite3_column_int64(stmt, 1), sqlite3_column_int64(stmt, 2),
                    reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3))};
  }
  sqlite3_finalize(stmt);
  return rows;
}

class RunnerTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  RunOptions options() const {
    RunOptions o;
    o.db_path = dir.file("runs/r.db");
    o.command = "runner_test";
    return o;
  }
};

TEST_F(RunnerTest, RunsThenSkipsThenFreshRerunsAll) {
  const Suite suite = parse_suite(small_suite(), "runner_test.json");
  ASSERT_EQ(suite.cells().size(), 2u);

  std::ostringstream log1;
  const RunSummary first = run_suite(suite, options(), log1);
  EXPECT_EQ(first.ran, 2) << log1.str();
  EXPECT_EQ(first.skipped, 0);
  EXPECT_EQ(first.failed, 0) << log1.str();
  const auto rows1 = cell_rows(options().db_path);
  ASSERT_EQ(rows1.size(), 2u);
  for (const Cell& c : suite.cells()) {
    ASSERT_EQ(rows1.count(c.key()), 1u) << c.key();
    EXPECT_EQ(rows1.at(c.key()).status, "complete");
    EXPECT_EQ(rows1.at(c.key()).run_id, first.run_id);
  }
  {
    ResultStore store(options().db_path);
    EXPECT_EQ(store.latest_run(), first.run_id);
    EXPECT_EQ(count(store, "SELECT status = 'complete' FROM runs WHERE id = " +
                               std::to_string(first.run_id)),
              1);
    // Every cell stored its sample and its cell-level metrics.
    for (const CellRow& c : store.cells_of_run(first.run_id)) {
      EXPECT_EQ(store.cell_samples(c.id).size(), 1u) << c.method;
      bool has_score = false;
      for (const MetricRow& m : store.cell_metrics(c.id)) has_score |= m.name == "score";
      EXPECT_TRUE(has_score) << c.method;
    }
    // The run's suite JSON and provenance are stored.
    EXPECT_EQ(count(store, "SELECT count(*) FROM runs WHERE suite = 'runner-test' AND "
                           "suite_json LIKE '%streaming_llm%' AND command = 'runner_test'"),
              1);
  }

  std::ostringstream log2;
  const RunSummary second = run_suite(suite, options(), log2);
  EXPECT_EQ(second.ran, 0);
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.failed, 0);
  EXPECT_NE(second.run_id, first.run_id);
  EXPECT_NE(log2.str().find("already complete"), std::string::npos) << log2.str();
  EXPECT_EQ(cell_rows(options().db_path), rows1);  // same rows, untouched
  {
    // The second run's table lists the first run's cells, naming the run that computed them.
    ResultStore store(options().db_path);
    std::ostringstream table;
    print_run(store, second.run_id, table);
    EXPECT_NE(table.str().find("2 cells computed by run " + std::to_string(first.run_id) +
                               " (its own provenance: kvbench show " +
                               std::to_string(first.run_id) + ")"),
              std::string::npos)
        << table.str();
    std::ostringstream own;
    print_run(store, first.run_id, own);
    EXPECT_EQ(own.str().find("computed by run"), std::string::npos) << own.str();
  }

  // Mark the stored rows, so that rows written again can be told apart (SQLite may reuse the
  // ids of deleted rows).
  {
    ResultStore store(options().db_path);
    ASSERT_EQ(sqlite3_exec(store.handle(), "UPDATE cells SET elapsed_s = -1", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
  }
  RunOptions fresh = options();
  fresh.fresh = true;
  std::ostringstream log3;
  const RunSummary third = run_suite(suite, fresh, log3);
  EXPECT_EQ(third.ran, 2);
  EXPECT_EQ(third.skipped, 0);
  EXPECT_EQ(third.failed, 0);
  EXPECT_EQ(log3.str().find("already complete"), std::string::npos) << log3.str();
  const auto rows3 = cell_rows(options().db_path);
  ASSERT_EQ(rows3.size(), 2u);
  for (const auto& [key, row] : rows3) {
    EXPECT_EQ(row.status, "complete");
    EXPECT_EQ(row.run_id, third.run_id);
  }
  ResultStore store(options().db_path);
  EXPECT_EQ(count(store, "SELECT count(*) FROM cells WHERE elapsed_s < 0"), 0) << "not rerun";
  // --fresh forgot the earlier runs of the suite.
  EXPECT_EQ(count(store, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(store.integrity_check(), "ok");
}

// attention_ms_per_token is split per layer (attention_ms_per_token.layerN, one per layer of
// random-tiny), and the layers add up to the total.
TEST_F(RunnerTest, AttentionTimeIsSplitPerLayer) {
  const Suite suite = parse_suite(small_suite(), "runner_test.json");
  std::ostringstream log;
  const RunSummary summary = run_suite(suite, options(), log);
  ASSERT_EQ(summary.failed, 0) << log.str();
  const int layers = LlamaModel::from_reference("random-tiny")->config.num_hidden_layers;
  ResultStore store(options().db_path);
  for (const CellRow& c : store.cells_of_run(summary.run_id)) {
    std::map<std::string, double> metrics;
    for (const MetricRow& m : store.cell_metrics(c.id)) metrics[m.name] = m.value;
    ASSERT_EQ(metrics.count("attention_ms_per_token"), 1u) << c.method;
    double sum = 0;
    for (int l = 0; l < layers; ++l) {
      const std::string name = "attention_ms_per_token.layer" + std::to_string(l);
      ASSERT_EQ(metrics.count(name), 1u) << c.method << " " << name;
      EXPECT_GT(metrics[name], 0.0) << c.method << " " << name;
      sum += metrics[name];
    }
    EXPECT_EQ(metrics.count("attention_ms_per_token.layer" + std::to_string(layers)), 0u);
    EXPECT_NEAR(sum, metrics["attention_ms_per_token"], 1e-9 * sum) << c.method;
  }
}

TEST_F(RunnerTest, FailingCellIsRecordedAndOthersComplete) {
  const Suite suite = parse_suite(suite_with_failing_cells(), "runner_test.json");
  const std::vector<Cell> cells = suite.cells();
  ASSERT_EQ(cells.size(), 4u);
  // The failing cells come first: the suite must go on after them.
  std::set<std::string> failing_keys = {cells[0].key(), cells[1].key()};
  ASSERT_EQ(cells[0].dataset.params["context_length"], 32);
  ASSERT_EQ(cells[1].dataset.params["context_length"], 32);

  std::ostringstream log1;
  const RunSummary first = run_suite(suite, options(), log1);
  EXPECT_EQ(first.ran, 2) << log1.str();
  EXPECT_EQ(first.failed, 2) << log1.str();
  EXPECT_EQ(first.skipped, 0);
  EXPECT_NE(log1.str().find("FAILED"), std::string::npos) << log1.str();

  const auto rows1 = cell_rows(options().db_path);
  ASSERT_EQ(rows1.size(), 4u);
  {
    ResultStore store(options().db_path);
    const std::vector<CellRow> stored = store.cells_of_run(first.run_id);
    ASSERT_EQ(stored.size(), 4u);
    for (const CellRow& c : stored) {
      if (failing_keys.count(c.config_json)) {
        EXPECT_EQ(c.status, "failed");
        EXPECT_NE(c.error.find("context_length 32 is too short"), std::string::npos) << c.error;
        EXPECT_TRUE(store.cell_samples(c.id).empty());
        EXPECT_TRUE(store.cell_metrics(c.id).empty());
      } else {
        EXPECT_EQ(c.status, "complete") << c.method << ": " << c.error;
        EXPECT_EQ(c.error, "");
        EXPECT_EQ(store.cell_samples(c.id).size(), 1u);
      }
    }
    EXPECT_EQ(count(store, "SELECT status = 'failures' FROM runs WHERE id = " +
                               std::to_string(first.run_id)),
              1);
  }

  // A rerun retries the failed cells only (they fail again: their config has not changed).
  std::ostringstream log2;
  const RunSummary second = run_suite(suite, options(), log2);
  EXPECT_EQ(second.ran, 0) << log2.str();
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.failed, 2);
  const auto rows2 = cell_rows(options().db_path);
  ASSERT_EQ(rows2.size(), 4u);  // the failed rows were replaced, not duplicated
  for (const auto& [key, row] : rows2) {
    if (failing_keys.count(key)) {
      EXPECT_EQ(row.status, "failed");
      EXPECT_EQ(row.run_id, second.run_id) << "the failed cell was not redone";
    } else {
      EXPECT_EQ(row, rows1.at(key)) << "a complete cell was redone: " << key;
    }
  }
  ResultStore store(options().db_path);
  EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(RunnerTest, FixedFailingCellCompletesOnRerun) {
  // After a failure, a suite whose cells are all runnable runs only what is not complete.
  std::ostringstream log;
  ASSERT_EQ(run_suite(parse_suite(suite_with_failing_cells(), "runner_test.json"), options(), log)
                .failed,
            2);
  json fixed = suite_with_failing_cells();
  fixed["datasets"][0] = passkey(400);
  const RunSummary second = run_suite(parse_suite(fixed, "runner_test.json"), options(), log);
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.ran, 2) << log.str();
  EXPECT_EQ(second.failed, 0) << log.str();
}

// A result is reused only while the model under its name is the one it ran with: once a
// model folder is saved over with other weights (a retrained checkpoint), a run is refused
// before it begins (nothing written); with redo_changed_models the other model's results are
// forgotten and the cells redone; the same weights again are skipped.
TEST_F(RunnerTest, AModelSavedOverItsFolderIsRefusedOrRedone) {
  const std::string folder = dir.file("model");
  save_model(*LlamaModel::random(random_tiny_config(), 1), folder);
  json j = small_suite();
  j["models"] = {folder};
  const Suite suite = parse_suite(j, "runner_test.json");
  std::ostringstream log1, log2, log3, log4, log5;
  ASSERT_EQ(run_suite(suite, options(), log1).ran, 2) << log1.str();
  EXPECT_EQ(run_suite(suite, options(), log2).skipped, 2) << log2.str();
  const std::map<std::string, Row> before = cell_rows(options().db_path);
  const int64_t runs = count(ResultStore(options().db_path), "SELECT count(*) FROM runs");

  std::filesystem::remove_all(folder);
  save_model(*LlamaModel::random(random_tiny_config(), 2), folder);
  try {
    run_suite(suite, options(), log3);
    ADD_FAILURE() << "ran on another model's results";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("2 cells of this run stored results of another model "
                                         "under the name they give it (" + folder + " is now v1:"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--redo-changed-models"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cell_rows(options().db_path), before);
  EXPECT_EQ(count(ResultStore(options().db_path), "SELECT count(*) FROM runs"), runs);

  RunOptions redo = options();
  redo.redo_changed_models = true;
  const RunSummary retrained = run_suite(suite, redo, log4);
  EXPECT_EQ(retrained.ran, 2) << log4.str();
  EXPECT_NE(log4.str().find("--redo-changed-models: forgot 2 results of another model"),
            std::string::npos) << log4.str();
  const std::map<std::string, Row> after = cell_rows(options().db_path);  // one row a key
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [key, row] : after) {
    EXPECT_EQ(row.status, "complete") << key;
    EXPECT_EQ(row.run_id, retrained.run_id) << key;
  }
  EXPECT_EQ(run_suite(suite, options(), log5).skipped, 2) << log5.str();
}

TEST_F(RunnerTest, UnopenableDatabaseIsInputError) {
  const Suite suite = parse_suite(small_suite(), "runner_test.json");
  RunOptions o = options();
  o.db_path = dir.file("text.db");
  std::ofstream(o.db_path) << std::string(4096, 'x');
  std::ostringstream log;
  EXPECT_THROW(run_suite(suite, o, log), InputError);
}

// A run's provenance names the commit its binary was built from, read at build time (it was
// once read when cmake configured the folder, so incremental builds reported an old commit).
TEST(RunProvenance, NamesTheCommitTheBinaryWasBuiltFrom) {
  const test::CliRun head =
      test::run_shell("git -C '" KVBENCH_SOURCE_DIR "' rev-parse --short=12 HEAD");
  if (head.code != 0) GTEST_SKIP() << "the source folder is not a git checkout: " << head.output;
  const RunInfo info = current_run_info(parse_suite(small_suite(), "runner_test.json"), {}, "t", 1);
  EXPECT_EQ(info.git_commit.substr(0, 12), head.output.substr(0, 12))
      << "built from another commit than the checkout's HEAD: rebuild before testing";
}

}  // namespace
}  // namespace kvb

namespace kvb {
namespace {

// A truncated weights file was found by each cell's load: the run recorded every cell as
// failed (exit 1) where generate refuses the folder (exit 2). The pre-run check reads the
// safetensors headers too.
TEST_F(RunnerTest, ATruncatedCheckpointIsRefusedBeforeTheRun) {
  const std::string folder = dir.file("model");
  save_model(*LlamaModel::random(random_tiny_config(), 1), folder);
  json j = small_suite();
  j["models"] = {folder};
  const Suite suite = parse_suite(j, "runner_test.json");
  EXPECT_NO_THROW(check_model_configs(suite, false));
  const std::string weights = folder + "/model.safetensors";
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);
  try {
    check_model_configs(suite, false);
    ADD_FAILURE() << "a truncated checkpoint passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(weights), std::string::npos) << e.what();
  }
}

// A built-in template's special markers spelt out as text where the model's tokenizer has no
// such token (llama3's on a SentencePiece model): a different prompt, refused. The same text
// in the sample's own words is the sample's.
TEST(EncodePrompt, AChatTemplateMarkerThatIsNoTokenIsRefused) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  Sample s;
  s.id = "s";
  s.prompt = "Hi";
  s.chat_template = "llama3";
  try {
    encode_prompt(*model, s);
    ADD_FAILURE() << "llama3's markers read as text";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sample s: llama3's <|start_header_id|> is no token"),
              std::string::npos) << e.what();
  }
  s.chat_template = "none";
  s.prompt = "a quoted <|im_start|> in the sample's text";
  EXPECT_NO_THROW(encode_prompt(*model, s));
}

// A sample that stops at the tokenizer's eos_token alone: that id and its stop texts', not the
// model's other EOS ids; refused where tokenizer_config.json sets no eos_token.
TEST(EncodePrompt, StopIdsAtTheEosTokenAloneWhereTheSampleSaysSo) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  model->config.eos_token_ids = {5};
  Sample s;
  s.id = "s";
  s.stop_texts = {"\n"};
  const int eos = model->tokenizer->encode("</s>", false).at(0);
  const int newline = model->tokenizer->encode("\n", false).back();
  std::vector<int> every = model->tokenizer->eos_ids();
  every.insert(every.end(), {5, newline});
  EXPECT_EQ(stop_ids(*model, s), every);
  // An id named twice (config.json's EOS is the tokenizer's, a stop text's last token) once.
  model->config.eos_token_ids = {5, eos};
  s.stop_texts = {"\n", "</s>"};
  EXPECT_EQ(stop_ids(*model, s), every);
  model->config.eos_token_ids = {5};
  s.stop_texts = {"\n"};
  s.stops_at_eos_token_only = true;
  EXPECT_EQ(stop_ids(*model, s), (std::vector<int>{eos, newline}));
  // A family listed as stopping at every EOS id does so whatever stops_at_eos_token_only says
  // (ClusterKV's GLM-4); another family does not.
  const std::string family = detect_chat_template(model->tokenizer_config);
  s.every_eos_id_families = {family};
  EXPECT_EQ(stop_ids(*model, s), every);
  s.every_eos_id_families = {family + "_other"};
  EXPECT_EQ(stop_ids(*model, s), (std::vector<int>{eos, newline}));
  model->tokenizer_config.erase("eos_token");
  try {
    stop_ids(*model, s);
    ADD_FAILURE() << "no eos_token, yet stop ids";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sample s: its reference stops at the tokenizer's "
                                         "eos_token, which"), std::string::npos) << e.what();
  }
}

// The model's own template's text is encoded as transformers' apply_chat_template(tokenize=True)
// encodes it: as written, its BOS read from the text, nothing added (here no EOS, which this
// tokenizer's add_eos_token would append to a text encoded with its special tokens).
TEST(EncodePrompt, TheModelsOwnTemplateIsEncodedAsWrittenWithNothingAdded) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  json config = model->tokenizer_config;
  config["add_eos_token"] = true;
  model->tokenizer = Tokenizer::from_json(model->tokenizer_json, config, "kvbench-tiny");
  model->tokenizer_config = config;
  model->tokenizer_config["chat_template"] = "{{ bos_token }}[INST] {{ messages[0].content }} [/INST]";
  Sample s;
  s.prompt = "Hi";
  s.chat_template = "auto";
  const std::vector<int> ids = encode_prompt(*model, s);
  EXPECT_EQ(ids, model->tokenizer->encode("<s>[INST] Hi [/INST]", /*add_special=*/false));
  EXPECT_NE(ids.back(), model->tokenizer->eos_ids().front());
  EXPECT_EQ(model->tokenizer->encode("[INST] Hi [/INST]", true).back(),
            model->tokenizer->eos_ids().front());  // what encoding with special tokens adds
}

// "auto" with a family mapped to kOwnTemplateAsText: the model's own template as text, its
// BOS kept, so that encoding adds another (AdaKV's pred.py on Llama-3).
TEST(EncodePrompt, OwnTemplateAsTextKeepsTheBosItWrites) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  Sample s;
  s.prompt = "Hi";
  s.chat_template = "auto";
  s.auto_chat_as = {{"mistral", kOwnTemplateAsText}};
  model->tokenizer_config["chat_template"] = "{{ bos_token }}[INST] {{ messages[0].content }} [/INST]";
  const std::vector<int> ids = encode_prompt(*model, s);
  const int bos = model->tokenizer->bos_id();
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bos);
  EXPECT_EQ(ids[1], bos);
  EXPECT_EQ(ids, model->tokenizer->encode("<s>[INST] Hi [/INST]", true));
  EXPECT_TRUE(chat_template_choice(*model, s).as_text);
}

// "auto": the model's own template rendered, unless the sample names a built-in form for the
// model's family (or none); a model without a template: unwrapped.
TEST(EncodePrompt, AutoRendersTheModelsOwnUnlessTheSampleNamesAFormForItsFamily) {
  auto model = LlamaModel::from_reference("kvbench-tiny");
  Sample s;
  s.prompt = " Hi";
  s.chat_template = "auto";
  const auto encoded = [&](const std::string& text) {
    return model->tokenizer->encode(text, /*add_special=*/true);
  };
  model->tokenizer_config = {{"bos_token", "<s>"},
                             {"chat_template", "{{ bos_token }}{% for m in messages %}{{ '[INST] ' "
                                               "+ m['content'].strip() + ' [/INST]' }}{% endfor %}"}};
  EXPECT_EQ(encode_prompt(*model, s), encoded("[INST] Hi [/INST]"));  // stripped, one BOS
  const ChatTemplateChoice own = chat_template_choice(*model, s);
  EXPECT_TRUE(own.own);
  EXPECT_EQ(own.family, "mistral");
  EXPECT_TRUE(own.applied());
  s.auto_chat_as = {{"mistral", "none"}};
  EXPECT_EQ(encode_prompt(*model, s), encoded(" Hi"));
  const ChatTemplateChoice left = chat_template_choice(*model, s);  // what kvbench samples shows
  EXPECT_EQ(left.name, "none");
  EXPECT_EQ(left.family, "mistral");
  EXPECT_TRUE(left.automatic);
  EXPECT_FALSE(left.applied());
  s.auto_chat_as = {{"mistral", "llama2_longbench"}};  // another form for the family
  EXPECT_EQ(encode_prompt(*model, s), encoded("[INST] Hi[/INST]"));
  s.auto_chat_as = {{"mistral", "none"}};
  model->tokenizer_config["chat_template"] =
      "{{ bos_token }}<<SYS>>{{ '[INST] ' + messages[0].content + ' [/INST]' }}";
  EXPECT_EQ(encode_prompt(*model, s), encoded("<<SYS>>[INST]  Hi [/INST]"));  // Llama-2: its own
  EXPECT_TRUE(chat_template_choice(*model, s).applied());
  model->tokenizer_config["chat_template"] = "{{ undefined_name.attribute }}";
  EXPECT_THROW(encode_prompt(*model, s), InputError);
  model->tokenizer_config = json::object();  // no template: "auto" wraps nothing
  EXPECT_EQ(chat_template_choice(*model, s).name, "none");
  EXPECT_EQ(chat_template_choice(*model, s).family, "none");
  EXPECT_FALSE(chat_template_choice(*model, s).applied());
  EXPECT_EQ(encode_prompt(*model, s), encoded(" Hi"));
}

}  // namespace
}  // namespace kvb
