// SCBench files: the two modes' prompts from a small file in its format, the string scores as
// compute_scores.py computes them, the tasks not built refused.
#include <gtest/gtest.h>

#include <fstream>

#include "datasets/dataset.h"
#include "datasets/metrics/scbench_metrics.h"
#include "engine/common/error.h"
#include "engine/model/llama_model.h"
#include "engine/session.h"
#include "harness/runner/runner.h"
#include "methods/method.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

TEST(ScbenchScores, StringComparisonsAsTheReference) {
  EXPECT_EQ(scbench_contains_score("value: abc-123.", "abc-123"), 100);
  EXPECT_EQ(scbench_contains_score("ABC-123", "abc-123"), 0);  // case-sensitive
  EXPECT_EQ(scbench_vt_score("X1 and x2", {"X1", "X2", "X3"}), 67);  // round(2/3, 2)
  EXPECT_EQ(scbench_qa_score("  paris is the answer\n", {"Paris"}), 100);
  EXPECT_EQ(scbench_qa_score("Lyon", {"Paris"}), 0);
  const std::vector<std::string> label = {"the red one", "B"};
  EXPECT_EQ(scbench_choice_score("B) the red one", label), 100);
  EXPECT_EQ(scbench_choice_score("Answer: B", label), 0);  // its first character decides: A
  EXPECT_EQ(scbench_choice_score("the red one", label), 100);
  EXPECT_EQ(scbench_choice_score("So the answer is B.", label), 100);
  EXPECT_EQ(scbench_choice_score("So the answer is C.", label), 0);
  EXPECT_EQ(scbench_choice_score("I think B", label), 100);  // the first word within "ABCD"
  EXPECT_EQ(scbench_choice_score("I think C", label), 0);
  EXPECT_EQ(scbench_choice_score("   ", label), 0);
}

class ScbenchFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir.file("scbench_kv.jsonl"))
        << R"({"id": 7, "context": "{\"k1\": \"v1\", \"k2\": \"v2\"}", "multi_turns": [)"
        << R"({"input": "Key: k1", "answer": "v1"}, {"input": "Key: k2", "answer": "v2"}]})"
        << "\n";
    std::ofstream(dir.file("scbench_choice_eng.jsonl"))
        << R"({"id": "b", "context": "A book.", "multi_turns": [{"input": "Which?", )"
        << R"("options": ["w", "x", "y", "z"], "answer": "y"}]})" << "\n";
  }
  std::vector<Sample> samples(const json& params) {
    const DatasetInfo& info = dataset_registry().get("scbench", "test");
    json p = params;
    p["data_dir"] = dir.path();
    return info.create(info.normalise_params(p, "test"))->samples(*model->tokenizer, 0);
  }
  // Full on `model_name` under per_sample, `max_new` tokens an answer.
  static Cell full_cell(const std::string& model_name, const json& params, int max_new) {
    const MethodInfo& full = method_registry().get("full", "test");
    return Cell{.model = model_name,
                .dataset = {.name = "scbench", .params = params},
                .method = {.name = "full", .label = "full",
                           .config = full.normalise_config(json::object(), "test")},
                .max_new_tokens = max_new,
                .context_sharing = "per_sample"};
  }
  test::TempDir dir;
  std::shared_ptr<LlamaModel> model = LlamaModel::from_reference("kvbench-tiny");
};

TEST_F(ScbenchFiles, MultiTurnCarriesTheReferenceAnswersOfEarlierTurns) {
  const std::vector<Sample> s = samples({{"task", "kv"}});
  ASSERT_EQ(s.size(), 2u);
  const std::string first =
      "Extract the value corresponding to the specified key in the JSON object below.\n\n"
      "{\"k1\": \"v1\", \"k2\": \"v2\"}\n\nKey: k1";
  EXPECT_EQ(s[0].id, "7.turn1");
  EXPECT_EQ(s[0].prompt, first);
  EXPECT_EQ(s[1].id, "7.turn2");
  EXPECT_EQ(s[1].prompt, first + "v1\n\nKey: k2");
  for (const Sample& x : s) {
    EXPECT_EQ(x.context_id, "7");
    // What SCBench prefills before reading on: the first turn whole, its question included.
    EXPECT_EQ(x.question_offset, first.size());
    EXPECT_EQ(x.max_new_tokens, 150);
  }
  EXPECT_EQ(s[1].answers, (std::vector<std::string>{"v2"}));
}

