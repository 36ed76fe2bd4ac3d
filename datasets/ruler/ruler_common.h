// What the RULER-style tasks (NVIDIA/RULER, scripts/data/synthetic/) share: their params, the
// prompt layout (question after or before the context), the word and essay resources, the
// random keys and values, and registration. Each task is one class in its own .cpp.
#pragma once
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/synthetic/haystack.h"

namespace kvb {

// What a task needs beyond the common params; checked when the params are validated.
struct RulerNeeds {
  bool essay = false;  // haystack_file (PaulGrahamEssays.json)
  bool words = false;  // wordlist_dir (nounlist.txt, adjectivelist.txt, verblist.txt)
  int default_max_new_tokens = 128;
  bool several_keys = false;  // needles of several keys: `queries` may ask each separately
  bool qa_file = false;       // data_file (SQuAD or HotpotQA dev JSON; qa_1, qa_2)
};

struct RulerParams {
  int64_t context_length = 4096;  // tokens of the prompt and its answer (see generator)
  int samples = 8;
  std::string haystack_file;       // PaulGrahamEssays.json ({"text": ...})
  std::string wordlist_dir;        // folder with the three word lists
  std::string data_file;           // qa_1: SQuAD's dev-v2.0.json; qa_2: hotpot_dev_distractor_v1.json
  std::string question_position = "after";  // "after" (RULER) or "before" the context
  int max_new_tokens = 128;
  // "joint": RULER's one question about the queried keys; "separate": one question per key,
  // all about one context (tasks with several keys; context_sharing).
  std::string queries = "joint";
  // "none": RULER's base template (the task's text alone); a built-in chat template's name
  // (chat_template_names(), but the LongBench forks' forms): the user turn wrapped in it,
  // RULER's model templates.
  std::string chat_template = "none";
  // "ruler": as RULER's prepare scripts build a sample: its prompt's tokens without BOS plus
  // max_new_tokens (RULER's tokens_to_generate) fit context_length; noise and distractor-needle
  // haystacks are lines of whole units (the 5-sentence noise, a needle) with the needles before
  // units drawn at random; vt's worked example is RULER's (3-letter names, noise up to 500
  // tokens). "kvbench_v1": kvbench's generator before 2026-11-29, what the tiny models were
  // trained and scored on: the prompt with BOS fills context_length, the noise grows a
  // sentence at a time, needles at the 40 fixed depths, a 10-sentence vt example.
  std::string generator = "ruler";

