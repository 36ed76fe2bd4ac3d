// RULER's question answering (scripts/data/synthetic/qa.py): qa_1 on SQuAD v2's dev set, qa_2
// on HotpotQA's distractor dev set. A question's own paragraphs among others of the file, as
// "Document i:" entries, then the question; scored by string_match_part (any reference found).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "datasets/metrics/ruler_metrics.h"
#include "datasets/ruler/ruler_common.h"
#include "datasets/synthetic/random.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

constexpr int64_t kStep = 10;  // qa.py's `incremental`: documents

// One answerable question: its references and the documents (indices into QaFile::docs) it is
// about, plus (SQuAD) the other paragraphs of its article, which qa.py adds first.
struct Question {
  std::string query;
  std::vector<std::string> answers;
  std::vector<int64_t> own, more;
};

// qa.py's read_squad / read_hotpotqa: the distinct documents, sorted (Python's sorted(set())
// of str: code point order, which is UTF-8 byte order), and the questions in file order.
struct QaFile {
  std::vector<std::string> docs;
  std::vector<Question> questions;
};

std::string text_field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string())
    throw InputError(where + ": expected a string field \"" + key + "\"");
  return j[key].get<std::string>();
}

const json& array_field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_array())
    throw InputError(where + ": expected an array field \"" + key + "\"");
  return j[key];
}

// Sorted distinct documents and each one's index.
std::map<std::string, int64_t> index_docs(const std::set<std::string>& distinct,
                                          std::vector<std::string>& docs) {
  docs.assign(distinct.begin(), distinct.end());
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < docs.size(); ++i) index[docs[i]] = int64_t(i);
  return index;
}

// SQuAD: {"data": [{"paragraphs": [{"context", "qas": [{"question", "answers": [{"text"}],
// "is_impossible"}]}]}]}. Unanswerable questions (is_impossible true) are left out, as qa.py
// does; a file without the field (SQuAD v1.1, which qa.py cannot read) has none.
QaFile read_squad(const std::string& path) {
  const json file = read_json_file(path);
  const json& articles = array_field(file, "data", path);
  std::set<std::string> distinct;
  for (size_t a = 0; a < articles.size(); ++a) {
    const std::string where = path + ": data[" + std::to_string(a) + "]";
    const json& paragraphs = array_field(articles[a], "paragraphs", where);
    for (size_t p = 0; p < paragraphs.size(); ++p)
      distinct.insert(text_field(paragraphs[p], "context", where + ".paragraphs[" + std::to_string(p) + "]"));
  }
  QaFile out;
  const std::map<std::string, int64_t> index = index_docs(distinct, out.docs);
  for (const json& article : articles) {
    std::vector<int64_t> article_docs;
    for (const json& p : article["paragraphs"]) article_docs.push_back(index.at(p["context"]));
    for (const json& p : article["paragraphs"]) {
      const int64_t own = index.at(p["context"]);
      const json& qas = array_field(p, "qas", path + ": a paragraph");
      for (const json& qa : qas) {
        if (qa.is_object() && qa.contains("is_impossible") && !qa["is_impossible"].is_boolean())
          throw InputError(path + ": a question's \"is_impossible\" is not true or false");
        if (qa.is_object() && qa.value("is_impossible", false)) continue;
        Question q{text_field(qa, "question", path + ": a question"), {}, {own}, {}};
        for (const json& answer : array_field(qa, "answers", path + ": question " + q.query))
          q.answers.push_back(text_field(answer, "text", path + ": an answer of " + q.query));
        // It could never be scored (qa.py's string_match_part fails on it).
        if (q.answers.empty())
          throw InputError(path + ": answerable question \"" + q.query + "\" has no answers");
        for (int64_t d : article_docs)
          if (d != own) q.more.push_back(d);
        out.questions.push_back(std::move(q));
      }
    }
  }
  return out;
}

// HotpotQA: [{"question", "answer", "context": [[title, [sentence, ...]], ...]}]; a document is
// its title, a newline and its sentences joined with nothing between them (qa.py's).
QaFile read_hotpotqa(const std::string& path) {
  const json file = read_json_file(path);
  if (!file.is_array()) throw InputError(path + ": expected an array of questions (HotpotQA)");
  auto documents = [&](const json& item, const std::string& where) {
    std::vector<std::string> out;
    for (const json& entry : array_field(item, "context", where)) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_array())
        throw InputError(where + ": a context entry is not [title, [sentences]]");
      std::string doc = entry[0].get<std::string>() + "\n";
      for (const json& sentence : entry[1]) {
        if (!sentence.is_string()) throw InputError(where + ": a sentence is not a string");
        doc += sentence.get<std::string>();
      }
      out.push_back(std::move(doc));
    }
    return out;
  };
  std::set<std::string> distinct;
  for (size_t i = 0; i < file.size(); ++i)
    for (std::string& d : documents(file[i], path + ": [" + std::to_string(i) + "]"))
      distinct.insert(std::move(d));
  QaFile out;
  const std::map<std::string, int64_t> index = index_docs(distinct, out.docs);
  for (size_t i = 0; i < file.size(); ++i) {
    const std::string where = path + ": [" + std::to_string(i) + "]";
    Question q{text_field(file[i], "question", where), {text_field(file[i], "answer", where)}, {}, {}};
    for (const std::string& d : documents(file[i], where)) q.own.push_back(index.at(d));
    out.questions.push_back(std::move(q));
  }
  return out;
}

