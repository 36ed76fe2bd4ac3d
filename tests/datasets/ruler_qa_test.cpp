// RULER's qa_1 (SQuAD) and qa_2 (HotpotQA) on small files in their formats: the questions in
// file order (answerable ones only), each with its own documents (and, SQuAD, its article's
// other paragraphs) among others as numbered "Document i:" entries, sized in steps of 10
// documents, scored by string_match_part.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "datasets/dataset.h"
#include "engine/common/error.h"
#include "tests/datasets/dataset_test_util.h"

namespace kvb {
namespace {

using test::byte_tokenizer;
using test::make_dataset;

// Filler paragraph i: 80 to 270 bytes, distinct.
std::string filler(int i) {
  std::string text = "Filler paragraph " + std::to_string(i) + " says";
  for (int w = 0; w < 10 + (i * 7) % 30; ++w) text += " word" + std::to_string((i + w) % 13);
  return text + ".";
}

// Article A: paragraphs A1 (an answerable question with two answers, an unanswerable one),
// A2 (one question), A3 (none); article B: B1 (one question); then 60 one-paragraph articles.
json squad_file() {
  json data = json::array();
  data.push_back({{"title", "A"},
                  {"paragraphs",
                   {{{"context", "Alpha paragraph one: the river is called Zorvan."},
                     {"qas",
                      {{{"question", "What is the river called?"},
                        {"answers", {{{"text", "Zorvan"}}, {{"text", "the Zorvan"}}}},
                        {"is_impossible", false}},
                       {{"question", "Who swam it?"}, {"answers", json::array()},
                        {"is_impossible", true}}}}},
                    {{"context", "Alpha paragraph two: its source is Mount Keld."},
                     {"qas",
                      {{{"question", "Where is its source?"},
                        {"answers", {{{"text", "Mount Keld"}}}},
                        {"is_impossible", false}}}}},
                    {{"context", "Alpha paragraph three: nothing is asked here."},
                     {"qas", json::array()}}}}});
  data.push_back({{"title", "B"},
                  {"paragraphs",
                   {{{"context", "Beta paragraph: the bridge opened in 1911."},
                     {"qas",
                      {{{"question", "When did the bridge open?"},
                        {"answers", {{{"text", "1911"}}}},
                        {"is_impossible", false}}}}}}}});
  for (int i = 0; i < 60; ++i)
    data.push_back({{"title", "F" + std::to_string(i)},
                    {"paragraphs", {{{"context", filler(i)}, {"qas", json::array()}}}}});
  return {{"version", "v2.0"}, {"data", data}};
}

// Three questions of two paragraphs each ([title, [sentences]]), then 40 items whose
// paragraphs fill the file.
json hotpot_file() {
  json items = json::array();
  for (int q = 0; q < 3; ++q)
    items.push_back({{"question", "Which q" + std::to_string(q) + " is it?"},
                     {"answer", "answer" + std::to_string(q)},
                     {"context",
                      json::array({json::array({"Gold" + std::to_string(q),
                                                json::array({"First sentence. ",
                                                             "answer" + std::to_string(q) + "."})}),
                                   json::array({"Also" + std::to_string(q),
                                                json::array({"Another page."})})})}});
  for (int i = 0; i < 40; ++i)
    items.push_back({{"question", "filler?"}, {"answer", "none"},
                     {"context", json::array({json::array({"F" + std::to_string(i),
                                                           json::array({filler(i)})})})}});
  return items;
}

std::string written(const test::TempDir& dir, const std::string& name, const json& j) {
  std::ofstream(dir.file(name)) << j.dump();
  return dir.file(name);
}

json params(const std::string& file, int64_t length, int samples) {
  return {{"context_length", length}, {"samples", samples}, {"data_file", file}};
}

// The documents of a prompt, in order ("Document i:\n<text>" entries), numbered from 1.
std::vector<std::string> documents(const std::string& prompt) {
  std::vector<std::string> out;
  for (size_t at = prompt.find("Document 1:\n"); at != std::string::npos;) {
    const std::string head = "Document " + std::to_string(out.size() + 1) + ":\n";
    EXPECT_EQ(prompt.compare(at, head.size(), head), 0) << "numbering breaks at " << out.size();
    const size_t next = prompt.find("\n\nDocument ", at);
    const size_t end = next == std::string::npos ? prompt.find("\n\nAnswer the question", at) : next;
    out.push_back(prompt.substr(at + head.size(), end - at - head.size()));
    at = next == std::string::npos ? next : next + 2;
  }
  return out;
}

TEST(RulerQa, SquadAsksItsAnswerableQuestionsInOrderWithTheirArticle) {
  test::TempDir dir;
  const std::string file = written(dir, "squad.json", squad_file());
  const std::vector<Sample> samples =
      make_dataset("qa_1", params(file, 2048, 3))->samples(byte_tokenizer(), 4);
  ASSERT_EQ(samples.size(), 3u);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"What is the river called?", {"Zorvan", "the Zorvan"}},
      {"Where is its source?", {"Mount Keld"}},
      {"When did the bridge open?", {"1911"}}};
  const std::string intro = "Answer the question based on the given documents. Only give me the "
                            "answer and do not output any other words.\n\nThe following are "
                            "given documents.\n\nDocument 1:\n";
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    EXPECT_EQ(s.id, "qa_1-" + std::to_string(i));
    EXPECT_EQ(s.max_new_tokens, 32);
    EXPECT_EQ(s.answers, expected[i].second);
    EXPECT_EQ(s.prompt.rfind(intro, 0), 0u) << s.prompt.substr(0, 200);
    const std::string end = "\n\nAnswer the question based on the given documents. Only give me "
                            "the answer and do not output any other words.\n\nQuestion: " +
                            expected[i].first + " Answer:";
    ASSERT_GE(s.prompt.size(), end.size());
    EXPECT_EQ(s.prompt.substr(s.prompt.size() - end.size()), end);
    EXPECT_EQ(s.prompt.substr(s.question_offset), end);  // the question, apart from the context
    EXPECT_LE(int64_t(byte_tokenizer().encode(s.prompt, false).size()) + 32, 2048);
    const std::vector<std::string> docs = documents(s.prompt);
    EXPECT_EQ(int64_t(docs.size()), s.meta.at("documents").get<int64_t>());
    EXPECT_GE(docs.size(), 4u);
    auto has = [&](const std::string& prefix) {
      return std::any_of(docs.begin(), docs.end(),
                         [&](const std::string& d) { return d.rfind(prefix, 0) == 0; });
    };
    if (i < 2) {  // article A's question: its three paragraphs, then fillers
      EXPECT_TRUE(has("Alpha paragraph one")) << i;
      EXPECT_TRUE(has("Alpha paragraph two")) << i;
      EXPECT_TRUE(has("Alpha paragraph three")) << i;
    } else {
      EXPECT_TRUE(has("Beta paragraph")) << i;
    }
  }
  const DatasetInfo& info = dataset_registry().get("qa_1", "test");
  EXPECT_EQ(make_dataset("qa_1", params(file, 2048, 1))->metric_name(), "string_match_part");
  EXPECT_EQ(info.create(info.normalise_params(params(file, 2048, 1), "p"))
                ->score(samples[0], "It is called THE ZORVAN."),
            100.0);
  EXPECT_EQ(make_dataset("qa_1", params(file, 2048, 1))->score(samples[0], "Keld"), 0.0);
  // Three answerable questions (the unanswerable one is left out, as qa.py leaves it).
  try {
    make_dataset("qa_1", params(file, 2048, 4))->samples(byte_tokenizer(), 4);
    ADD_FAILURE() << "a fourth question";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("3 answerable questions, fewer than samples 4"),
              std::string::npos) << e.what();
  }
}

