// The LongBench loader on the fixtures in tests/data/longbench/: prompts, truncation, chat
// templates, stop texts, scoring, and each input error.
#include "datasets/longbench/longbench.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "datasets/metrics/longbench_metrics.h"
#include "engine/common/error.h"
#include "tests/datasets/dataset_test_util.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

using test::byte_tokenizer;
using test::error_of;
using test::make_dataset;

const std::string kFixtures = std::string(KVBENCH_SOURCE_DIR) + "/tests/data/longbench";


TEST(LongBenchConfig, All21DatasetsHaveATemplateAndLength) {
  ASSERT_EQ(longbench_datasets().size(), 21u);
  int without_chat = 0;
  for (const std::string& name : longbench_datasets()) {
    const LongBenchTask& t = longbench_task(name);
    EXPECT_NE(t.prompt.find("{context}"), std::string::npos) << name;
    EXPECT_GT(t.max_new_tokens, 0) << name;
    without_chat += t.chat_template ? 0 : 1;
  }
  EXPECT_EQ(without_chat, 6);
  EXPECT_EQ(longbench_task("gov_report").max_new_tokens, 512);
  EXPECT_EQ(longbench_task("hotpotqa").max_new_tokens, 32);
  EXPECT_NE(longbench_task("narrativeqa").prompt.find("asconcisely"), std::string::npos);
  EXPECT_TRUE(longbench_task("samsum").stop_at_newline);
}

TEST(LongBenchLoader, PromptIsTheTemplateFilledIn) {
  auto d = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/good"},
                                      {"chat_template", "none"}});
  const auto samples = d->samples(byte_tokenizer(), 0);
  ASSERT_EQ(samples.size(), 3u);
  const auto records = read_longbench_jsonl(kFixtures + "/good/hotpotqa.jsonl");
  EXPECT_EQ(samples[0].prompt,
            longbench_format(longbench_task("hotpotqa").prompt, records[0].context, records[0].input));
  EXPECT_NE(samples[0].prompt.find("Question: When was the lighthouse"), std::string::npos);
  EXPECT_EQ(samples[0].id, "hotpotqa-fixture-0");
  EXPECT_EQ(samples[0].max_new_tokens, 32);
  EXPECT_EQ(samples[0].chat_template, "none");
  EXPECT_EQ(samples[2].answers, (std::vector<std::string>{"Verrin", "the town of Verrin"}));
  EXPECT_EQ(d->score(samples[2], "Verrin"), 100.0);
  EXPECT_EQ(d->metric_name(), "qa_f1_score");
}

TEST(LongBenchLoader, SamplesLimitAndFormatIsNotRecursive) {
  auto d = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/good"},
                                      {"samples", 1}});
  EXPECT_EQ(d->samples(byte_tokenizer(), 0).size(), 1u);
  EXPECT_EQ(longbench_format("[{context}|{input}]", "{input}", "x"), "[{input}|x]");
}

TEST(LongBenchLoader, ChatTemplateAutoNamedAndNeverForSixDatasets) {
  const std::string dir = kFixtures + "/good";
  auto hotpot = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", dir}});
  EXPECT_EQ(hotpot->samples(byte_tokenizer(), 0)[0].chat_template, "auto");
  EXPECT_EQ(hotpot->samples(byte_tokenizer(), 0)[0].auto_chat_as,
            (std::map<std::string, std::string>{{"llama2", "llama2"}, {"llama3", "llama3"},
                                                 {"llama3_1", "llama3"},
                                                 {"mistral", "none"}}));  // "reference", the default
  auto every = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", dir},
                                          {"chat_template", "auto"}});
  EXPECT_EQ(every->samples(byte_tokenizer(), 0)[0].chat_template, "auto");
  EXPECT_TRUE(every->samples(byte_tokenizer(), 0)[0].auto_chat_as.empty());
  // auto's and reference's prompts changed (the model's own template rendered from its Jinja):
  // their cells are redone; a named template's are not.
  const DatasetInfo& info = dataset_registry().get("longbench", "test");
  EXPECT_EQ(info.revision({{"chat_template", "auto"}}), 2);
  EXPECT_EQ(info.revision({{"chat_template", "reference"}}), 1);
  EXPECT_EQ(info.revision({{"chat_template", "llama3"}}), 0);
  auto named = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", dir},
                                          {"chat_template", "llama2"}});
  const Sample s = named->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(s.chat_template, "none");
  EXPECT_EQ(s.prompt.rfind("[INST] ", 0), 0u);
  auto trec = make_dataset("longbench", {{"dataset", "trec"}, {"data_dir", dir},
                                         {"chat_template", "llama2"}});
  const Sample t = trec->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(t.chat_template, "none");
  EXPECT_EQ(t.prompt.find("[INST]"), std::string::npos);
  // llama3's markers are no tokens of the byte tokenizer: its prompt would spell them out.
  auto foreign = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", dir},
                                            {"chat_template", "llama3"}});
  EXPECT_NE(error_of([&] { foreign->samples(byte_tokenizer(), 0); })
                .find("chat_template: llama3's <|start_header_id|> is no token"),
            std::string::npos);
  EXPECT_EQ(t.prompt.substr(0, 30), "Please determine the type of t");
}

