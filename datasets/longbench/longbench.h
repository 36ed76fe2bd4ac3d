// LongBench v1 (THUDM/LongBench): the records of `<data_dir>/<dataset>.jsonl`, the prompt
// templates and generation lengths of longbench_config.json, LongBench's middle truncation.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace kvb {

struct LongBenchRecord {
  std::string id, input, context;
  std::vector<std::string> answers;
  std::vector<std::string> all_classes;  // empty unless classification
  std::optional<double> length;  // the record's `length` (words; characters in Chinese)
};

// Reads up to `limit` records (0 = all) of a LongBench .jsonl file. A missing file, a line
// that is not a JSON object, or a record without a list of `answers` (or without string
// `input`/`context`) is an InputError naming the file and the line.
std::vector<LongBenchRecord> read_longbench_jsonl(const std::string& path, int limit = 0);
// One line of such a file (line `number`, for a record without `_id`); errors name `where`.
LongBenchRecord parse_longbench_line(const std::string& line, const std::string& where,
                                     int number);

// `answers` and `all_classes` values as Python's str() gives them: strings as they are,
// integers in decimal (passage_count's answers). `where` prefixes errors.
std::vector<std::string> longbench_strings(const json& value, const std::string& where);

// One dataset's entry of longbench_config.json.
struct LongBenchTask {
  std::string prompt;  // with {context} and {input}
  int max_new_tokens = 32;
  bool chat_template = true;  // false for trec, triviaqa, samsum, lsht, lcc, repobench-p
  bool stop_at_newline = false;  // samsum
};
const LongBenchTask& longbench_task(const std::string& dataset);

// The template with {context} and {input} substituted (each placeholder once, like
// str.format; the substituted text is not scanned again).
std::string longbench_format(const std::string& prompt_template, const std::string& context,
                             const std::string& input);

// The formatted prompt's text after its context, `input` substituted: the question and the
// instructions read after a shared context; "" when the template puts {input} before {context}.
std::string longbench_question_tail(const std::string& prompt_template, const std::string& input);

// LongBench's truncation: when the prompt (BOS included) is longer than max_length tokens,
// the decoded first max_length/2 tokens plus the decoded last max_length/2 tokens.
std::string longbench_truncate(const Tokenizer& tokenizer, const std::string& prompt,
                               int64_t max_length);

// Whether pred_script `name` reads each prompt's end through decode steps (quest, clusterkv):
// its own split of the question, which context_sharing per_sample would split otherwise.
bool longbench_decodes_question_end(const std::string& name);

}  // namespace kvb