  // The fields of a task with these needs: its resources are required and must exist on disk.
  static ConfigFields<RulerParams> fields(const RulerNeeds& needs);
  // The defaults of such a task (its max_new_tokens).
  static RulerParams defaults(const RulerNeeds& needs);
};

// A task's prompt around its context: a user turn, then the start of the answer. After
// (RULER's layout):
//   intro + context + "\n" + question  |  answer_prefix
// Before (the question ahead of the context, PQCache Table 3):
//   intro + question + "\n" + context  |  "\nAnswer:"
// In "before" the answer prefix, which repeats the query, is replaced by a neutral "Answer:" so
// that nothing after the context tells which needle is asked for. RulerTask::compose puts a
// chat template around the user turn, as RULER's model templates do.
struct RulerPrompt {
  std::string intro;  // ends with its separator ("\n", "\n\n" or " ")
  std::string question;
  std::string answer_prefix;
  // niah asking one value: RULER singularises its whole template then, the model template's
  // text included (vicuna's "polite answers" becomes "polite answer").
  bool singular = false;
  std::string user_turn(const std::string& context, const std::string& position) const;
  std::string answer_start(const std::string& position) const;
};

// Resources, read once per samples() call.
struct WordLists {
  std::vector<std::string> nouns, adjectives, verbs;
  static WordLists load(const std::string& dir);  // InputError naming the missing file
};
// The essay text split on whitespace into words, plus for each word whether it ends a sentence.
struct EssayWords {
  std::vector<std::string> words;
  std::vector<bool> ends_sentence;
  static EssayWords load(const std::string& path);  // InputError naming the file
};

// A needle or other insert placed before sentence `position` of the haystack.
struct EssayInsert {
  int64_t sentence;
  std::string text;
};
// The first `n` essay words (cycling through the essay when n exceeds it), joined by spaces,
// with the inserts between sentences (RULER inserts needles between nltk sentences).
// `inserts` is given the number of sentences among the n words and returns the inserts sorted
// by sentence (0..sentences). `ruler_join`: the pieces (the sentences between two inserts, an
// insert) joined by " " as niah.py joins them, an empty piece too, so an insert at sentence 0
// starts with a space, one at the end ends with one, and two at one place have two between
// them; otherwise (generator kvbench_v1) single spaces only.
std::string essay_haystack(const EssayWords& essay, int64_t n,
                           const std::function<std::vector<EssayInsert>(int64_t sentences)>& inserts,
                           bool ruler_join);
// niah.py's essay insertion index int(sentences * (depth / 100)), in floating point as Python
// computes it: 150 sentences at depth 82 give 122 (82/100 is just below 0.82), not 123.
int64_t ruler_depth_index(int64_t sentences, int depth_percent);

// The 40 evenly spaced needle depths 0..100 of RULER (round(linspace(0, 100, 40))).
const std::vector<int>& ruler_depths();
// `k` distinct depths drawn from ruler_depths(), sorted ascending.
std::vector<int> draw_depths(std::mt19937_64& rng, int k);

// RULER's noise haystack unit: the five noise sentences (kNoiseSentences) as one line.
const std::string& ruler_noise_unit();
// RULER's line haystacks (noise, distractor needles): units 0..n-1 joined by "\n", each insert
// a line of its own before the unit at its position (n: after the last). Inserts sorted by
// position.
std::string ruler_lines(int64_t n, const std::function<std::string(int64_t)>& unit,
                        const std::vector<Insert>& inserts);
// RULER's needle places: `k` distinct unit indices drawn uniformly from range(n) (Python's
// random.sample), ascending, from a generator seeded with `seed`, so a size always gets the
// same ones. Where n < k (sizes too small for RULER to try), the places past n are n.
std::vector<int64_t> ruler_positions(uint64_t seed, int64_t n, int k);
// Those places as depths in percent of the n units, ascending (sample metadata).
std::vector<double> ruler_position_percents(uint64_t seed, int64_t n, int k);

// RULER's binary search for a task's haystack size (niah.py, variable_tracking.py,
// common_words_extraction.py): mid = (lower + upper) / 2 until the bounds cross, keeping the
// last mid that fits; `lower` itself where none does (RULER's fallback, its step).
int64_t ruler_binary_search(int64_t lower, int64_t upper, const std::function<bool(int64_t)>& fits);

// Random values and keys, RULER's kinds: "numbers" (7 digits), "words" (adjective-noun),
// "uuids" (version-4 UUID text).
std::string random_value(std::mt19937_64& rng, const std::string& kind, const WordLists* words);

// Base of every RULER task: the common params, string_match_all scoring.
class RulerTask : public Dataset {
 public:
  explicit RulerTask(RulerParams p) : params_(std::move(p)) {}
  // The task's samples, once its chat template is known to suit the tokenizer
  // (check_chat_template_tokens: llama3's markers on a model without them are refused).
  std::vector<Sample> samples(const Tokenizer& tokenizer, uint64_t seed) const final;
  double score(const Sample& sample, const std::string& prediction) const override;
  std::string metric_name() const override { return "string_match_all"; }