// Quest's and ClusterKV's pred.py read each prompt's last <= 100 characters through decode
// steps, from the task's anchor when it lies within them (the runner splits the prompt the
// model reads: split_decoded_end, tested in tests/harness/runner/context_sharing_test.cpp).
TEST(LongBenchLoader, PredScriptsMarkTheEndTheirReferenceDecodes) {
  test::TempDir dir;
  std::ofstream(dir.file("triviaqa.jsonl"))
      << json{{"input", "Who?"}, {"context", "Q: x A: y"}, {"answers", {"y"}}, {"length", 9},
              {"all_classes", nullptr}, {"_id", "t0"}}.dump() << "\n";
  const std::string good = kFixtures + "/good";
  const Sample thudm =
      make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", good}})
          ->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(thudm.decoded_chars, 0u);
  const Sample quest = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", good},
                                                  {"pred_script", "quest"}})
                           ->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(quest.decoded_chars, 100u);
  EXPECT_EQ(quest.decoded_anchor, "Question:");
  EXPECT_EQ(quest.prompt, thudm.prompt);
  // Quest anchors no passage_count: its last 100 characters; ClusterKV's pred.py asserts.
  const Sample count = make_dataset("longbench", {{"dataset", "passage_count"}, {"data_dir", good},
                                                  {"pred_script", "quest"}})
                           ->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(count.decoded_chars, 100u);
  EXPECT_EQ(count.decoded_anchor, "");
  EXPECT_NE(error_of([&] {
              make_dataset("longbench", {{"dataset", "passage_count"}, {"data_dir", good},
                                         {"pred_script", "clusterkv"}});
            }).find("pred_script: ClusterKV's pred.py reads only 2wikimqa, gov_report"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", good},
                                         {"pred_script", "h2o"}});
            }).find("expected one of longbench, quest, clusterkv"),
            std::string::npos);
  // ClusterKV wraps triviaqa in the chat template, which THUDM's and Quest's leave unwrapped.
  for (const char* script : {"longbench", "quest", "clusterkv"}) {
    const Sample t = make_dataset("longbench", {{"dataset", "triviaqa"}, {"data_dir", dir.path()},
                                                {"pred_script", script}})
                         ->samples(byte_tokenizer(), 0)[0];
    EXPECT_EQ(t.chat_template, std::string(script) == "clusterkv" ? "auto" : "none") << script;
  }
}

