#include "datasets/longbench/longbench.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "datasets/metrics/longbench_metrics.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"

namespace kvb {

std::vector<std::string> longbench_strings(const json& value, const std::string& where) {
  if (!value.is_array()) throw InputError(where + ": expected a list, got " + json_type_name(value));
  std::vector<std::string> out;
  for (const json& v : value) {
    if (v.is_string()) out.push_back(v.get<std::string>());
    else if (v.is_number_integer()) out.push_back(std::to_string(v.get<int64_t>()));
    else throw InputError(where + ": expected strings, got " + json_type_name(v));
  }
  return out;
}

namespace {

std::string string_field(const json& record, const char* key, const std::string& where) {
  const auto it = record.find(key);
  if (it == record.end()) throw InputError(where + ": missing field \"" + key + "\"");
  if (!it->is_string())
    throw InputError(where + "." + key + ": expected a string, got " + json_type_name(*it));
  return it->get<std::string>();
}

}  // namespace

LongBenchRecord parse_longbench_line(const std::string& line, const std::string& where,
                                     int number) {
  json j = parse_json_object(line, where);
  LongBenchRecord r;
  if (!j.contains("answers")) throw InputError(where + ": missing field \"answers\"");
  r.answers = longbench_strings(j["answers"], where + ".answers");
  r.input = string_field(j, "input", where);
  r.context = string_field(j, "context", where);
  if (j.contains("all_classes") && !j["all_classes"].is_null())
    r.all_classes = longbench_strings(j["all_classes"], where + ".all_classes");
  r.id = j.contains("_id") && j["_id"].is_string() ? j["_id"].get<std::string>()
                                                   : "line-" + std::to_string(number);
  if (j.contains("length") && j["length"].is_number()) r.length = j["length"].get<double>();
  return r;
}

std::vector<LongBenchRecord> read_longbench_jsonl(const std::string& path, int limit) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": no such file (download LongBench's data/<dataset>.jsonl)");
  std::vector<LongBenchRecord> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    out.push_back(parse_longbench_line(line, path + ":" + std::to_string(number), number));
    if (limit > 0 && int(out.size()) >= limit) break;
  }
  if (out.empty()) throw InputError(path + ": holds no records");
  return out;
}

const LongBenchTask& longbench_task(const std::string& dataset) {
  static const std::map<std::string, LongBenchTask> tasks = [] {
    const std::string path = KVBENCH_SOURCE_DIR "/datasets/longbench/longbench_config.json";
    const json config = read_json_file(path);
    std::map<std::string, LongBenchTask> out;
    for (const auto& [name, entry] : config.at("datasets").items()) {
      LongBenchTask t;
      JsonFields f(entry, path + ": $.datasets." + name);
      f.require("prompt", t.prompt);
      f.require("max_new_tokens", t.max_new_tokens);
      f.require("chat_template", t.chat_template);
      f.require("stop_at_newline", t.stop_at_newline);
      f.finish();
      out[name] = t;
    }
    return out;
  }();
  const auto it = tasks.find(dataset);
  if (it == tasks.end()) throw InputError("unknown LongBench dataset \"" + dataset + "\"");
  return it->second;
}

std::string longbench_format(const std::string& prompt_template, const std::string& context,
                             const std::string& input) {
  std::string out;
  for (size_t pos = 0; pos < prompt_template.size();) {
    if (prompt_template.compare(pos, 9, "{context}") == 0) {
      out += context;
      pos += 9;
    } else if (prompt_template.compare(pos, 7, "{input}") == 0) {
      out += input;
      pos += 7;
    } else {
      out += prompt_template[pos++];
    }
  }
  return out;
}

std::string longbench_question_tail(const std::string& prompt_template, const std::string& input) {
  const size_t context = prompt_template.find("{context}"), question = prompt_template.find("{input}");
  if (context == std::string::npos || (question != std::string::npos && question < context))
    return "";
  return longbench_format(prompt_template.substr(context + 9), "", input);
}

