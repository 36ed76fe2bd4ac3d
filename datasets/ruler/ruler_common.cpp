#include "datasets/ruler/ruler_common.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "datasets/metrics/ruler_metrics.h"
#include "datasets/synthetic/haystack.h"
#include "datasets/synthetic/random.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb {

namespace {

// The chat templates a RULER task may name: the built-in ones but the LongBench forks' forms
// (their BOS written out, or their message trimmed, which RULER's sizing does not count).
std::vector<std::string> ruler_chat_templates() {
  std::vector<std::string> names;
  for (const std::string& name : chat_template_names())
    if (name != "llama3_1" && name != "llama3_snapkv" && name != "llama3_pqcache" &&
        name != "llama3_1_pqcache")
      names.push_back(name);
  return names;
}

}  // namespace

ConfigFields<RulerParams> RulerParams::fields(const RulerNeeds& needs) {
  using P = RulerParams;
  ConfigFields<P> f =
      ConfigFields<P>()
          .field("context_length", &P::context_length,
                 "length in the model's tokens: the prompt and its answer (generator)",
                 check::at_least(32))
          .field("samples", &P::samples, "samples generated", check::at_least(1));
  // A task's resources are required fields; other tasks accept and ignore them.
  const auto resource = [&](bool needed, const char* name, std::string P::*member,
                            const char* doc) {
    f = needed ? f.required(name, member, doc) : f.field(name, member, doc);
  };
  resource(needs.essay, "haystack_file", &P::haystack_file,
           "PaulGrahamEssays.json ({\"text\": ...}), the essay haystack");
  resource(needs.words, "wordlist_dir", &P::wordlist_dir,
           "folder with nounlist.txt, adjectivelist.txt, verblist.txt");
  if (needs.qa_file)  // only the qa tasks know it: other tasks' stored configs keep their keys
    f = f.required("data_file", &P::data_file,
                   "the QA file RULER's download_qa_dataset.sh fetches: SQuAD's dev-v2.0.json "
                   "(qa_1) or HotpotQA's hotpot_dev_distractor_v1.json (qa_2)");
  if (needs.several_keys)
    f = f.added_field("queries", &P::queries,
                      "joint: RULER's question; separate: every key asked in a question of its "
                      "own about the one context (a kvbench variant; question_position after)",
                      check::one_of({"joint", "separate"}));
  return f.field("question_position", &P::question_position,
                 "after the context (RULER) or before it (PQCache Table 3)",
                 check::one_of({"after", "before"}))
      .field("max_new_tokens", &P::max_new_tokens, "tokens generated per sample",
             check::at_least(1))
      .added_field("chat_template", &P::chat_template,
                   "none: RULER's base template; or a chat template around the task's text, "
                   "its tokens counted in the length, as RULER's model templates (llama2: "
                   "meta-chat, llama3: meta-llama3, vicuna: vicuna-chat)",
                   check::one_of(ruler_chat_templates()))
      // Always written: a config stored before the field (built as kvbench_v1) must not share
      // its identity with a config of the new default.
      .field("generator", &P::generator,
             "ruler: as RULER's prepare scripts (the prompt without BOS plus max_new_tokens "
             "fit context_length; one size per task from a probe sample, each sample whole "
             "steps below it until it fits; noise and needle haystacks of whole-unit lines, "
             "needles at random units; RULER's vt example); kvbench_v1: kvbench before 2026-11-29, the "
             "tiny models' (the prompt with BOS fills context_length; noise by the sentence, "
             "needles at 40 fixed depths; a 10-sentence vt example)",
             check::one_of({"ruler", "kvbench_v1"}))
      .rule([needs](P& p, const JsonFields& f) {
        if (p.generator == "ruler" && p.context_length <= p.max_new_tokens)
          throw InputError(f.path("context_length") + ": " + std::to_string(p.context_length) +
                           " leaves no room for a prompt beside max_new_tokens " +
                           std::to_string(p.max_new_tokens) + " (generator ruler)");
        if (needs.essay && !std::filesystem::is_regular_file(p.haystack_file))
          throw InputError(f.path("haystack_file") + ": " + p.haystack_file + ": no such file");
        if (needs.words && !std::filesystem::is_directory(p.wordlist_dir))
          throw InputError(f.path("wordlist_dir") + ": " + p.wordlist_dir + ": no such folder");
        if (needs.qa_file && !std::filesystem::is_regular_file(p.data_file))
          throw InputError(f.path("data_file") + ": " + p.data_file + ": no such file");
        if (needs.qa_file && p.generator != "ruler")
          throw InputError(f.path("generator") + ": the qa tasks have RULER's generator only");
        if (needs.qa_file && p.question_position != "after")
          throw InputError(f.path("question_position") + ": the qa tasks ask after their "
                           "documents only (RULER's template)");
        if (p.queries == "separate" && p.question_position != "after")
          throw InputError(f.path("queries") + ": separate questions follow the context "
                           "(question_position after)");
      });
}