 protected:
  virtual std::vector<Sample> task_samples(const Tokenizer& tokenizer, uint64_t seed) const = 0;
  bool ruler_generator() const { return params_.generator == "ruler"; }
  // The chat template's text before and after the user turn (RULER's model template), singular
  // where the prompt is (generator ruler).
  ChatTemplateParts template_parts(const RulerPrompt& prompt) const;
  // The prompt as RULER's prepare.py builds it, model_template.format(task) + answer_prefix:
  // the user turn (after `lead`) in chat_template, then the answer's start.
  std::string compose(const RulerPrompt& prompt, const std::string& context,
                      const std::string& lead = "") const;
  // The end of compose()'s text that asks the question when it follows the context ("after"):
  // "\n" + question, the template's end, the answer prefix; "" for "before", where the question
  // precedes the context.
  std::string question_tail(const RulerPrompt& prompt) const;
  // Generator kvbench_v1's sizing: the largest render(n), n in [0, max_n], whose tokens with
  // BOS fit context_length (render grows with n), each sample filled on its own; InputError
  // when render(0) does not fit.
  FittedText fit_prompt(const Tokenizer& tokenizer, int64_t max_n,
                        const std::function<std::string(int64_t)>& render) const;

  // Generator ruler's sizing, as RULER's prepare scripts size a task: one haystack size for the
  // whole task, found on a probe sample (ruler_task_size, or the task's own search), then each
  // sample from that size drops whole steps until it fits (ruler_sample).
  // A prompt's tokens without BOS (RULER's text_to_tokens).
  int64_t ruler_tokens(const Tokenizer& tokenizer, const std::string& text) const;
  // Whether a prompt fits: its tokens without BOS plus max_new_tokens within context_length.
  bool ruler_fits(const Tokenizer& tokenizer, const std::string& text) const;
  // niah.py's and variable_tracking.py's size: tokens per unit from `per_unit_probe(step)`,
  // bounds [step, max(int(length / per_unit * 3), 2 * step)], then ruler_binary_search with
  // `fits_probe`. `length`: RULER's max_seq_length (context_length; vt's example: 500).
  int64_t ruler_task_size(const Tokenizer& tokenizer, int64_t step, int64_t length,
                          const std::function<std::string(int64_t)>& per_unit_probe,
                          const std::function<bool(int64_t)>& fits_probe) const;
  // A sample of the task's `size`: render(n) from n = size down by `step` (never past `min_n`)
  // until fits(text), the sample's own random draws kept (RULER draws new ones for each
  // retry). At n <= step, where RULER retries forever, one unit at a time (a tokenizer whose
  // step of haystack alone overflows, e.g. bytes); InputError once n = min_n does not fit
  // (cwe: its 10 common words; qa: the question's own documents).
  FittedText ruler_sample(int64_t size, int64_t step,
                          const std::function<std::string(int64_t)>& render,
                          const std::function<bool(const std::string&)>& fits,
                          int64_t min_n = 0) const;
  // The same with ruler_fits as `fits` (a prompt of one question).
  FittedText ruler_sample(const Tokenizer& tokenizer, int64_t size, int64_t step,
                          const std::function<std::string(int64_t)>& render,
                          int64_t min_n = 0) const;
  // A different stream of the seed for the probe sample, so that the samples' own draws
  // (needles, chains, words) are those of the earlier revision.
  static uint64_t probe_seed(uint64_t seed) { return seed ^ 0x5052'4f42'4550'524fULL; }
  // A sample with id "<task>-<i>", the answers, max_new_tokens and the prompt filled in; its
  // question marked when `question_tail` (question_tail()'s) ends the prompt.
  Sample make_sample(const std::string& task, int index, std::string prompt,
                     std::vector<std::string> answers, json meta,
                     const std::string& question_tail) const;
  RulerParams params_;
};

// The registry entry of a RULER task built by `create` from validated params.
DatasetInfo ruler_dataset_info(
    const std::string& name, const std::string& description, const RulerNeeds& needs,
    std::function<std::unique_ptr<Dataset>(const RulerParams&)> create);

}  // namespace kvb