// KVCache-Factory's run_longbench.py and vllm-kvcompress's experiments/run_longbench.py keep
// THUDM's prompts but never stop at the first token (min_length / min_tokens on every task);
// vllm-kvcompress also wraps Llama models in SnapKV's forms, leaves passage_count unwrapped
// and does not stop samsum at a newline. Both run the 16 English tasks only.
TEST(LongBenchLoader, ForkRunnersWrapAndStopAsTheirCode) {
  const std::string good = kFixtures + "/good";
  auto sample = [&](const std::string& dataset, const std::string& script) {
    return make_dataset("longbench", {{"dataset", dataset}, {"data_dir", good},
                                      {"pred_script", script}})
        ->samples(byte_tokenizer(), 0)[0];
  };
  const Sample thudm = sample("hotpotqa", "longbench"), factory = sample("hotpotqa", "kvcache-factory"),
               kvc = sample("hotpotqa", "kvcompress");
  EXPECT_EQ(thudm.min_new_tokens, 0);
  EXPECT_EQ(factory.min_new_tokens, 1);
  EXPECT_EQ(kvc.min_new_tokens, 1);
  EXPECT_EQ(factory.prompt, thudm.prompt);
  EXPECT_EQ(kvc.prompt, thudm.prompt);
  EXPECT_EQ(factory.auto_chat_as, thudm.auto_chat_as);
  EXPECT_EQ(kvc.auto_chat_as, (std::map<std::string, std::string>{
                                  {"llama2", "llama2_longbench"}, {"llama3", "llama3_snapkv"},
                                  {"llama3_1", "llama3_snapkv"}, {"mistral", "none"}}));
  EXPECT_EQ(sample("passage_count", "longbench").chat_template, "auto");
  EXPECT_EQ(sample("passage_count", "kvcache-factory").chat_template, "auto");
  EXPECT_EQ(sample("passage_count", "kvcompress").chat_template, "none");
  const Sample samsum = sample("samsum", "kvcache-factory"), samsum_kvc = sample("samsum", "kvcompress");
  EXPECT_EQ(samsum.stop_texts, std::vector<std::string>{"\n"});
  EXPECT_EQ(samsum.min_new_tokens, 1);
  EXPECT_TRUE(samsum_kvc.stop_texts.empty());
  EXPECT_EQ(samsum_kvc.min_new_tokens, 1);
  // PQCache: the Llama-3 models' own templates with its system message, Mistral and Llama-2
  // as [INST]p[/INST]; THUDM's generation; no lcc or repobench-p.
  const Sample pq = sample("hotpotqa", "pqcache"), pq_samsum = sample("samsum", "pqcache");
  EXPECT_EQ(pq.auto_chat_as, (std::map<std::string, std::string>{
                                 {"llama2", "llama2_longbench"}, {"llama3", "llama3_pqcache"},
                                 {"llama3_1", "llama3_1_pqcache"}, {"mistral", "llama2_longbench"}}));
  EXPECT_EQ(pq.min_new_tokens, 0);
  EXPECT_EQ(pq_samsum.stop_texts, std::vector<std::string>{"\n"});
  EXPECT_EQ(sample("passage_count", "pqcache").chat_template, "auto");
  EXPECT_NE(error_of([&] {
              make_dataset("longbench", {{"dataset", "lcc"}, {"data_dir", good},
                                         {"pred_script", "pqcache"}});
            }).find("PQCache's vq_pred.py runs only narrativeqa"),
            std::string::npos);
  // THUDM's reference form for Llama-3.1: KVCache-Factory's written Llama-3 one.
  EXPECT_EQ(thudm.auto_chat_as,
            (std::map<std::string, std::string>{{"llama2", "llama2"}, {"llama3", "llama3"},
                                                {"llama3_1", "llama3"}, {"mistral", "none"}}));
  for (const char* script : {"kvcache-factory", "kvcompress", "pqcache"}) {
    EXPECT_NE(error_of([&] {
                make_dataset("longbench", {{"dataset", "multifieldqa_zh"}, {"data_dir", good},
                                           {"pred_script", script}});
              }).find("runs only narrativeqa, qasper, multifieldqa_en"),
              std::string::npos) << script;
    EXPECT_NE(error_of([&] {
                make_dataset("longbench", {{"dataset", "hotpotqa_e"}, {"data_dir", good},
                                           {"pred_script", script}});
              }).find("LongBench's own files, not LongBench-E's (hotpotqa_e)"),
              std::string::npos) << script;
  }
}