TEST_F(ScbenchFiles, MultiRequestJoinsEachQuestionToTheContext) {
  const std::vector<Sample> s = samples({{"task", "kv"}, {"mode", "multi_request"}});
  ASSERT_EQ(s.size(), 2u);
  const std::string context =
      "Extract the value corresponding to the specified key in the JSON object below.\n\n"
      "{\"k1\": \"v1\", \"k2\": \"v2\"}";
  EXPECT_EQ(s[1].id, "7.q2");
  EXPECT_EQ(s[1].prompt, context + "Key: k2");  // no separator, as SCBench joins them
  EXPECT_EQ(s[1].question_offset, context.size());
  const std::vector<Sample> choice = samples({{"task", "choice_eng"}, {"mode", "multi_request"}});
  ASSERT_EQ(choice.size(), 1u);
  EXPECT_EQ(choice[0].answers, (std::vector<std::string>{"y", "C"}));
  EXPECT_NE(choice[0].prompt.find("\nC. y\nD. z\n\nThe the correct answer is"), std::string::npos);
}

// A tokenizer that merges across the turns' boundary (kvbench-tiny-v2's BPE: the question's
// trailing space with the gold answer after it) cut one context's turns at different tokens,
// and per_sample refused the cell; the shared context and the rest are now encoded apart, as
// SCBench encodes each turn.
TEST_F(ScbenchFiles, TurnsShareTheirContextOnAMergingTokenizer) {
  std::ofstream(dir.file("scbench_kv.jsonl"))
      << R"({"id": 3, "context": "{\"alpha-1\": \"beta-2\", \"gamma-3\": \"delta-4\"}", )"
      << R"("multi_turns": [{"input": "Key: \"alpha-1\"\nThe value of the key is: ", )"
      << R"("answer": "beta-2"}, {"input": "Key: \"gamma-3\"\nThe value of the key is: ", )"
      << R"("answer": "delta-4"}]})" << "\n";
  auto v2 = LlamaModel::from_reference("kvbench-tiny-v2");
  const DatasetInfo& info = dataset_registry().get("scbench", "test");
  for (const char* mode : {"multi_turn", "multi_request"}) {
    const json params = info.normalise_params(
        {{"task", "kv"}, {"data_dir", dir.path()}, {"mode", mode}}, "test");
    const std::vector<Sample> s = info.create(params)->samples(*v2->tokenizer, 0);
    ASSERT_EQ(s.size(), 2u);
    const SplitPrompt first = split_prompt(*v2, s[0]), second = split_prompt(*v2, s[1]);
    EXPECT_EQ(first.context, second.context) << mode;
    EXPECT_EQ(second.question, v2->tokenizer->encode(s[1].prompt.substr(s[1].question_offset),
                                                     /*add_special=*/false)) << mode;
    EXPECT_EQ(run_cell(full_cell("kvbench-tiny-v2", params, 2), *v2, [](int, int) {}).samples.size(),
              2u) << mode;
  }
}

// SCBench encodes each later turn apart (without BOS) and joins the ids; on a tokenizer that
// merges across a turn's start (kvbench-tiny-v2: the question's trailing space with the gold
// answer after it), joining the turns as text reads other tokens. Both context_sharing ways
// read SCBench's: per_sample splits those ids where the later turns begin.
TEST_F(ScbenchFiles, EachLaterTurnIsEncodedApartAsScbenchJoinsTheIds) {
  std::ofstream(dir.file("scbench_kv.jsonl"))
      << R"({"id": 3, "context": "{\"alpha-1\": \"beta-2\", \"gamma-3\": \"delta-4\"}", )"
      << R"("multi_turns": [{"input": "Key: \"alpha-1\"\nThe value of the key is: ", )"
      << R"("answer": "beta-2"}, {"input": "Key: \"gamma-3\"\nThe value of the key is: ", )"
      << R"("answer": "delta-4"}, {"input": "Key: \"alpha-1\"\nThe value of the key is: ", )"
      << R"("answer": "beta-2"}]})" << "\n";
  auto v2 = LlamaModel::from_reference("kvbench-tiny-v2");
  const Tokenizer& tok = *v2->tokenizer;
  const DatasetInfo& info = dataset_registry().get("scbench", "test");
  const json params = info.normalise_params({{"task", "kv"}, {"data_dir", dir.path()}}, "test");
  const std::vector<Sample> s = info.create(params)->samples(tok, 0);
  ASSERT_EQ(s.size(), 3u);
  const std::string first =
      "Extract the value corresponding to the specified key in the JSON object below.\n\n"
      "{\"alpha-1\": \"beta-2\", \"gamma-3\": \"delta-4\"}\n\n"
      "Key: \"alpha-1\"\nThe value of the key is: ";
  const std::string second = "beta-2\n\nKey: \"gamma-3\"\nThe value of the key is: ";
  const std::string third = "delta-4\n\nKey: \"alpha-1\"\nThe value of the key is: ";
  ASSERT_EQ(s[2].prompt, first + second + third);
  std::vector<int> context = tok.encode(first, /*add_special=*/true);
  std::vector<int> later = tok.encode(second, false), last = tok.encode(third, false);
  later.insert(later.end(), last.begin(), last.end());
  std::vector<int> whole = context;
  whole.insert(whole.end(), later.begin(), later.end());
  ASSERT_NE(whole, tok.encode(s[2].prompt, true)) << "the tokenizer merges across no turn";
  EXPECT_EQ(encode_prompt(*v2, s[2]), whole);
  const SplitPrompt split = split_prompt(*v2, s[2]);
  EXPECT_EQ(split.context, context);
  EXPECT_EQ(split.question, later);
  EXPECT_EQ(encode_prompt(*v2, s[0]), context);  // the first turn alone: one text
}

