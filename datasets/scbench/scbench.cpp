// SCBench (arXiv 2412.10319; microsoft/MInference scbench/): one long context, several
// questions about it, in SCBench's two modes. Records are read from a user's
// <data_dir>/scbench_<task>.jsonl: {"id", "context", "multi_turns": [{"input", "answer",
// ("options")}, ...]}. The tasks whose scores are plain string comparisons are built.
#include <algorithm>
#include <fstream>

#include "datasets/dataset.h"
#include "datasets/longbench/longbench.h"
#include "datasets/metrics/scbench_metrics.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

const std::vector<std::string> kBuiltTasks = {"kv", "prefix_suffix", "vt", "qa_eng",
                                              "choice_eng"};
const std::vector<std::string> kOtherTasks = {"repoqa", "qa_chn", "many_shot", "summary", "mf",
                                              "summary_with_needles", "repoqa_and_kv"};

struct ScbenchParams {
  std::string task, data_dir;
  std::string mode = "multi_turn";
  int max_turns = 5;
  int64_t max_length = 131072;  // SCBench's max_seq_length
  int samples = 0;              // 0: every record

  std::string file() const { return data_dir + "/scbench_" + task + ".jsonl"; }

  static const ConfigFields<ScbenchParams>& fields() {
    using P = ScbenchParams;
    static const auto f =
        ConfigFields<P>()
            .required("task", &P::task, "SCBench task: kv, prefix_suffix, vt, qa_eng, choice_eng")
            .required("data_dir", &P::data_dir, "folder holding scbench_<task>.jsonl")
            .field("mode", &P::mode,
                   "multi_turn: each question after the previous ones and their reference "
                   "answers; multi_request: each question alone after the context",
                   check::one_of({"multi_turn", "multi_request"}))
            .field("max_turns", &P::max_turns, "questions per record at most (SCBench's 5)",
                   check::at_least(1))
            .field("max_length", &P::max_length,
                   "SCBench's max_seq_length: the first prompt is cut in the middle to this "
                   "minus the answers' room", check::at_least(1024))
            .field("samples", &P::samples, "records used (0: all)", check::at_least(0))
            .rule(check_task);
    return f;
  }
  static void check_task(ScbenchParams& p, const JsonFields& f) {
    if (std::count(kBuiltTasks.begin(), kBuiltTasks.end(), p.task)) return;
    if (std::count(kOtherTasks.begin(), kOtherTasks.end(), p.task))
      throw InputError(f.path("task") + ": SCBench's " + p.task + " is scored by a metric "
                       "kvbench does not implement yet (ROUGE, code similarity, numbers, "
                       "Chinese F1); built: kv, prefix_suffix, vt, qa_eng, choice_eng");
    throw InputError(f.path("task") + ": unknown SCBench task \"" + p.task + "\" (built: kv, "
                     "prefix_suffix, vt, qa_eng, choice_eng)");
  }
};

// An SCBench turn as read: its question, its options (choice_eng) and its reference answers
// (choice_eng: the option's text and its letter).
struct ScbenchTurn {
  std::string input;
  std::vector<std::string> options, answers;
};

struct ScbenchRecord {
  std::string id, context;
  std::vector<ScbenchTurn> turns;
};

int max_new_tokens_of(const std::string& task) {
  if (task == "kv" || task == "prefix_suffix") return 150;
  if (task == "vt") return 30;
  return 40;  // qa_eng, choice_eng
}

// A Python list of strings as str() prints it (what SCBench's templates insert for vt's
// reference answers).
std::string python_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + items[i] + "'";
  return out + "]";
}