RulerParams RulerParams::defaults(const RulerNeeds& needs) {
  RulerParams p;
  p.max_new_tokens = needs.default_max_new_tokens;
  return p;
}

std::string RulerPrompt::user_turn(const std::string& context, const std::string& position) const {
  if (position == "before") return intro + question + "\n" + context;
  return intro + context + "\n" + question;
}

std::string RulerPrompt::answer_start(const std::string& position) const {
  return position == "before" ? "\nAnswer:" : answer_prefix;
}

namespace {

// niah.py's singular template: its replacements, in its order, on the whole template.
std::string ruler_singular(std::string text) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"Some", "A"},
                                 {"are all", "is"}, {"are", "is"}, {"answers", "answer"}})
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

}  // namespace

std::vector<Sample> RulerTask::samples(const Tokenizer& tokenizer, uint64_t seed) const {
  check_chat_template_tokens(params_.chat_template, tokenizer, "chat_template");
  return task_samples(tokenizer, seed);
}

ChatTemplateParts RulerTask::template_parts(const RulerPrompt& prompt) const {
  ChatTemplateParts parts = chat_template_parts(params_.chat_template);
  if (prompt.singular && ruler_generator()) {
    parts.before = ruler_singular(parts.before);
    parts.after = ruler_singular(parts.after);
  }
  return parts;
}

std::string RulerTask::compose(const RulerPrompt& prompt, const std::string& context,
                               const std::string& lead) const {
  const ChatTemplateParts parts = template_parts(prompt);
  return parts.before + lead + prompt.user_turn(context, params_.question_position) + parts.after +
         prompt.answer_start(params_.question_position);
}

std::string RulerTask::question_tail(const RulerPrompt& prompt) const {
  if (params_.question_position != "after") return "";
  return "\n" + prompt.question + template_parts(prompt).after + prompt.answer_prefix;
}

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the word list");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  if (out.empty()) throw InputError(path + ": the word list is empty");
  return out;
}

// Ends with . ! or ?, possibly followed by closing quotes or brackets.
bool word_ends_sentence(const std::string& word) {
  size_t end = word.size();
  while (end > 0 && (word[end - 1] == '"' || word[end - 1] == '\'' || word[end - 1] == ')'))
    --end;
  return end > 0 && (word[end - 1] == '.' || word[end - 1] == '!' || word[end - 1] == '?');
}

}  // namespace

WordLists WordLists::load(const std::string& dir) {
  WordLists w;
  w.nouns = read_lines(dir + "/nounlist.txt");
  w.adjectives = read_lines(dir + "/adjectivelist.txt");
  w.verbs = read_lines(dir + "/verblist.txt");
  return w;
}

EssayWords EssayWords::load(const std::string& path) {
  const json j = read_json_file(path);
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
    throw InputError(path + ": expected an object with a string field \"text\"");
  EssayWords e;
  std::istringstream words(j["text"].get<std::string>());
  for (std::string w; words >> w;) {
    e.ends_sentence.push_back(word_ends_sentence(w));
    e.words.push_back(std::move(w));
  }
  if (e.words.empty()) throw InputError(path + ": \"text\" is empty");
  return e;
}

std::string essay_haystack(const EssayWords& essay, int64_t n,
                           const std::function<std::vector<EssayInsert>(int64_t)>& inserts,
                           bool ruler_join) {
  const size_t total = essay.words.size();
  auto ends_at = [&](int64_t i) { return bool(essay.ends_sentence[size_t(i) % total]); };
  std::vector<std::string> sentences(1);  // a trailing fragment counts as a sentence
  for (int64_t i = 0; i < n; ++i) {
    std::string& sentence = sentences.back();
    sentence += (sentence.empty() ? "" : " ") + essay.words[size_t(i) % total];
    if (ends_at(i) && i + 1 < n) sentences.emplace_back();
  }
  if (n == 0) sentences.clear();
  const std::vector<EssayInsert> ins = inserts(int64_t(sentences.size()));
  // The pieces in order: the sentences before each insert (joined), the insert, ..., the rest.
  std::vector<std::string> pieces;
  size_t from = 0;
  for (const EssayInsert& insert : ins) {
    const size_t to = std::min(sentences.size(), size_t(std::max<int64_t>(insert.sentence, 0)));
    std::string piece;
    for (size_t s = from; s < std::max(from, to); ++s) piece += (piece.empty() ? "" : " ") + sentences[s];
    pieces.push_back(piece);
    pieces.push_back(insert.text);
    from = std::max(from, to);
  }
  std::string rest;
  for (size_t s = from; s < sentences.size(); ++s) rest += (rest.empty() ? "" : " ") + sentences[s];
  pieces.push_back(rest);
  std::string out;
  for (const std::string& piece : pieces) {
    if (!ruler_join && piece.empty()) continue;
    if (!out.empty() || (ruler_join && &piece != &pieces.front())) out += ' ';
    out += piece;
  }
  return out;
}