// AdaKV's pred.py: THUDM's prompts and cut, Llama-3-Instruct in its own template rendered as
// text (apply_chat_template(tokenize=False), then the tokenizer: two BOS), every task stopped
// at the tokenizer's eos_token alone; its 16 English tasks. The stops of the other scripts:
// samsum's at the tokenizer's eos_token and "\n" (THUDM's, PQCache's), at every EOS id and
// "\n" (KVCache-Factory's); Quest's every task at the eos_token, Quest's and ClusterKV's first
// token not compared with the stops; Quest's and ClusterKV's chat forms.
TEST(LongBenchLoader, AdakvsRunnerAndEachScriptsStopsAndForms) {
  const std::string good = kFixtures + "/good";
  auto sample = [&](const std::string& dataset, const std::string& script) {
    return make_dataset("longbench", {{"dataset", dataset}, {"data_dir", good},
                                      {"pred_script", script}})
        ->samples(byte_tokenizer(), 0)[0];
  };
  const Sample ada = sample("hotpotqa", "adakv");
  EXPECT_EQ(ada.chat_template, "auto");
  EXPECT_EQ(ada.auto_chat_as, (std::map<std::string, std::string>{
                                  {"llama2", "llama2_longbench"}, {"llama3", kOwnTemplateAsText},
                                  {"llama3_1", kOwnTemplateAsText}, {"mistral", "none"}}));
  EXPECT_TRUE(ada.stops_at_eos_token_only);
  EXPECT_EQ(ada.min_new_tokens, 0);
  EXPECT_EQ(ada.unchecked_new_tokens, 0);
  EXPECT_EQ(ada.prompt, sample("hotpotqa", "longbench").prompt);
  EXPECT_NE(error_of([&] {
              make_dataset("longbench", {{"dataset", "dureader"}, {"data_dir", good},
                                         {"pred_script", "adakv"}});
            }).find("AdaKV's pred.py runs only narrativeqa"),
            std::string::npos);
  EXPECT_FALSE(sample("hotpotqa", "longbench").stops_at_eos_token_only);
  for (const char* script : {"longbench", "pqcache", "adakv"}) {
    const Sample samsum = sample("samsum", script);
    EXPECT_TRUE(samsum.stops_at_eos_token_only) << script;
    EXPECT_EQ(samsum.stop_texts, std::vector<std::string>{"\n"}) << script;
  }
  EXPECT_FALSE(sample("samsum", "kvcache-factory").stops_at_eos_token_only);
  EXPECT_FALSE(sample("samsum", "kvcompress").stops_at_eos_token_only);
  const Sample quest = sample("hotpotqa", "quest"), cluster = sample("hotpotqa", "clusterkv");
  EXPECT_TRUE(quest.stops_at_eos_token_only);
  EXPECT_EQ(quest.unchecked_new_tokens, 1);
  EXPECT_TRUE(quest.every_eos_id_families.empty());
  // ClusterKV's pred.py: GLM-4 at its three EOS ids, every other model at eos_token alone.
  EXPECT_TRUE(cluster.stops_at_eos_token_only);
  EXPECT_EQ(cluster.every_eos_id_families, std::vector<std::string>{"glm4"});
  EXPECT_EQ(cluster.unchecked_new_tokens, 1);
  // Their build_chat forms: Quest's Llama-2 as [INST]p[/INST], the rest unwrapped; ClusterKV's
  // GLM-4 and Llama-3 in their own templates as text (the prefix twice), the rest unwrapped.
  EXPECT_EQ(quest.auto_chat_as, (std::map<std::string, std::string>{
                                    {"llama2", "llama2_longbench"}, {"llama3", "none"},
                                    {"llama3_1", "none"}, {"mistral", "none"}}));
  EXPECT_EQ(cluster.auto_chat_as, (std::map<std::string, std::string>{
                                      {"glm4", kOwnTemplateAsText}, {"llama2", "none"},
                                      {"llama3", kOwnTemplateAsText},
                                      {"llama3_1", kOwnTemplateAsText}, {"mistral", "none"}}));
  // The cells whose stops changed are redone.
  const DatasetInfo& info = dataset_registry().get("longbench", "test");
  EXPECT_EQ(info.revision({{"dataset", "samsum"}, {"chat_template", "reference"}}), 2);
  EXPECT_EQ(info.revision({{"dataset", "samsum"}, {"chat_template", "reference"},
                           {"pred_script", "kvcache-factory"}}), 1);
  EXPECT_EQ(info.revision({{"dataset", "hotpotqa"}, {"chat_template", "none"},
                           {"pred_script", "quest"}}), 1);
  EXPECT_EQ(info.revision({{"dataset", "hotpotqa"}, {"chat_template", "none"},
                           {"pred_script", "clusterkv"}}), 2);
  EXPECT_EQ(info.revision({{"dataset", "hotpotqa"}, {"chat_template", "none"}}), 0);
}

TEST(LongBenchLoader, MiddleTruncationKeepsBothHalves) {
  auto d = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/good"},
                                      {"chat_template", "none"}, {"max_length", 64}});
  const auto samples = d->samples(byte_tokenizer(), 0);
  const auto records = read_longbench_jsonl(kFixtures + "/good/hotpotqa.jsonl");
  const std::string full =
      longbench_format(longbench_task("hotpotqa").prompt, records[0].context, records[0].input);
  // The first 32 and the last 32 tokens (BOS included), each decoded on its own.
  const std::vector<int> ids = byte_tokenizer().encode(full, true);
  ASSERT_GT(ids.size(), 64u);
  EXPECT_EQ(samples[0].prompt,
            byte_tokenizer().decode(std::vector<int>(ids.begin(), ids.begin() + 32)) +
                byte_tokenizer().decode(std::vector<int>(ids.end() - 32, ids.end())));
  EXPECT_NE(samples[0].prompt.find("Answer:"), std::string::npos);  // the tail survives
  EXPECT_TRUE(samples[0].meta["truncated"].get<bool>());
  // Short enough: untouched.
  EXPECT_EQ(longbench_truncate(byte_tokenizer(), "short", 64), "short");
}