ScbenchTurn read_turn(const json& t, const std::string& task, const std::string& where) {
  if (!t.is_object()) throw InputError(where + ": expected an object");
  ScbenchTurn turn;
  if (!t.contains("input") || !t["input"].is_string())
    throw InputError(where + ".input: expected a string");
  turn.input = t["input"].get<std::string>();
  if (!t.contains("answer")) throw InputError(where + ": missing field \"answer\"");
  const json& answer = t["answer"];
  if (answer.is_array()) turn.answers = longbench_strings(answer, where + ".answer");
  else turn.answers = longbench_strings(json::array({answer}), where + ".answer");
  if (turn.answers.empty()) throw InputError(where + ".answer: expected at least one answer");
  if (task == "choice_eng") {
    if (!t.contains("options") || !t["options"].is_array() || t["options"].size() != 4)
      throw InputError(where + ".options: expected 4 options");
    turn.options = longbench_strings(t["options"], where + ".options");
    const auto it = std::find(turn.options.begin(), turn.options.end(), turn.answers[0]);
    if (it == turn.options.end())
      throw InputError(where + ".answer: not one of its options");
    turn.answers.push_back(std::string(1, char('A' + (it - turn.options.begin()))));
  }
  return turn;
}

std::vector<ScbenchRecord> read_records(const ScbenchParams& p) {
  std::ifstream in(p.file());
  if (!in) throw InputError(p.file() + ": no such file (SCBench's data, e.g. from the "
                            "microsoft/SCBench dataset, as one JSON object a line)");
  std::vector<ScbenchRecord> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = p.file() + ":" + std::to_string(number);
    const json j = parse_json_object(line, where);
    ScbenchRecord r;
    r.id = j.contains("id") ? (j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump())
                            : "line-" + std::to_string(number);
    const char* context_key = j.contains("context") ? "context" : "input";
    if (!j.contains(context_key) || !j[context_key].is_string())
      throw InputError(where + ".context: expected a string");
    r.context = j[context_key].get<std::string>();
    if (!j.contains("multi_turns") || !j["multi_turns"].is_array() || j["multi_turns"].empty())
      throw InputError(where + ".multi_turns: expected a non-empty array");
    for (size_t t = 0; t < j["multi_turns"].size() && int(t) < p.max_turns; ++t)
      r.turns.push_back(read_turn(j["multi_turns"][t], p.task,
                                  where + ".multi_turns[" + std::to_string(t) + "]"));
    out.push_back(std::move(r));
    if (p.samples > 0 && int(out.size()) >= p.samples) break;
  }
  if (out.empty()) throw InputError(p.file() + ": holds no records");
  return out;
}

// SCBench's templates without a chat template (scbench/eval_utils.py).
struct Templates {
  std::string task;
  // Multi-turn: the text before the context, and what follows it with turn 0's question.
  std::string intro() const {
    if (task == "kv") return "Extract the value corresponding to the specified key in the JSON object below.\n\n";
    if (task == "qa_eng") return "Read the book and answer the question. Be very concise in your answer.\n\n";
    if (task == "choice_eng") return "Read the book and answer the question.\n\n";
    return "";
  }
  std::string choices(const ScbenchTurn& t, const std::string& closing) const {
    return "Question: " + t.input + "\nA. " + t.options[0] + "\nB. " + t.options[1] + "\nC. " +
           t.options[2] + "\nD. " + t.options[3] + "\n\n" + closing;
  }
  // The first turn's question, after the context.
  std::string first_question(const ScbenchTurn& t) const {
    if (task == "qa_eng") return "\n\nQuestion: " + t.input + "\nAnswer:";
    if (task == "choice_eng") return "\n\n" + choices(t, "The the correct answer is");
    return "\n\n" + t.input;
  }
  // A later turn: the previous turn's reference answer, then the question.
  std::string follow_up(const ScbenchTurn& previous, const ScbenchTurn& t) const {
    const std::string gold = task == "vt" ? python_list(previous.answers) : previous.answers[0];
    if (task == "qa_eng") return gold + "\n\nQuestion: " + t.input + "\nAnswer:";
    if (task == "choice_eng") return gold + "\n\n" + choices(t, "The letter of the correct answer is");
    return gold + "\n\n" + t.input;
  }
  // Multi-request: each question alone, joined to the context with nothing between them.
  std::string request(const ScbenchTurn& t) const {
    if (task == "qa_eng") return "Question: " + t.input + "\nAnswer:";
    if (task == "choice_eng") return choices(t, "The the correct answer is");
    return t.input;
  }
};

class Scbench : public Dataset {
 public:
  explicit Scbench(const ScbenchParams& p) : params_(p), templates_{p.task} {}

