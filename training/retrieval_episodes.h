// Training sequences for the embedded tiny model, built from the project's own generators.
//
// A sequence packs several documents, each "<s> prompt answer </s>", where the prompt and its
// answers are a real sample of one of the registered synthetic datasets (passkey, the RULER
// needle tasks, variable tracking) at some context length, so the model is trained on exactly
// the formats the suites evaluate. Generated documents add what the notes in
// ../shared/specs/tiny-model-notes.md call for: "repeat" (a random token span shown 2-4 times)
// trains copying, the induction circuit retrieval is built on; "repeat_digits" copies digit
// strings rich in repeated adjacent digits across noise (a model matching on the previous token
// alone drops one of two equal digits); "mqar" packs many needles and asks for every one of
// them (multi-query associative recall: a supervised lookup per needle, not one per document).
// Attention never crosses documents (`doc` ids), and the loss weights the answers (and
// repeats) fully, the rest lightly.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvb {

struct WordLists;

struct EpisodeSources {
  std::string wordlist_dir;   // nounlist.txt, adjectivelist.txt, verblist.txt
  std::string haystack_file;  // PaulGrahamEssays.json
};

// What one training phase draws: documents of `min_doc`..`max_doc` tokens packed into
// sequences of `length` tokens; `task_weights` maps a dataset name (or "repeat") to its share.
struct EpisodeMix {
  int64_t length = 256;
  int64_t min_doc = 64, max_doc = 256;
  std::map<std::string, double> task_weights;
  double context_loss_weight = 0.1;  // weight of prompt tokens (answers weigh 1)
  int64_t repeat_vocab = 0;  // repeat spans draw from the first n ordinary tokens (0: all)
};

// A batch: inputs and next-token targets [B, L], loss weights [B, L] (float) and each
// position's document [B, L].
struct EpisodeBatch {
  at::Tensor inputs, targets, weights, doc;
  std::vector<std::vector<std::string>> kinds;  // per row, the documents' task names in order
  at::Tensor answer_kind;  // [B, L] index into `kind_names` of an answer position, -1 elsewhere
  std::vector<std::string> kind_names;
};

class EpisodeSampler {
 public:
  EpisodeSampler(const Tokenizer& tokenizer, EpisodeSources sources, uint64_t seed);
  EpisodeBatch batch(const EpisodeMix& mix, int64_t rows);
  // A prompt + answer document of `task` close to `tokens` long (for tests and the corpus).
  struct Document {
    std::vector<int> ids;  // <s> ... </s>
    std::vector<std::pair<int64_t, int64_t>> answers;  // [begin, end) token ranges supervised fully
    bool is_answer(int64_t j) const;
  };
  Document document(const std::string& task, int64_t tokens, int64_t repeat_vocab = 0);

 private:
  Document dataset_document(const std::string& task, int64_t tokens);
  Document repeat_document(int64_t tokens, int64_t vocab = 0);
  Document repeat_digits_document(int64_t tokens);
  Document mqar_document(int64_t tokens);
  Document mqar_document(int64_t tokens, int64_t pairs);
  // Text to tokens, with every maximal run of digit tokens from token `from` on as an answer
  // (values are the only digits there); `values` checks each run's text.
  Document with_digit_answers(const std::string& text, int64_t from_char,
                              const std::vector<std::string>& values);
  std::string draw_task(const EpisodeMix& mix);
  int64_t draw_length(const EpisodeMix& mix, int64_t room);

  const Tokenizer& tokenizer_;
  EpisodeSources sources_;
  std::mt19937_64 rng_;
  // Unused documents per (task, length bucket): datasets are asked for several at once.
  std::map<std::pair<std::string, int64_t>, std::vector<Document>> pool_;
  std::vector<int> plain_tokens_;  // ids a repeat span is drawn from
  std::vector<bool> digit_token_;  // per id: decodes to one digit (with or without a space)
  std::map<std::string, int64_t> too_short_;  // per task, the longest length that failed
  std::shared_ptr<WordLists> words_;          // mqar's keys
};

// A training task drawn from a registered dataset: its name in a mix, the dataset, the params
// it adds (e.g. passkey's several doors).
struct DatasetTask {
  std::string name, dataset;
  json params;
};
const std::vector<DatasetTask>& dataset_tasks();
// The params of `task`'s dataset: `samples` samples of `context_length` tokens, the sources
// where the dataset reads word lists and essays, and the task's own params.
json dataset_task_params(const DatasetTask& task, const EpisodeSources& sources,
                         int64_t context_length, int samples);

// Every name a mix may give: the generated documents, then the dataset tasks.
const std::vector<std::string>& episode_kinds();

}  // namespace kvb