TEST(LongBenchLoader, ClassesStopTextsAndFirstLine) {
  const std::string dir = kFixtures + "/good";
  auto trec = make_dataset("longbench", {{"dataset", "trec"}, {"data_dir", dir}});
  const Sample t = trec->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(t.meta["all_classes"].size(), 4u);
  EXPECT_EQ(trec->score(t, "City\nCountry"), 100.0);  // only the first line counts
  EXPECT_EQ(trec->score(t, "City or Country"), 50.0);
  auto samsum = make_dataset("longbench", {{"dataset", "samsum"}, {"data_dir", dir}});
  EXPECT_EQ(samsum->samples(byte_tokenizer(), 0)[0].stop_texts, std::vector<std::string>{"\n"});
  EXPECT_EQ(samsum->samples(byte_tokenizer(), 0)[0].min_new_tokens, 1);  // pred.py's min_length
  EXPECT_EQ(t.min_new_tokens, 0);
  auto count = make_dataset("longbench", {{"dataset", "passage_count"}, {"data_dir", dir}});
  const Sample c = count->samples(byte_tokenizer(), 0)[0];
  EXPECT_EQ(c.answers, std::vector<std::string>{"2"});  // integer answers read as str()
  EXPECT_EQ(count->score(c, "2"), 100.0);
}