  // Multi-request: one sample per question, "<id>.q<k>", of context <id>, the question after
  // the context. Multi-turn: one sample per turn "<id>.turn<k>", its prompt the first turn's
  // followed by every earlier turn's reference answer and question (SCBench's default golden
  // history; the model's own earlier answers are not part of it), of context <id>.
  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t /*seed*/) const override {
    std::vector<Sample> out;
    for (const ScbenchRecord& r : read_records(params_)) {
      const bool multi_turn = params_.mode == "multi_turn";
      const int64_t room = int64_t(max_new_tokens_of(params_.task)) * int64_t(r.turns.size());
      const int64_t limit = params_.max_length - room - (multi_turn ? 0 : 1000);
      const std::string head = multi_turn ? templates_.intro() + r.context + templates_.first_question(r.turns[0])
                                          : templates_.intro() + r.context;
      // run_scbench.py's truncate_input keeps the input whole where the limit is below 2 (a
      // negative one, or a middle cut of 0 tokens a side, input[0:0] + input[-0:]).
      const std::string first = limit < 2 ? head : longbench_truncate(tokenizer, head, limit);
      // The context part of the (possibly cut) first prompt: all but turn 0's question.
      const std::string question = multi_turn ? templates_.first_question(r.turns[0]) : "";
      if (!ends_with(first, question))
        throw InputError(params_.file() + ": record " + r.id + ": cutting it to max_length " +
                         "cut into its first question; raise max_length");
      const size_t context_end = first.size() - question.size();
      std::string history = first.substr(context_end);
      std::vector<size_t> turn_starts;  // where each later turn begins in the prompt
      for (size_t k = 0; k < r.turns.size(); ++k) {
        Sample s;
        s.context_id = r.id;
        s.answers = r.turns[k].answers;
        s.max_new_tokens = max_new_tokens_of(params_.task);
        s.meta = {{"turn", int64_t(k)}};
        if (multi_turn) {
          if (k > 0) {
            turn_starts.push_back(context_end + history.size());
            history += templates_.follow_up(r.turns[k - 1], r.turns[k]);
          }
          s.id = r.id + ".turn" + std::to_string(k + 1);
          s.prompt = first.substr(0, context_end) + history;
          s.encoded_apart_at = turn_starts;
        } else {
          s.id = r.id + ".q" + std::to_string(k + 1);
          s.prompt = first + templates_.request(r.turns[k]);
          s.encoded_apart_at = {first.size()};
        }
        // What SCBench prefills (and a method compresses) before reading on: the context
        // (multi_request, test_scdq), or the first turn with its question (multi_turn: test
        // prefills turn 0's prompt whole, each later turn is read after it).
        s.question_offset = multi_turn ? first.size() : context_end;
        out.push_back(std::move(s));
      }
    }
    return out;
  }

  double score(const Sample& sample, const std::string& prediction) const override {
    const std::string& t = params_.task;
    if (t == "kv" || t == "prefix_suffix") return scbench_contains_score(prediction, sample.answers[0]);
    if (t == "vt") return scbench_vt_score(prediction, sample.answers);
    if (t == "qa_eng") return scbench_qa_score(prediction, sample.answers);
    return scbench_choice_score(prediction, sample.answers);
  }
  std::string metric_name() const override { return "scbench_" + params_.task; }

 private:
  ScbenchParams params_;
  Templates templates_;
};

KVB_REGISTER_DATASET(make_dataset_info<Scbench, ScbenchParams>({
    .name = "scbench",
    .description = "SCBench: several questions about one long context, multi-turn or "
                   "multi-request, from your scbench_<task>.jsonl",
    .source = "microsoft/MInference scbench/ (templates of eval_utils.py, scores of "
              "compute_scores.py), without a chat template",
    .fidelity = "the first turn cut to max_length in the middle as LongBench cuts (its two "
                "halves decoded and the text encoded again; SCBench joins the halves' ids, so "
                "the tokens at the cut may differ); each turn recomputed from the context (with "
                "per_sample, its first turn prefilled and the rest read after it, as SCBench's "
                "cache holds them)",
    .questions_per_context = "the record's turns (max_turns)",
    .reference_shares_context = true,
    .revision = [](const json&) { return 2; },
}));

}  // namespace
}  // namespace kvb