std::string longbench_truncate(const Tokenizer& tokenizer, const std::string& prompt,
                               int64_t max_length) {
  const std::vector<int> ids = tokenizer.encode(prompt, /*add_special=*/true);
  if (int64_t(ids.size()) <= max_length) return prompt;
  const size_t half = size_t(max_length / 2);
  const std::vector<int> head(ids.begin(), ids.begin() + long(half));
  const std::vector<int> tail(ids.end() - long(half), ids.end());
  return tokenizer.decode(head, /*skip_special=*/true) + tokenizer.decode(tail, true);
}

namespace {

// The reference scripts that read the end of each prompt through decode steps, and per task
// the text whose last occurrence begins that end when it lies within the last 100 characters
// (Quest's evaluation/LongBench/pred.py, ClusterKV's accuracy/LongBench/pred.py: "simulate
// decoding in the question stage"). A task without an anchor: the last 100 characters.
constexpr size_t kDecodedChars = 100;
const std::map<std::string, std::map<std::string, std::string>> kDecodedAnchors = {
    {"quest",
     {{"qasper", "Question:"}, {"hotpotqa", "Question:"}, {"multifieldqa_en", "Now,"},
      {"gov_report", "Now,"}, {"triviaqa", "Answer the question"},
      {"narrativeqa", "Do not provide"}}},
    {"clusterkv",
     {{"qasper", "Question:"}, {"hotpotqa", "Question:"}, {"2wikimqa", "Question:"},
      {"musique", "Question:"}, {"multifieldqa_en", "Now,"}, {"gov_report", "Now,"},
      {"qmsum", "Now,"}, {"triviaqa", "Answer the question"},
      {"narrativeqa", "Do not provide"},
      {"passage_retrieval_en", "The following is an abstract."}}}};

std::vector<std::string> anchored_tasks(const std::string& script) {
  std::vector<std::string> tasks;
  for (const auto& [task, anchor] : kDecodedAnchors.at(script)) tasks.push_back(task);
  return tasks;
}

// LongBench's 16 English tasks, which the forks' runners are limited to.
const std::vector<std::string> kEnglishTasks = {
    "narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique",
    "gov_report", "qmsum", "multi_news", "trec", "triviaqa", "samsum", "passage_count",
    "passage_retrieval_en", "lcc", "repobench-p"};

// How a reference's LongBench runner builds and generates otherwise than THUDM's pred.py (its
// decoded end apart: kDecodedAnchors).
struct PredScript {
  std::string name;
  // chat_template "reference": the built-in form it wraps a template family's models in, where
  // not the model's own template ("none": unwrapped). THUDM's pred.py wraps no Mistral and no
  // Llama-3 prompt; kvbench's reference wraps Llama-2 and Llama-3 and 3.1 as KVCache-Factory's
  // written forms.
  std::map<std::string, std::string> chat_as = {
      {"llama2", "llama2"}, {"llama3", "llama3"}, {"llama3_1", "llama3"}, {"mistral", "none"}};
  std::vector<std::string> unwrapped, wrapped;  // tasks it wraps otherwise than THUDM's
  // The only tasks it runs (empty: all); `runs` names the runner and `others` what it does
  // with the rest, for the refusal.
  std::vector<std::string> tasks;
  bool longbench_e = true;  // its tasks' LongBench-E files too
  std::string runs, others;
  bool first_token_never_stops = false;  // min_length / min_tokens 1 on every task
  bool samsum_stops_at_newline = true;
  // samsum's stops as THUDM's pred.py passes them: eos_token_id=[tokenizer.eos_token_id, "\n"]
  // (KVCache-Factory: every EOS id of the model and "\n").
  bool samsum_stops_at_eos_token = true;
  bool eos_token_only = false;       // every task stops at the tokenizer's eos_token alone
  std::vector<std::string> every_eos_id_families;  // but these families at every EOS id
  bool first_token_unchecked = false;  // its decode loop compares from the second token on
};

const std::vector<PredScript>& pred_scripts() {
  static const std::vector<PredScript> scripts = {
      {.name = "longbench"},
      // Quest's build_chat: Llama-2 chat as [INST]p[/INST], Llama-3.1 and Mistral unwrapped.
      {.name = "quest",
       .chat_as = {{"llama2", "llama2_longbench"}, {"llama3", "none"}, {"llama3_1", "none"},
                   {"mistral", "none"}},
       .eos_token_only = true, .first_token_unchecked = true},
      // Its Llama runs stop at the tokenizer's eos_token alone, its GLM-4 runs at GLM-4's three
      // EOS ids (written out in its pred.py), which are GLM-4's every EOS id.
      // Its build_chat: GLM-4 and Llama-3 models in their own template rendered as text, then
      // encoded with the tokenizer's prefix again (two); nothing else wrapped.
      {.name = "clusterkv",
       .chat_as = {{"glm4", kOwnTemplateAsText}, {"llama3", kOwnTemplateAsText},
                   {"llama3_1", kOwnTemplateAsText}, {"llama2", "none"}, {"mistral", "none"}},
       .wrapped = {"triviaqa"}, .tasks = anchored_tasks("clusterkv"),
       .runs = "ClusterKV's pred.py reads only ", .others = " (it asserts on the others)",
       .eos_token_only = true, .every_eos_id_families = {"glm4"}, .first_token_unchecked = true},
      {.name = "kvcache-factory", .tasks = kEnglishTasks, .longbench_e = false,
       .runs = "KVCache-Factory's run_longbench.py runs only ",
       .first_token_never_stops = true, .samsum_stops_at_eos_token = false},
      // FFY0/AdaKV's experiments/LongBench/pred.py: THUDM's, its 16 English tasks hard-coded,
      // Llama-3-Instruct in its own template rendered as text (two BOS), every task stopped
      // at the tokenizer's eos_token alone.
      {.name = "adakv",
       .chat_as = {{"llama2", "llama2_longbench"}, {"llama3", kOwnTemplateAsText},
                   {"llama3_1", kOwnTemplateAsText}, {"mistral", "none"}},
       .tasks = kEnglishTasks, .runs = "AdaKV's pred.py runs only ", .eos_token_only = true},
      {.name = "kvcompress",
       .chat_as = {{"llama2", "llama2_longbench"}, {"llama3", "llama3_snapkv"},
                   {"llama3_1", "llama3_snapkv"}, {"mistral", "none"}},
       .unwrapped = {"passage_count"}, .tasks = kEnglishTasks, .longbench_e = false,
       .runs = "vllm-kvcompress's experiments/run_longbench.py runs only ",
       .first_token_never_stops = true, .samsum_stops_at_newline = false},
      {.name = "pqcache",
       .chat_as = {{"llama2", "llama2_longbench"}, {"llama3", "llama3_pqcache"},
                   {"llama3_1", "llama3_1_pqcache"}, {"mistral", "llama2_longbench"}},
       .tasks = {"narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique",
                 "gov_report", "qmsum", "multi_news", "trec", "triviaqa", "samsum",
                 "passage_count", "passage_retrieval_en"},
       .longbench_e = false,
       .runs = "PQCache's vq_pred.py runs only "}};
  return scripts;
}

const PredScript* pred_script_named(const std::string& name) {
  for (const PredScript& s : pred_scripts())
    if (s.name == name) return &s;
  return nullptr;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct LongBenchParams {
  std::string dataset;
  std::string data_dir;
  int64_t max_length = 7500;
  // "reference": the model's template family as the pred_script's runner wraps it
  // (PredScript::chat_as); "auto": the model's own, whatever the family; or a named template.
  std::string chat_template = "reference";
  int samples = 0;  // 0 = all records
  std::string jieba_dict;  // the Chinese word metrics' dictionary; "" = Debian's python3-jieba
  // Whose pred.py builds the prompts: longbench (THUDM's) or a fork's (pred_scripts()).
  std::string pred_script = "longbench";

  std::string file() const { return data_dir + "/" + dataset + ".jsonl"; }

  static const ConfigFields<LongBenchParams>& fields() {
    using P = LongBenchParams;
    static const auto f =
        ConfigFields<P>()
            .required("dataset", &P::dataset,
                      "LongBench task, e.g. qasper (its .jsonl name); LongBench-E's are "
                      "<task>_e, e.g. qasper_e, scored also by length range")
            .required("data_dir", &P::data_dir, "folder holding <dataset>.jsonl")
            .field("max_length", &P::max_length,
                   "prompt tokens at most: longer ones are cut in the middle (LongBench's pred.py)",
                   check::at_least(2))
            .field("chat_template", &P::chat_template,
                   "for the tasks LongBench wraps in a chat template: reference (the model's "
                   "family as pred_script's runner wraps it; THUDM's: KVCache-Factory's written "
                   "Llama-2 and Llama-3 forms, Llama-3.1 too, none for Mistral, the model's own "
                   "template for the rest; README: where they differ), auto (the model's own "
                   "template, its Jinja rendered, every family) or a named template")
            .field("samples", &P::samples, "records used (0: all)", check::at_least(0))
            .custom("jieba_dict", "string",
                    "the Chinese word metrics' dictionary (\"\": Debian's python3-jieba)",
                    [](const json& v, const std::string& path, P& p) {
                      if (!v.is_string()) throw InputError(path + ": expected a string, got " +
                                                           json_type_name(v));
                      p.jieba_dict = v.get<std::string>();
                    },
                    // Written only when set, so that earlier configs' cells keep their ids.
                    [](const P& p) { return p.jieba_dict.empty() ? json() : json(p.jieba_dict); })
            .custom("pred_script", "string",
                    "whose pred.py: longbench (THUDM's: the prompt prefilled whole), quest "
                    "(mit-han-lab/Quest's evaluation: the question's last <= 100 characters read "
                    "through decode steps), clusterkv (sjtu-zhao-lab/ClusterKV's accuracy "
                    "code: the same with its anchors, triviaqa in the chat template; the 10 "
                    "tasks it anchors), kvcache-factory (Zefan-Cai/KVCache-Factory's "
                    "run_longbench.py: min_length 1 on every task; the 16 English tasks), "
                    "kvcompress (IsaacRe/vllm-kvcompress's experiments/run_longbench.py: "
                    "SnapKV's Llama forms, passage_count unwrapped, min_tokens 1 and no samsum "
                    "newline stop; the 16 English tasks) or pqcache (HugoZHL/PQCache's "
                    "vq_pred.py: the Llama-3 models' own templates with a system message, "
                    "Mistral as [INST]p[/INST]; its 14 tasks) or adakv (FFY0/AdaKV's "
                    "experiments/LongBench/pred.py: Llama-3-Instruct in its own template "
                    "rendered as text, two BOS, every task stopped at the tokenizer's eos_token "
                    "alone; the 16 English tasks)",
                    [](const json& v, const std::string& path, P& p) {
                      if (!v.is_string()) throw InputError(path + ": expected a string, got " +
                                                           json_type_name(v));
                      p.pred_script = v.get<std::string>();
                      if (!pred_script_named(p.pred_script)) {
                        std::vector<std::string> names;
                        for (const PredScript& s : pred_scripts()) names.push_back(s.name);
                        throw InputError(path + ": \"" + p.pred_script + "\": expected one of " +
                                         join(names, ", "));
                      }
                    },
                    // Written only when not THUDM's, so that earlier cells keep their ids.
                    [](const P& p) {
                      return p.pred_script == "longbench" ? json() : json(p.pred_script);
                    })
            .rule(check_params);
    return f;
  }
  static void check_params(LongBenchParams& p, const JsonFields& f) {
    if (longbench_task_of(p.dataset).empty()) {
      throw InputError(f.path("dataset") + ": unknown LongBench dataset \"" + p.dataset +
                       "\" (known: " + join(longbench_datasets(), ", ") +
                       "; LongBench-E: " + join(longbench_e_datasets(), "_e, ") + "_e)");
    }
    if (longbench_needs_jieba(longbench_task_of(p.dataset))) {
      try {
        jieba_segmenter(p.jieba_dict);  // loaded once per process; here to fail before running
      } catch (const InputError& e) {
        throw InputError(f.path("jieba_dict") + ": " + e.what());
      }
    }
    if (p.chat_template != "auto" && p.chat_template != "reference") {
      try {
        apply_chat_template(p.chat_template, "");
      } catch (const InputError& e) {
        throw InputError(f.path("chat_template") + ": " + e.what());
      }
    }
    const PredScript& script = *pred_script_named(p.pred_script);
    const std::string task = longbench_task_of(p.dataset);
    if (!script.tasks.empty() && !listed(script.tasks, task))
      throw InputError(f.path("pred_script") + ": " + script.runs + join(script.tasks, ", ") +
                       script.others);
    if (!script.longbench_e && task != p.dataset)
      throw InputError(f.path("pred_script") + ": " + script.runs + "LongBench's own files, "
                       "not LongBench-E's (" + p.dataset + ")");
    if (!std::filesystem::is_regular_file(p.file()))
      throw InputError(f.path("data_dir") + ": " + p.file() + ": no such file");
  }
};

// A record's length as its file writes it: an integer stays one (0 when absent).
json length_json(const std::optional<double>& length) {
  if (!length) return 0;
  if (*length == std::floor(*length) && std::abs(*length) < 9e15) return int64_t(*length);
  return *length;
}

class LongBench : public Dataset {
 public:
  explicit LongBench(const LongBenchParams& p)
      : params_(p), name_(longbench_task_of(p.dataset)), task_(longbench_task(name_)) {}

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t /*seed*/) const override {
    std::vector<Sample> out;
    const std::vector<LongBenchRecord> records = read_longbench_jsonl(params_.file(), params_.samples);
    const PredScript& script = *pred_script_named(params_.pred_script);
    const bool wrapped = (task_.chat_template && !listed(script.unwrapped, name_)) ||
                         listed(script.wrapped, name_);
    const bool named = params_.chat_template != "auto" && params_.chat_template != "reference";
    if (wrapped && named)
      check_chat_template_tokens(params_.chat_template, tokenizer, "chat_template");
    for (const LongBenchRecord& r : records) {
      Sample s;
      s.id = r.id;
      const std::string full = longbench_format(task_.prompt, r.context, r.input);
      s.prompt = longbench_truncate(tokenizer, full, params_.max_length);
      const bool truncated = s.prompt != full;
      // The question (with the instructions around it) ends the prompt, unless truncation cut
      // into it or the template asks before the context.
      const std::string tail = longbench_question_tail(task_.prompt, r.input);
      const bool marked = !tail.empty() && ends_with(s.prompt, tail);
      if (marked) s.question_offset = s.prompt.size() - tail.size();
      if (wrapped) {
        if (!named) {
          s.chat_template = "auto";  // the runner's model's
          // The family's form as the pred_script's runner wraps it (THUDM's pred.py,
          // KVCache-Factory's and AdaKV's: no Mistral prompt).
          if (params_.chat_template == "reference") s.auto_chat_as = script.chat_as;
        } else {
          const std::string around = apply_chat_template(params_.chat_template, s.prompt);
          // The template wraps the prompt, unchanged or trimmed at its ends (llama3_1).
          const size_t at = wrapped_prompt_start(around, s.prompt);
          if (marked) s.question_offset = at == std::string::npos ? at : s.question_offset + at;
          s.prompt = around;
        }
      }
      if (const auto script = kDecodedAnchors.find(params_.pred_script);
          script != kDecodedAnchors.end()) {
        s.decoded_chars = kDecodedChars;
        const auto anchor = script->second.find(name_);
        if (anchor != script->second.end()) s.decoded_anchor = anchor->second;
      }
      if (task_.stop_at_newline && script.samsum_stops_at_newline) {
        s.stop_texts = {"\n"};
        s.min_new_tokens = 1;
        s.stops_at_eos_token_only = script.samsum_stops_at_eos_token;
      }
      if (script.first_token_never_stops) s.min_new_tokens = 1;
      if (script.eos_token_only) {
        s.stops_at_eos_token_only = true;
        s.every_eos_id_families = script.every_eos_id_families;
      }
      if (script.first_token_unchecked) s.unchecked_new_tokens = 1;
      s.answers = r.answers;
      s.max_new_tokens = task_.max_new_tokens;
      if (longbench_e() && !r.length)  // LongBench-E scores by it
        throw InputError(params_.file() + ": record " + r.id + " has no numeric \"length\", "
                         "which LongBench-E's length ranges need");
      // eval.py scores every record with the last one's all_classes (the variable its loop
      // overwrites), which LongBench's files give every record alike.
      s.meta = {{"all_classes", records.back().all_classes}, {"length", length_json(r.length)},
                {"truncated", truncated}};
      out.push_back(std::move(s));
    }
    group_shared_contexts(out);
    return out;
  }

  // Records that repeat one context (the same text before their questions) are questions
  // about one context: context_id "context-of-<first record's id>".
  static void group_shared_contexts(std::vector<Sample>& samples) {
    std::map<std::string, std::vector<Sample*>> by_context;
    for (Sample& s : samples)
      if (s.question_offset != std::string::npos)
        by_context[s.prompt.substr(0, s.question_offset)].push_back(&s);
    for (auto& [context, group] : by_context)
      if (group.size() > 1)
        for (Sample* s : group) s->context_id = "context-of-" + group.front()->id;
  }

  double score(const Sample& sample, const std::string& prediction) const override {
    return 100.0 * record_score(sample, prediction);
  }
  // The metric of eval.py, in [0, 1].
  double record_score(const Sample& sample, const std::string& prediction) const {
    std::vector<std::string> classes;
    if (sample.meta.contains("all_classes"))
      classes = sample.meta["all_classes"].get<std::vector<std::string>>();
    return longbench_record_score(name_, prediction, sample.answers, classes, params_.jieba_dict);
  }
  std::string metric_name() const override { return longbench_metric_name(name_); }

  // LongBench-E's datasets: eval.py --e's score of each length range ("score_0-4k", ...) and
  // its record count ("records_0-4k", ...); a range without records has neither (eval.py: NaN).
  std::vector<CellMetric> score_breakdown(const std::vector<Sample>& samples,
                                          const std::vector<std::string>& answers) const override {
    if (!longbench_e()) return {};
    std::vector<double> lengths, scores;
    for (size_t i = 0; i < samples.size(); ++i) {
      lengths.push_back(samples[i].meta.at("length").get<double>());
      scores.push_back(record_score(samples[i], answers[i]));
    }
    std::vector<CellMetric> out;
    for (const LengthRangeScore& r : longbench_e_scores(lengths, scores)) {
      if (r.records == 0) continue;
      out.push_back({"score_" + r.range, r.score, metric_name()});
      out.push_back({"records_" + r.range, double(r.records), "count"});
    }
    return out;
  }

 private:
  bool longbench_e() const { return name_ != params_.dataset; }  // "<task>_e"

  LongBenchParams params_;
  std::string name_;  // the task: params_.dataset without LongBench-E's "_e"
  LongBenchTask task_;
};

KVB_REGISTER_DATASET(make_dataset_info<LongBench, LongBenchParams>({
    .name = "longbench",
    .description = "LongBench v1: one of its 21 datasets (or of LongBench-E's 13, <task>_e) read "
                   "from <data_dir>/<dataset>.jsonl",
    .source = "THUDM/LongBench v1 (pred.py prompts and truncation, metrics.py, eval.py)",
    .fidelity = "chat_template reference (the default) wraps Llama-2 and Llama-3 (3.1 too) in "
                "KVCache-Factory's written forms, Mistral in none, the rest in the model's own "
                "template (its Jinja rendered); pred.py's own forms are "
                "named: llama2_longbench ([INST]{prompt}[/INST]), vicuna (LongChat, Vicuna; not "
                "detected), none (Llama-3); LongBench-E's range scores as eval.py --e computes "
                "them (numpy's pairwise mean and rounding); every record scored with the last "
                "record's all_classes, as eval.py; pred_script quest / clusterkv read the "
                "question's last <= 100 characters through decode steps as those papers' "
                "pred.py, the end's first token dropped as there (BOS; GLM-4's <sop> is fed); "
                "not reproduced: ClusterKV counts glm4's truncation without its special "
                "tokens (kvbench with them: 2 tokens fewer kept); Quest's LongChat/Vicuna "
                "form (its template is not detected: name vicuna); "
                "kvcache-factory: its Llama-2 form ([INST] p [/INST] on every task, wrapped "
                "before the cut) and its per-model max lengths (3950 / 7500 / 31500; give "
                "max_length) are not built; kvcompress: its max lengths (130000 / 31500) are "
                "max_length's to give, Mistral's slow tokenizer and the llama3-70b code "
                "prompts are not built; pqcache: its max lengths (130000 / 32000) are "
                "max_length's to give; adakv: its max length (31500 for Mistral, its scripted "
                "model) is max_length's to give, its Llama-2 form only where the model's path "
                "holds \"llama2\" (kvbench wraps every Llama-2 chat model); quest and "
                "clusterkv compare a generated token with the stops from the second on (a "
                "first EOS is generated on); quest stops at the tokenizer's eos_token alone, "
                "clusterkv too but GLM-4 at its three EOS ids; "
                "samsum stops at the tokenizer's eos_token and \"\\n\" (THUDM's, PQCache's, "
                "AdaKV's; KVCache-Factory's at every EOS id)",
    .questions_per_context = "1: the template's text after {context} (question, instructions), "
                             "unmarked where truncation cut into it; records that repeat a "
                             "context are its questions",
    .required_params = {"dataset", "data_dir"},
    // auto 1 (2026-11-30): Llama-3.1 in its own template (llama3_1), not Llama-3's. auto 2 and
    // reference 1 (2026-11-30, later): the model's own template rendered from its Jinja (Llama-3's
    // trim, Llama-2's strip, Qwen2's system message), where a built-in form stood for it; a
    // named template's prompts are unchanged.
    // Plus 1 (2026-11-30, later) where the stops or chat forms changed: samsum's at the
    // tokenizer's eos_token alone under THUDM's and PQCache's scripts; quest's every task at
    // it, quest's and clusterkv's first token not compared with them, their build_chat forms.
    // Plus 1 more for clusterkv (2026-11-30, later still): its models but GLM-4 stop at the
    // tokenizer's eos_token alone.
    .revision =
        [](const json& p) {
          const std::string chat_template = p.value("chat_template", "reference");
          const std::string script = p.value("pred_script", "longbench");
          const bool samsum = longbench_task_of(p.value("dataset", "")) == "samsum";
          const bool stops = script == "quest" || script == "clusterkv" ||
                             (samsum && (script == "longbench" || script == "pqcache"));
          return (chat_template == "auto" ? 2 : chat_template == "reference" ? 1 : 0) + stops +
                 (script == "clusterkv");
        },
}));

}  // namespace

bool longbench_decodes_question_end(const std::string& name) {
  return kDecodedAnchors.count(name) > 0;
}

}  // namespace kvb