TEST(LongBenchLoader, InputErrors) {
  auto make = [](const json& p) { return [p] { make_dataset("longbench", p)->samples(byte_tokenizer(), 0); }; };
  const std::string missing = error_of(make({{"dataset", "qasper"}, {"data_dir", kFixtures + "/good"}}));
  EXPECT_NE(missing.find(kFixtures + "/good/qasper.jsonl"), std::string::npos) << missing;
  const std::string malformed = error_of(make({{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/malformed"}}));
  EXPECT_NE(malformed.find("hotpotqa.jsonl:2"), std::string::npos) << malformed;
  const std::string no_answers = error_of(make({{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/no_answers"}}));
  EXPECT_NE(no_answers.find("hotpotqa.jsonl:1"), std::string::npos) << no_answers;
  EXPECT_NE(no_answers.find("answers"), std::string::npos) << no_answers;
  const std::string chinese = error_of(make({{"dataset", "vcsum"}, {"data_dir", kFixtures + "/good"},
                                             {"jieba_dict", "/nonexistent/dict.txt"}}));
  EXPECT_NE(chinese.find("/nonexistent/dict.txt"), std::string::npos) << chinese;
  EXPECT_NE(chinese.find("jieba_dict"), std::string::npos) << chinese;
  const std::string unknown = error_of(make({{"dataset", "hotpot"}, {"data_dir", kFixtures + "/good"}}));
  EXPECT_NE(unknown.find("hotpotqa"), std::string::npos) << unknown;  // lists the known ones
  const std::string no_dir = error_of(make({{"dataset", "hotpotqa"}}));
  EXPECT_NE(no_dir.find("data_dir"), std::string::npos) << no_dir;
  const std::string bad_template = error_of(make({{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/good"},
                                                  {"chat_template", "klingon"}}));
  EXPECT_NE(bad_template.find("chat_template"), std::string::npos) << bad_template;
}

// LongBench-E: <task>_e.jsonl read with the task's prompt and metric, and each length range of
// eval.py --e scored on its own (< 4000, < 8000, the rest).
TEST(LongBenchE, ReadsTheTasksFileAndScoresEachLengthRange) {
  test::TempDir dir;
  std::ofstream file(dir.file("hotpotqa_e.jsonl"));
  for (const int length : {3999, 4000, 7999, 12000})
    file << json{{"input", "Where?"}, {"context", "In Tartu."}, {"answers", {"Tartu"}},
                 {"length", length}, {"all_classes", nullptr},
                 {"_id", "e-" + std::to_string(length)}}.dump() << "\n";
  file.close();
  auto d = make_dataset("longbench", {{"dataset", "hotpotqa_e"}, {"data_dir", dir.path()},
                                      {"chat_template", "none"}});
  const auto samples = d->samples(byte_tokenizer(), 0);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].prompt, longbench_format(longbench_task("hotpotqa").prompt, "In Tartu.", "Where?"));
  EXPECT_EQ(samples[0].max_new_tokens, 32);
  EXPECT_EQ(d->metric_name(), "qa_f1_score");
  EXPECT_EQ(d->score(samples[0], "Tartu"), 100.0);
  // Scores 1, 0, F1([city, of, tartu], [tartu]) = 0.5 and 1: the range 4-8k is the mean of
  // the middle two, the others one record each.
  const auto breakdown =
      d->score_breakdown(samples, {"Tartu", "London", "the city of Tartu", "Tartu"});
  std::map<std::string, std::pair<double, std::string>> got;
  for (const auto& m : breakdown) got[m.name] = {m.value, m.unit};
  const std::map<std::string, std::pair<double, std::string>> expected = {
      {"score_0-4k", {100.0, "qa_f1_score"}}, {"records_0-4k", {1, "count"}},
      {"score_4-8k", {25.0, "qa_f1_score"}},  {"records_4-8k", {2, "count"}},
      {"score_8k+", {100.0, "qa_f1_score"}},  {"records_8k+", {1, "count"}}};
  EXPECT_EQ(got, expected);
  // A range without records has no score (eval.py's would be NaN).
  const auto short_only = d->score_breakdown({samples[0]}, {"Tartu"});
  ASSERT_EQ(short_only.size(), 2u);
  EXPECT_EQ(short_only[0].name, "score_0-4k");
  // LongBench's own datasets have no ranges.
  auto plain = make_dataset("longbench", {{"dataset", "hotpotqa"}, {"data_dir", kFixtures + "/good"}});
  EXPECT_TRUE(plain->score_breakdown(plain->samples(byte_tokenizer(), 0), {"", "", ""}).empty());
}

// eval.py scores every record with the last record's all_classes, in runs too.
TEST(LongBenchLoader, EveryRecordIsScoredWithTheLastRecordsClasses) {
  test::TempDir dir;
  std::ofstream file(dir.file("trec.jsonl"));
  file << json{{"input", "Q1"}, {"context", "C"}, {"answers", {"City"}},
               {"all_classes", {"City"}}, {"length", 1}, {"_id", "first"}}.dump() << "\n"
       << json{{"input", "Q2"}, {"context", "C"}, {"answers", {"City"}},
               {"all_classes", {"City", "Country"}}, {"length", 1}, {"_id", "last"}}.dump() << "\n";
  file.close();
  auto d = make_dataset("longbench", {{"dataset", "trec"}, {"data_dir", dir.path()}});
  const auto samples = d->samples(byte_tokenizer(), 0);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].meta["all_classes"], json({"City", "Country"}));
  // Both classes named: 1/2 with the last record's classes (1 with the first's own).
  EXPECT_EQ(d->score(samples[0], "City Country"), 50.0);
}

TEST(LongBenchE, RefusesOtherNamesAndRecordsWithoutLength) {
  test::TempDir dir;
  std::ofstream(dir.file("hotpotqa_e.jsonl"))
      << R"({"input": "Q", "context": "C", "answers": ["A"], "_id": "no-length"})" << "\n";
  const std::string no_length = error_of([&] {
    make_dataset("longbench", {{"dataset", "hotpotqa_e"}, {"data_dir", dir.path()}})
        ->samples(byte_tokenizer(), 0);
  });
  EXPECT_NE(no_length.find("record no-length has no numeric \"length\""), std::string::npos)
      << no_length;
  // narrativeqa is not in LongBench-E.
  const std::string not_e = error_of([&] {
    make_dataset("longbench", {{"dataset", "narrativeqa_e"}, {"data_dir", dir.path()}});
  });
  EXPECT_NE(not_e.find("unknown LongBench dataset \"narrativeqa_e\""), std::string::npos) << not_e;
  EXPECT_NE(not_e.find("LongBench-E: qasper_e, "), std::string::npos) << not_e;
  EXPECT_EQ(longbench_e_datasets().size(), 13u);
  EXPECT_EQ(longbench_task_of("repobench-p_e"), "repobench-p");
  EXPECT_EQ(longbench_task_of("lsht_e"), "");
}

}  // namespace
}  // namespace kvb