RulerPrompt qa_prompt(const std::string& query) {
  const std::string instruction =
      "Answer the question based on the given documents. Only give me the answer and do not "
      "output any other words.";
  RulerPrompt p;
  p.intro = instruction + "\n\nThe following are given documents.\n\n";
  p.question = "\n" + instruction + "\n\nQuestion: " + query;  // after "\n": a blank line
  p.answer_prefix = " Answer:";
  return p;
}

class QuestionAnswering : public RulerTask {
 public:
  QuestionAnswering(const std::string& name, const RulerParams& p) : RulerTask(p), name_(name) {}

  std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const override {
    const QaFile file = name_ == "qa_1" ? read_squad(params_.data_file)
                                        : read_hotpotqa(params_.data_file);
    if (int64_t(file.questions.size()) < params_.samples)
      throw InputError(params_.data_file + ": " + std::to_string(file.questions.size()) +
                       (name_ == "qa_1" ? " answerable" : "") + " questions, fewer than samples " +
                       std::to_string(params_.samples) + " (qa.py takes the first ones in order)");
    // qa.py sizes the task on question 0, with documents drawn anew for each size it tries.
    const int64_t size = ruler_task_size(
        tokenizer, kStep, params_.context_length,
        [&](int64_t n) { return render(file, 0, n, probe_seed(seed), seed); },
        [&](int64_t n) { return ruler_fits(tokenizer, render(file, 0, n, probe_seed(seed), seed)); });
    std::mt19937_64 rng(seed);
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const Question& q = file.questions[size_t(i)];
      const uint64_t docs_seed = rng();
      auto [n, text] = ruler_sample(
          tokenizer, size, kStep,
          [&](int64_t docs) { return render(file, i, docs, docs_seed, seed); },
          /*min_n=*/int64_t(q.own.size()));
      out.push_back(make_sample(name_, i, std::move(text), q.answers,
                                {{"documents", n}, {"question_index", i}},
                                question_tail(qa_prompt(q.query))));
    }
    return out;
  }

  double score(const Sample& sample, const std::string& prediction) const override {
    return string_match_part(prediction, sample.answers);
  }
  std::string metric_name() const override { return "string_match_part"; }

 private:
  // The prompt of question `index` with `count` documents: qa.py's choice (its own documents,
  // then its article's other paragraphs, then others drawn from `docs_seed`; where `count`
  // reaches the file's documents, all of them in order, repeated to `count`, as qa.py at its
  // 2025 head does), shuffled by a generator seeded with the task's
  // seed alone (qa.py's random.Random(random_seed), the same for every sample).
  std::string render(const QaFile& file, int index, int64_t count, uint64_t docs_seed,
                     uint64_t task_seed) const {
    const Question& q = file.questions[size_t(index)];
    std::vector<int64_t> chosen;
    const int64_t total = int64_t(file.docs.size());
    if (count < total) {
      std::mt19937_64 rng(docs_seed);
      chosen = q.own;
      const int64_t wanted = count - int64_t(q.own.size());
      if (wanted > int64_t(q.more.size())) {
        chosen.insert(chosen.end(), q.more.begin(), q.more.end());
        const std::set<int64_t> taken(chosen.begin(), chosen.end());
        std::vector<int64_t> others;
        for (int64_t d = 0; d < total; ++d)
          if (!taken.count(d)) others.push_back(d);
        for (int64_t k : sample_indices(rng, int64_t(others.size()), wanted - int64_t(q.more.size())))
          chosen.push_back(others[size_t(k)]);
      } else {
        for (int64_t k : sample_indices(rng, int64_t(q.more.size()), std::max<int64_t>(wanted, 0)))
          chosen.push_back(q.more[size_t(k)]);
      }
    } else {
      for (int64_t i = 0; i < count; ++i) chosen.push_back(i % total);
    }
    std::mt19937_64 shuffle(task_seed);
    portable_shuffle(chosen, shuffle);
    std::string context;
    for (size_t i = 0; i < chosen.size(); ++i)
      context += (i ? "\n\n" : "") + std::string("Document ") + std::to_string(i + 1) + ":\n" +
                 file.docs[size_t(chosen[i])];
    return compose(qa_prompt(q.query), context);
  }

  std::string name_;
};

DatasetInfo qa_info(const std::string& name, const std::string& description) {
  RulerNeeds needs;
  needs.qa_file = true;
  needs.default_max_new_tokens = 32;
  DatasetInfo info = ruler_dataset_info(name, description, needs, [name](const RulerParams& p) {
    return std::make_unique<QuestionAnswering>(name, p);
  });
  info.source = "NVIDIA/RULER scripts/data/synthetic/qa.py on your copy of its QA file "
                "(download_qa_dataset.sh)";
  info.questions_per_context = "1 (question_position after only)";
  info.fidelity =
      "follows qa.py (sized by its binary search on question 0, steps of 10 documents, "
      "documents drawn per sample, shuffled by the task's seed, string_match_part); not "
      "faithful yet: the probe's documents are drawn once (qa.py draws them anew for each size "
      "it tries), and a sample that overflows keeps its draw a step smaller (qa.py draws anew); "
      "at 10 documents or fewer a sample that overflows loses one document at a time down to "
      "its own (qa.py retries forever); SQuAD v1.1 files are read (no unanswerable questions); "
      "of the RULER tasks' shared params, question_position after and generator ruler only "
      "(the others are refused: qa.py has neither)";
  return info;
}

KVB_REGISTER_DATASET(qa_info("qa_1", "RULER question answering on SQuAD v2 (dev): one paragraph's "
                                     "question among other paragraphs"));
KVB_REGISTER_DATASET(qa_info("qa_2", "RULER multi-hop question answering on HotpotQA (dev, "
                                     "distractor): a question's 10 paragraphs among others"));

}  // namespace
}  // namespace kvb