int64_t ruler_depth_index(int64_t sentences, int depth_percent) {
  return int64_t(double(sentences) * (double(depth_percent) / 100.0));
}

const std::vector<int>& ruler_depths() {
  static const std::vector<int> depths = [] {
    std::vector<int> d;
    // 100*i/39 is never exactly k+0.5 for 0 < i < 39, so plain rounding equals numpy's.
    for (int i = 0; i < 40; ++i) d.push_back(int(std::lround(100.0 * i / 39.0)));
    return d;
  }();
  return depths;
}

std::vector<int> draw_depths(std::mt19937_64& rng, int k) {
  const std::vector<int>& all = ruler_depths();
  std::vector<int> out;
  for (int64_t i : sample_indices(rng, int64_t(all.size()), k)) out.push_back(all[size_t(i)]);
  std::sort(out.begin(), out.end());
  return out;
}

const std::string& ruler_noise_unit() {
  static const std::string unit = [] {
    std::string out;
    for (const char* sentence : kNoiseSentences) out += (out.empty() ? "" : " ") + std::string(sentence);
    return out;
  }();
  return unit;
}

std::string ruler_lines(int64_t n, const std::function<std::string(int64_t)>& unit,
                        const std::vector<Insert>& inserts) {
  std::string out;
  size_t next = 0;
  auto line = [&](const std::string& text) { out += (out.empty() ? "" : "\n") + text; };
  for (int64_t i = 0; i <= n; ++i) {
    for (; next < inserts.size() && inserts[next].position <= i; ++next) line(inserts[next].text);
    if (i < n) line(unit(i));
  }
  return out;
}

std::vector<int64_t> ruler_positions(uint64_t seed, int64_t n, int k) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out = sample_indices(rng, std::max<int64_t>(n, k), k);
  for (int64_t& p : out) p = std::min(p, n);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> ruler_position_percents(uint64_t seed, int64_t n, int k) {
  std::vector<double> out;
  for (int64_t at : ruler_positions(seed, n, k))
    out.push_back(n == 0 ? 0.0 : 100.0 * double(at) / double(n));
  return out;
}