// qa.py's steps: 10 documents. Fillers differ in length, so samples hold the task's size or
// whole steps less; the documents are shuffled, so the gold one is not always first.
TEST(RulerQa, HotpotDocumentsAreTitleAndJoinedSentencesInStepsOfTen) {
  test::TempDir dir;
  const std::string file = written(dir, "hotpot.json", hotpot_file());
  int not_first = 0;
  test::StepDrops drops;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    std::vector<int64_t> sizes;
    const std::vector<Sample> samples =
        make_dataset("qa_2", params(file, 3000, 3))->samples(byte_tokenizer(), seed);
    for (const Sample& s : samples) {
      const int q = int(s.meta.at("question_index"));
      EXPECT_EQ(s.answers, std::vector<std::string>{"answer" + std::to_string(q)});
      const std::vector<std::string> docs = documents(s.prompt);
      const std::string gold = "Gold" + std::to_string(q) + "\nFirst sentence. answer" + std::to_string(q) + ".";
      const auto at = std::find(docs.begin(), docs.end(), gold);
      EXPECT_NE(at, docs.end()) << s.prompt;
      not_first += at != docs.begin();
      EXPECT_NE(std::find(docs.begin(), docs.end(), "Also" + std::to_string(q) + "\nAnother page."),
                docs.end());
      EXPECT_LE(int64_t(byte_tokenizer().encode(s.prompt, false).size()) + 32, 3000);
      sizes.push_back(int64_t(docs.size()));
    }
    drops.check(samples, sizes, 10, "documents", seed);
  }
  EXPECT_GT(not_first, 0);
  drops.expect_some_dropped();
}