// run_scbench.py's truncate_input keeps the input whole where max_length minus the answers'
// room leaves a limit below 2 (here 1024 - 2 x 150 - 1000 < 0): nothing is cut.
TEST_F(ScbenchFiles, NoRoomLeftCutsNothing) {
  const std::vector<Sample> s =
      samples({{"task", "kv"}, {"mode", "multi_request"}, {"max_length", 1024}});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].prompt,
            "Extract the value corresponding to the specified key in the JSON object below.\n\n"
            "{\"k1\": \"v1\", \"k2\": \"v2\"}Key: k1");
}

TEST_F(ScbenchFiles, AnEmptyAnswerListIsRefused) {
  std::ofstream(dir.file("scbench_kv.jsonl"))
      << R"({"id": 1, "context": "c", "multi_turns": [{"input": "Key: k1", "answer": []}]})"
      << "\n";
  try {
    samples({{"task", "kv"}});
    ADD_FAILURE() << "an empty answer list accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multi_turns[0].answer: expected at least one answer"),
              std::string::npos) << e.what();
  }
}

TEST(ScbenchScores, VtRoundsAsPython) {
  const std::vector<std::string> eight = {"V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8"};
  EXPECT_EQ(scbench_vt_score("v1", eight), 12);               // round(0.125, 2) = 0.12
  EXPECT_EQ(scbench_vt_score("v1 v2 v3 v4 v5", eight), 62);   // round(0.625, 2) = 0.62
  EXPECT_EQ(scbench_vt_score("v1 v2 v3", eight), 38);         // round(0.375, 2) = 0.38
  EXPECT_EQ(scbench_vt_score("v1", {}), 0);
}

TEST_F(ScbenchFiles, TasksNotBuiltAreRefused) {
  for (const auto& [task, message] : std::vector<std::pair<std::string, std::string>>{
           {"summary", "is scored by a metric kvbench does not implement yet"},
           {"nonsense", "unknown SCBench task"}}) {
    try {
      samples({{"task", task}});
      ADD_FAILURE() << task << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// Full answers every turn with the context shared as it answers the same tokens (the context
// with BOS, the rest encoded apart, as SCBench joins them) read in one prefill: the compressed
// context's cache is computed once per question from the same context tokens.
TEST_F(ScbenchFiles, FullAnswersTheSameWithTheContextShared) {
  const DatasetInfo& info = dataset_registry().get("scbench", "test");
  const json params = info.normalise_params({{"task", "kv"}, {"data_dir", dir.path()}}, "test");
  const CellResult shared = run_cell(full_cell("kvbench-tiny", params, 4), *model, [](int, int) {});
  const std::vector<Sample> s = info.create(params)->samples(*model->tokenizer, 0);
  ASSERT_EQ(shared.samples.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const SplitPrompt split = split_prompt(*model, s[i]);
    std::vector<int> ids = split.context;
    ids.insert(ids.end(), split.question.begin(), split.question.end());
    Method uncompressed;
    Session session(*model, uncompressed, SessionOptions{});
    std::vector<int> stops = model->tokenizer->eos_ids();
    stops.insert(stops.end(), model->config.eos_token_ids.begin(), model->config.eos_token_ids.end());
    const std::vector<int> answer = session.generate(ids, 4, stops);
    EXPECT_EQ(shared.samples[i].prediction, model->tokenizer->decode(answer)) << s[i].id;
  }
}

}  // namespace
}  // namespace kvb