namespace {

std::string random_uuid(std::mt19937_64& rng) {
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~0xF000ull) | 0x4000ull;                   // version 4
  lo = (lo & ~(0xC000ull << 48)) | (0x8000ull << 48);  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", unsigned(hi >> 32),
                unsigned((hi >> 16) & 0xFFFF), unsigned(hi & 0xFFFF), unsigned(lo >> 48),
                (unsigned long long)(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

}  // namespace

std::string random_value(std::mt19937_64& rng, const std::string& kind, const WordLists* words) {
  if (kind == "numbers") return std::to_string(uniform_int(rng, 1000000, 9999999));
  if (kind == "uuids") return random_uuid(rng);
  if (kind == "words" && words) {
    const std::string& adj = words->adjectives[uniform_below(rng, words->adjectives.size())];
    return adj + "-" + words->nouns[uniform_below(rng, words->nouns.size())];
  }
  throw std::logic_error("random_value: unknown kind " + kind);
}

FittedText RulerTask::fit_prompt(const Tokenizer& tokenizer, int64_t max_n,
                                 const std::function<std::string(int64_t)>& render) const {
  try {
    return fit_to_tokens(tokenizer, params_.context_length, max_n, render, /*count_bos=*/true);
  } catch (const InputError&) {
    throw InputError("context_length " + std::to_string(params_.context_length) +
                     " is too short for the task's template and question");
  }
}

int64_t ruler_binary_search(int64_t lower, int64_t upper, const std::function<bool(int64_t)>& fits) {
  std::optional<int64_t> found;
  const int64_t fallback = lower;
  while (lower <= upper) {
    const int64_t mid = (lower + upper) / 2;
    if (fits(mid)) {
      found = mid;
      lower = mid + 1;
    } else {
      upper = mid - 1;
    }
  }
  return found.value_or(fallback);
}

int64_t RulerTask::ruler_tokens(const Tokenizer& tokenizer, const std::string& text) const {
  return int64_t(tokenizer.encode(text, /*add_special=*/false).size());
}

bool RulerTask::ruler_fits(const Tokenizer& tokenizer, const std::string& text) const {
  return ruler_tokens(tokenizer, text) + params_.max_new_tokens <= params_.context_length;
}

int64_t RulerTask::ruler_task_size(const Tokenizer& tokenizer, int64_t step, int64_t length,
                                   const std::function<std::string(int64_t)>& per_unit_probe,
                                   const std::function<bool(int64_t)>& fits_probe) const {
  const double per_unit = double(ruler_tokens(tokenizer, per_unit_probe(step))) / double(step);
  const int64_t upper =
      std::max<int64_t>(int64_t(double(length) / per_unit * 3.0), 2 * step);
  return ruler_binary_search(step, upper, fits_probe);
}

FittedText RulerTask::ruler_sample(int64_t size, int64_t step,
                                   const std::function<std::string(int64_t)>& render,
                                   const std::function<bool(const std::string&)>& fits,
                                   int64_t min_n) const {
  for (int64_t n = size;;) {
    std::string text = render(n);
    if (fits(text)) return {n, std::move(text)};
    // A whole step, but never past min_n (a size that is no multiple of the step).
    const int64_t next = n > step ? std::max(n - step, min_n) : n - 1;
    if (next < min_n || next == n)
      throw InputError("context_length " + std::to_string(params_.context_length) +
                       " is too short for the task's template and question with max_new_tokens " +
                       std::to_string(params_.max_new_tokens) + " beside them (generator ruler)");
    n = next;
  }
}

FittedText RulerTask::ruler_sample(const Tokenizer& tokenizer, int64_t size, int64_t step,
                                   const std::function<std::string(int64_t)>& render,
                                   int64_t min_n) const {
  return ruler_sample(size, step, render,
                      [&](const std::string& text) { return ruler_fits(tokenizer, text); }, min_n);
}

double RulerTask::score(const Sample& sample, const std::string& prediction) const {
  return string_match_all(prediction, sample.answers);
}

Sample RulerTask::make_sample(const std::string& task, int index, std::string prompt,
                              std::vector<std::string> answers, json meta,
                              const std::string& question_tail) const {
  Sample s;
  s.id = task + "-" + std::to_string(index);
  if (!question_tail.empty()) {
    if (!ends_with(prompt, question_tail))
      throw std::logic_error(s.id + ": the prompt does not end with its question");
    s.question_offset = prompt.size() - question_tail.size();
  }
  s.prompt = std::move(prompt);
  s.answers = std::move(answers);
  s.max_new_tokens = params_.max_new_tokens;
  meta["question_position"] = params_.question_position;
  s.meta = std::move(meta);
  return s;
}

DatasetInfo ruler_dataset_info(const std::string& name, const std::string& description,
                               const RulerNeeds& needs,
                               std::function<std::unique_ptr<Dataset>(const RulerParams&)> create) {
  DatasetInfo info;
  info.name = name;
  info.description = description;
  info.source = "NVIDIA/RULER scripts/data/synthetic (generated, no download)";
  // Revisions of generator ruler: 1 (2026-11-29, niah only) the essay joins and depths and
  // the singular template; 2 for niah, 1 for the others (2026-11-30) RULER's sizing: one size
  // per task from a probe, whole steps down per sample.
  const int revision = name.rfind("niah_", 0) == 0 ? 2 : name.rfind("qa_", 0) == 0 ? 0 : 1;
  info.revision = [revision](const json& params) {
    return params.value("generator", "") == "ruler" ? revision : 0;
  };
  info.fidelity =
      "not faithful yet: essays split into sentences at . ! ? (RULER: nltk's sent_tokenize); "
      "the task's size is searched on one probe sample drawn once (niah, vt, cwe: RULER draws "
      "a new one for each size it tries); a sample that overflows the task's size keeps its "
      "needles, chain or words a step smaller (RULER draws new ones for each retry); where even "
      "one step overflows (RULER retries forever), samples go down one unit at a time; cwe "
      "refuses a sample short of its 10 common words and word lists its sizing would exhaust "
      "(RULER: english_words.json); RULER's chatglm-chat, Phi3 and other templates are not "
      "built in; generator kvbench_v1 is kvbench's own older generator";
  info.questions_per_context =
      needs.several_keys ? "1, or with queries: separate one per key; with question_position: "
                           "after (before: the question is part of the context)"
                         : "1, with question_position: after (before: the question is part of "
                           "the context)";
  const ConfigFields<RulerParams> fields = RulerParams::fields(needs);
  const RulerParams defaults = RulerParams::defaults(needs);
  info.param_fields = fields.docs(defaults);
  info.required_params = fields.required_names();
  info.default_params = [fields, defaults, required = info.required_params] {
    return optional_params(fields.write(defaults), required);
  };
  info.normalise_params = [fields, defaults](const json& params, const std::string& where) {
    return fields.write(fields.read(params, where, defaults));
  };
  info.create = [fields, defaults, create](const json& params) {
    return create(fields.read(params, "params", defaults));
  };
  return info;
}

}  // namespace kvb
