#include "training/retrieval_episodes.h"

#include <algorithm>

#include "datasets/synthetic/random.h"
#include "engine/common/error.h"

namespace kvb {
namespace {

constexpr int64_t kBucket = 32;          // documents are generated at multiples of this length
constexpr int64_t kAnswerRoom = 48;      // tokens kept free for the answer and </s>
constexpr int kSamplesPerRequest = 16;   // documents generated per dataset call

std::string answer_text(const std::string& task, const std::vector<std::string>& answers) {
  std::string out;
  const std::string separator = task == "vt" ? " " : ", ";
  for (size_t i = 0; i < answers.size(); ++i) out += (i ? separator : "") + answers[i];
  return out;
}

}  // namespace

const std::vector<std::string>& episode_tasks() {
  static const std::vector<std::string> tasks = {
      "passkey",         "niah_single_1",   "niah_single_2",   "niah_multikey_1",
      "niah_multikey_2", "niah_multivalue", "niah_multiquery", "vt"};
  return tasks;
}

EpisodeSampler::EpisodeSampler(const Tokenizer& tokenizer, EpisodeSources sources, uint64_t seed)
    : tokenizer_(tokenizer), sources_(std::move(sources)), rng_(seed) {
  // Every ordinary token: not <unk>/<s>/</s>, not a byte-fallback token.
  for (int id = 259; id < tokenizer.vocab_size(); ++id) plain_tokens_.push_back(id);
}

json EpisodeSampler::params_for(const std::string& task, int64_t tokens, int samples) const {
  json p = {{"context_length", tokens}, {"samples", samples}};
  if (task != "passkey") {
    p["wordlist_dir"] = sources_.wordlist_dir;
    p["haystack_file"] = sources_.haystack_file;
  }
  return p;
}

EpisodeSampler::Document EpisodeSampler::document(const std::string& task, int64_t tokens,
                                                  int64_t repeat_vocab) {
  if (task == "repeat") return repeat_document(tokens, repeat_vocab);
  const int64_t bucket = std::max<int64_t>(kBucket, tokens / kBucket * kBucket);
  std::vector<Document>& pool = pool_[{task, bucket}];
  if (pool.empty()) {
    const DatasetInfo& info = dataset_registry().get(task, "training task");
    auto dataset = info.create(info.normalise_params(params_for(task, bucket, kSamplesPerRequest),
                                                     "training task " + task));
    for (const Sample& s : dataset->samples(tokenizer_, rng_())) {
      const std::vector<int> prompt = tokenizer_.encode(s.prompt, /*add_bos=*/true);
      const bool spaced = !s.prompt.empty() && s.prompt.back() == ' ';
      std::vector<int> ids =
          tokenizer_.encode(s.prompt + (spaced ? "" : " ") + answer_text(task, s.answers), true);
      // The answer must continue the prompt's own tokens, as it does at evaluation.
      if (ids.size() <= prompt.size() || !std::equal(prompt.begin(), prompt.end(), ids.begin()))
        throw std::logic_error("training task " + task + ": the answer re-tokenises the prompt");
      ids.push_back(tokenizer_.eos_ids().at(0));
      pool.push_back({std::move(ids), int64_t(prompt.size())});
    }
    std::reverse(pool.begin(), pool.end());  // used in generation order
  }
  Document d = std::move(pool.back());
  pool.pop_back();
  return d;
}

EpisodeSampler::Document EpisodeSampler::repeat_document(int64_t tokens, int64_t vocab) {
  const size_t alphabet = vocab > 0 ? std::min(size_t(vocab), plain_tokens_.size()) : plain_tokens_.size();
  // <s>, at least two copies of the span, </s>: needs tokens >= 18.
  const int64_t span = uniform_int(rng_, 4, std::clamp<int64_t>((tokens - 2) / 2, 4, 48));
  const int64_t copies = std::clamp<int64_t>((tokens - 2) / span, 2, 4);
  std::vector<int> piece;
  for (int64_t i = 0; i < span; ++i)
    piece.push_back(plain_tokens_[uniform_below(rng_, alphabet)]);
  Document d;
  d.ids.push_back(tokenizer_.bos_id());
  for (int64_t c = 0; c < copies; ++c) d.ids.insert(d.ids.end(), piece.begin(), piece.end());
  d.ids.push_back(tokenizer_.eos_ids().at(0));
  d.answer_begin = 1 + span;  // the copies after the first are predictable
  return d;
}

std::string EpisodeSampler::draw_task(const EpisodeMix& mix) {
  double total = 0;
  for (const auto& [task, w] : mix.task_weights) total += w;
  double x = double(rng_() >> 11) * 0x1.0p-53 * total;
  for (const auto& [task, w] : mix.task_weights) {
    if (x < w) return task;
    x -= w;
  }
  return mix.task_weights.rbegin()->first;
}

int64_t EpisodeSampler::draw_length(const EpisodeMix& mix, int64_t room) {
  const int64_t hi = std::min(mix.max_doc, room - kAnswerRoom);
  return uniform_int(rng_, std::min(mix.min_doc, hi), hi);
}

EpisodeBatch EpisodeSampler::batch(const EpisodeMix& mix, int64_t rows) {
  const int64_t L = mix.length;
  EpisodeBatch b;
  b.kind_names = {"repeat"};
  b.kind_names.insert(b.kind_names.end(), episode_tasks().begin(), episode_tasks().end());
  std::vector<int64_t> ids(size_t(rows * (L + 1)), tokenizer_.eos_ids().at(0));
  std::vector<float> weights(ids.size(), 0.0f);
  std::vector<int64_t> doc(ids.size(), 0), kind(ids.size(), -1);
  for (int64_t r = 0; r < rows; ++r) {
    b.kinds.emplace_back();
    int64_t at = 0, doc_id = 0;
    for (int attempt = 0; L + 1 - at >= 18; ++attempt) {
      const int64_t room = L + 1 - at;
      // After a few failed draws (templates longer than the room), fill the room with copying.
      const bool task_fits = room >= mix.min_doc + kAnswerRoom && attempt < 8;
      const std::string task = task_fits ? draw_task(mix) : "repeat";
      const int64_t length =
          task != "repeat" ? draw_length(mix, room)
          : task_fits ? std::min(room, uniform_int(rng_, std::max<int64_t>(18, mix.min_doc), std::max<int64_t>(18, mix.max_doc)))
                      : room;
      if (length <= too_short_[task]) continue;
      Document d;
      try {
        d = document(task, length, mix.repeat_vocab);
      } catch (const InputError&) {  // the task's template alone is longer than `length`
        too_short_[task] = std::max(too_short_[task], length);
        continue;
      }
      if (int64_t(d.ids.size()) > room) continue;  // an unusually long answer: draw again
      attempt = -1;
      const int64_t k = std::find(b.kind_names.begin(), b.kind_names.end(), task) - b.kind_names.begin();
      for (size_t j = 0; j < d.ids.size(); ++j) {
        const size_t pos = size_t(r * (L + 1) + at + int64_t(j));
        ids[pos] = d.ids[j];
        doc[pos] = doc_id;
        const bool answer = int64_t(j) >= d.answer_begin;
        weights[pos] = j == 0 ? 0.0f : answer ? 1.0f : float(mix.context_loss_weight);
        if (answer) kind[pos] = k;
      }
      b.kinds.back().push_back(task);
      at += int64_t(d.ids.size());
      ++doc_id;
    }
    for (int64_t pos = at; pos <= L; ++pos) doc[size_t(r * (L + 1) + pos)] = doc_id;  // padding
  }
  at::Tensor all = at::tensor(ids, at::kLong).view({rows, L + 1});
  b.inputs = all.narrow(1, 0, L).contiguous();
  b.targets = all.narrow(1, 1, L).contiguous();
  b.weights = at::tensor(weights, at::kFloat).view({rows, L + 1}).narrow(1, 1, L).contiguous();
  b.doc = at::tensor(doc, at::kLong).view({rows, L + 1}).narrow(1, 0, L).contiguous();
  b.answer_kind = at::tensor(kind, at::kLong).view({rows, L + 1}).narrow(1, 1, L).contiguous();
  return b;
}

}  // namespace kvb