// A sample that overflows the task's size steps down by 10 documents but never past its own:
// question 1's ten documents (one of them 700 bytes long) overflow the size question 0 gave
// (between 10 and 20 here), and fit as the 10 alone, where a whole step would have left fewer
// than its own ten.
TEST(RulerQa, ASampleStepsDownToItsOwnDocumentsNotPastThem) {
  test::TempDir dir;
  json items = json::array();
  for (int q = 0; q < 2; ++q) {
    json context = json::array();
    for (int d = 0; d < 10; ++d) {
      std::string text = "Short page " + std::to_string(d) + ".";
      if (q == 1 && d == 0) text = std::string(700, 'x');
      context.push_back(json::array({"Q" + std::to_string(q) + "D" + std::to_string(d),
                                     json::array({text})}));
    }
    items.push_back({{"question", "Which " + std::to_string(q) + "?"}, {"answer", "a"},
                     {"context", context}});
  }
  for (int i = 0; i < 40; ++i)
    items.push_back({{"question", "filler?"}, {"answer", "none"},
                     {"context", json::array({json::array({"F" + std::to_string(i),
                                                           json::array({filler(i)})})})}});
  const std::string file = written(dir, "hotpot.json", items);
  const std::vector<Sample> samples =
      make_dataset("qa_2", params(file, 1900, 2))->samples(byte_tokenizer(), 0);
  const int64_t size = samples.at(0).meta.at("documents");  // question 0 fits the task's size
  EXPECT_GT(size, 10);
  EXPECT_LT(size, 20);
  EXPECT_EQ(samples.at(1).meta.at("documents"), 10);
  EXPECT_EQ(documents(samples.at(1).prompt).size(), 10u);
}

TEST(RulerQa, TheFileIsRequiredAndOnlyRulersGenerator) {
  test::TempDir dir;
  EXPECT_THROW(make_dataset("qa_1", {{"context_length", 2048}}), InputError);
  EXPECT_THROW(make_dataset("qa_2", params(dir.file("absent.json"), 2048, 1)), InputError);
  json p = params(written(dir, "squad.json", squad_file()), 2048, 1);
  p["generator"] = "kvbench_v1";
  try {
    make_dataset("qa_1", p);
    ADD_FAILURE() << "kvbench_v1 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("generator: the qa tasks have RULER's generator only"),
              std::string::npos) << e.what();
  }
  std::ofstream(dir.file("bad.json")) << R"({"data": [{"paragraphs": [{"qas": []}]}]})";
  EXPECT_THROW(make_dataset("qa_1", params(dir.file("bad.json"), 2048, 1))->samples(byte_tokenizer(), 0),
               InputError);
  std::ofstream(dir.file("null.json"))
      << R"({"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q", )"
      << R"("answers": [{"text": "a"}], "is_impossible": null}]}]}]})";
  EXPECT_THROW(make_dataset("qa_1", params(dir.file("null.json"), 2048, 1))->samples(byte_tokenizer(), 0),
               InputError);
  std::ofstream(dir.file("none.json"))
      << R"({"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q", )"
      << R"("answers": [], "is_impossible": false}]}]}]})";
  try {
    make_dataset("qa_1", params(dir.file("none.json"), 2048, 1))->samples(byte_tokenizer(), 0);
    ADD_FAILURE() << "a question without answers accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("answerable question \"q\" has no answers"),
              std::string::npos) << e.what();
  }
  json before = params(dir.file("squad.json"), 2048, 1);
  before["question_position"] = "before";
  EXPECT_THROW(make_dataset("qa_1", before), InputError);
}

}  // namespace
}  // namespace kvb
