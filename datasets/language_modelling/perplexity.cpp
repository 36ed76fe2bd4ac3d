// Perplexity over a text file (PG19 in the ClusterKV paper, Fig. 10): consecutive windows of
// prefix_tokens + eval_tokens tokens; the prefix is prefilled, then the eval tokens are fed one
// by one (teacher forcing) while the method compresses as during decoding.
#include <fstream>
#include <sstream>

#include "datasets/dataset.h"
#include "engine/common/files.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

struct PerplexityParams;
std::string read_text(const PerplexityParams& p, const std::string& where);

struct PerplexityParams {
  std::string text_file;
  std::string text_field;  // "": the file's bytes are the text
  int64_t prefix_tokens = 1024;
  int64_t eval_tokens = 256;
  int samples = 1;  // consecutive, non-overlapping windows from the start of the file
  std::string windows = "tokens";  // how a window reaches the model: its tokens, or its text

  static const ConfigFields<PerplexityParams>& fields() {
    using P = PerplexityParams;
    static const auto f =
        ConfigFields<P>()
            .required("text_file", &P::text_file, "the text whose windows are scored")
            .added_field("text_field", &P::text_field,
                         "\"\": text_file's bytes are the text (refused for a .json or .jsonl "
                         "file: its quotes and escapes are not text); a name: text_file is one "
                         "JSON object (.json) and the text is this string field of it")
            .field("prefix_tokens", &P::prefix_tokens, "prompt tokens before the scored ones",
                   check::at_least(1))
            .field("eval_tokens", &P::eval_tokens, "tokens scored by teacher forcing",
                   check::at_least(1))
            .field("samples", &P::samples,
                   "consecutive, non-overlapping windows from the start of the file",
                   check::at_least(1))
            // Always written: cells from before it (which fed the text) never match these.
            .field("windows", &P::windows,
                   "tokens: each window's own tokens of the one tokenisation of the text; text "
                   "(kvbench before 2026-11-29): its decoded text, encoded again, which can "
                   "begin with other tokens (a window cut inside a word or a character)",
                   check::one_of({"tokens", "text"}))
            .rule([](P& p, const JsonFields& f) {
              if (!std::ifstream(p.text_file))
                throw InputError(f.path("text_file") + ": " + p.text_file +
                                 ": cannot read the file");
              // A JSON file without a field, or with a wrong one, fails the suite, not its
              // cell (a plain text file is read when its samples are made, not here).
              if (!p.text_field.empty() || is_json_file_name(p.text_file))
                read_text(p, f.path("text_field"));
            });
    return f;
  }
};

// The text whose windows are scored: the file's bytes, or its JSON object's text_field.
// Errors begin with `where` (the text_field param).
std::string read_text(const PerplexityParams& p, const std::string& where) {
  if (p.text_field.empty()) {
    if (is_json_file_name(p.text_file))
      throw InputError(where + ": " + p.text_file + " is JSON, whose quotes and escapes would "
                       "be scored as text: name the field that holds the text "
                       "(PaulGrahamEssays.json: \"text\")");
    std::ifstream in(p.text_file, std::ios::binary);
    if (!in) throw InputError(p.text_file + ": cannot read the file (params.text_file)");
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }
  json j;
  try {
    j = read_json_file(p.text_file);
  } catch (const InputError& e) {  // JSON Lines among them: more than one document
    throw InputError(where + ": text_field reads one JSON object, and " + e.what());
  }
  const auto field = j.is_object() ? j.find(p.text_field) : j.end();
  if (field == j.end() || !field->is_string())
    throw InputError(where + ": " + p.text_file + " is not a JSON object with a string field \"" +
                     p.text_field + "\"");
  return field->get<std::string>();
}

class Perplexity : public Dataset {
 public:
  explicit Perplexity(const PerplexityParams& p) : params_(p) {}

  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t /*seed*/) const override {
    const std::vector<int> ids =
        tokenizer.encode(read_text(params_, "params.text_field"), /*add_special=*/false);
    const int64_t window = params_.prefix_tokens + params_.eval_tokens;
    if (int64_t(ids.size()) < window * params_.samples)
      throw InputError(params_.text_file + ": " + std::to_string(ids.size()) +
                       " tokens, fewer than samples x (prefix_tokens + eval_tokens) = " +
                       std::to_string(window * params_.samples));
    std::vector<Sample> out;
    for (int i = 0; i < params_.samples; ++i) {
      const auto start = ids.begin() + long(i * window);
      Sample s;
      s.id = "window-" + std::to_string(i);
      const std::vector<int> prompt_ids(start, start + long(params_.prefix_tokens));
      const std::vector<int> continuation_ids(start + long(params_.prefix_tokens), start + long(window));
      if (params_.windows == "tokens") {
        s.prompt_ids = prompt_ids;
        s.continuation_ids = continuation_ids;
      }
      // The text, for people (kvbench samples, reports) and for windows "text". Decoded
      // on its own the continuation would lose its leading space (SentencePiece strips it at
      // the start of a text), so it is cut from the decoded whole window where it can be.
      s.prompt = tokenizer.decode(prompt_ids);
      const std::string whole = tokenizer.decode(std::vector<int>(start, start + long(window)));
      s.reference_continuation = whole.compare(0, s.prompt.size(), s.prompt) == 0
                                     ? whole.substr(s.prompt.size())
                                     : tokenizer.decode(continuation_ids);
      s.max_new_tokens = 0;
      s.meta = {{"first_token", i * window}, {"eval_tokens", params_.eval_tokens}};
      out.push_back(std::move(s));
    }
    return out;
  }

  double score(const Sample&, const std::string&) const override { return 0.0; }  // unused
  std::string metric_name() const override { return "perplexity"; }
  bool teacher_forced() const override { return true; }

 private:
  PerplexityParams params_;
};

KVB_REGISTER_DATASET(make_dataset_info<Perplexity, PerplexityParams>({
    .name = "perplexity",
    .description = "perplexity of eval_tokens after prefix_tokens, teacher-forced, over a text file",
    .source = "PG19-style language modelling (ClusterKV Fig. 10)",
    .required_params = {"text_file"},
    // 1: a cell's score is the perplexity of all its tokens (was the mean of its windows').
    .revision = [](const json&) { return 1; },
}));

}  // namespace
}  // namespace kvb
