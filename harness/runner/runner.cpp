#include "harness/runner/runner.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "datasets/dataset.h"
#include "engine/common/error.h"
#include "engine/device.h"
#include "engine/model/checkpoint_fingerprint.h"
#include "engine/sdpa_reference.h"
#include "engine/session.h"
#include "harness/runner/progress.h"
#include "harness/runner/stop_signals.h"
#include "methods/method.h"
#ifndef KVBENCH_GIT_COMMIT  // the fuzz build defines its own
#include "kvbench_git_commit.h"  // generated at build time (cmake/git_commit.cmake)
#endif

namespace kvb {
namespace {

using Clock = std::chrono::steady_clock;

// Per-cell aggregates of the sessions' counters.
struct CellTotals {
  std::vector<double> attended_sum;  // per layer * Hkv
  std::vector<int64_t> attended_min, attended_max;
  int64_t decode_steps = 0;
  double prefill_s = 0, prefill_method_s = 0, method_setup_s = 0, decode_s = 0, decode_host_s = 0,
         select_s = 0, select_host_s = 0, attention_host_s = 0, graph_capture_s = 0;
  int64_t decode_syncs = 0, graph_steps = 0;
  int prefill_attention_kernel = -1;  // the last session's (the same shapes in every sample)
  bool syncs_counted = false;
  std::vector<double> attention_s;  // per layer
  double kv_bytes = 0, kv_used_bytes = 0, fragmentation = 0;
  int64_t prompt_tokens = 0;
  std::vector<double> recall_sum, output_error_sum;  // per layer
  std::vector<int64_t> fidelity_count;

  void add(const Session& s) {
    const FidelityCounts& f = s.fidelity();
    if (recall_sum.empty()) {
      recall_sum.assign(f.count.size(), 0.0);
      output_error_sum.assign(f.count.size(), 0.0);
      fidelity_count.assign(f.count.size(), 0);
    }
    for (size_t l = 0; l < f.count.size(); ++l) {
      recall_sum[l] += f.recall_sum[l];
      output_error_sum[l] += f.output_error_sum[l];
      fidelity_count[l] += f.count[l];
    }
    const AttendedCounts& a = s.attended();
    if (attended_sum.empty()) {
      attended_sum.assign(a.sum.size(), 0.0);
      attended_min.assign(a.sum.size(), INT64_MAX);
      attended_max.assign(a.sum.size(), 0);
    }
    for (size_t i = 0; i < a.sum.size() && a.steps > 0; ++i) {
      attended_sum[i] += a.sum[i];
      attended_min[i] = std::min(attended_min[i], a.min[i]);
      attended_max[i] = std::max(attended_max[i], a.max[i]);
    }
    decode_steps += a.steps;
    const SessionTimings& t = s.timings();
    prefill_s += t.prefill_s;
    prefill_method_s += t.prefill_method_s;
    method_setup_s += t.method_setup_s;
    decode_s += t.decode_s;
    decode_host_s += t.decode_host_s;
    decode_syncs += t.decode_syncs;
    graph_steps += t.graph_steps;
    graph_capture_s += t.graph_capture_s;
    prefill_attention_kernel = t.prefill_attention_kernel;
    syncs_counted = syncs_counted || t.syncs_counted;
    select_s += t.select_s;
    select_host_s += t.select_host_s;
    attention_host_s += t.attention_host_s;
    attention_s.resize(t.attention_s.size(), 0.0);
    for (size_t l = 0; l < t.attention_s.size(); ++l) attention_s[l] += t.attention_s[l];
    kv_bytes += double(s.kv_allocated_bytes());
    double frag = 0;
    for (const LayerKV& layer : s.kv()) {
      frag += layer.fragmentation();
      kv_used_bytes += double(layer.used_bytes());
    }
    fragmentation += s.kv().empty() ? 0 : frag / double(s.kv().size());
  }

  void emit(std::vector<MetricRow>& out, int samples, int num_layers, int num_kv_heads) const {
    auto metric = [&](const std::string& name, double value, const std::string& unit) {
      out.push_back(
          MetricRow{.sample_id = std::nullopt, .name = name, .value = value, .unit = unit});
    };
    metric("prompt_tokens", double(prompt_tokens) / samples, "tokens");
    metric("kv_resident_bytes", kv_bytes / samples, "bytes");
    // The blocks the heads hold: capacity's growth by a quarter (kv_resident_bytes) can put two
    // methods holding the same entries a fifth apart, depending on whether it happened.
    metric("kv_used_bytes", kv_used_bytes / samples, "bytes");
    metric("kv_fragmentation", fragmentation / samples, "ratio");
    metric("prefill_s", prefill_s / samples, "s");
    metric("prefill_method_share", prefill_s > 0 ? prefill_method_s / prefill_s : 0, "ratio");
    metric("method_setup_s", method_setup_s / samples, "s");
    if (prefill_attention_kernel >= 0)  // ATen's fused kernel ran it (a GPU, bf16/f16)
      metric("prefill_attention_kernel", prefill_attention_kernel, "SDPBackend");
    if (decode_steps == 0) return;
    metric("decode_ms_per_token", 1e3 * decode_s / decode_steps, "ms");
    metric("decode_host_ms_per_token", 1e3 * decode_host_s / decode_steps, "ms");
    if (syncs_counted)
      metric("device_syncs_per_token", double(decode_syncs) / double(decode_steps), "syncs");
    if (graph_steps > 0) {
      metric("cuda_graph_steps_share", double(graph_steps) / double(decode_steps), "ratio");
      metric("cuda_graph_capture_s", graph_capture_s / samples, "s");
    }
    metric("select_ms_per_token", 1e3 * select_s / decode_steps, "ms");
    double attention_total = 0;
    for (size_t l = 0; l < attention_s.size(); ++l) {
      attention_total += attention_s[l];
      metric("attention_ms_per_token.layer" + std::to_string(l), 1e3 * attention_s[l] / decode_steps, "ms");
    }
    metric("attention_ms_per_token", 1e3 * attention_total / decode_steps, "ms");
    metric("select_host_ms_per_token", 1e3 * select_host_s / decode_steps, "ms");
    metric("attention_host_ms_per_token", 1e3 * attention_host_s / decode_steps, "ms");
    // Measured budget: attended entries per KV head per layer per decode step.
    double total = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (int l = 0; l < num_layers; ++l) {
      double layer_sum = 0;
      for (int h = 0; h < num_kv_heads; ++h) {
        const size_t i = size_t(l * num_kv_heads + h);
        layer_sum += attended_sum[i];
        lo = std::min(lo, attended_min[i]);
        hi = std::max(hi, attended_max[i]);
      }
      total += layer_sum;
      metric("attended_mean.layer" + std::to_string(l),
             layer_sum / num_kv_heads / double(decode_steps), "entries");
    }
    metric("attended_mean", total / double(num_layers * num_kv_heads) / double(decode_steps),
           "entries");
    metric("attended_min", double(lo), "entries");
    metric("attended_max", double(hi), "entries");
    emit_fidelity(metric);
  }

  template <typename Metric>
  void emit_fidelity(Metric& metric) const {
    double recall = 0, error = 0;
    int64_t count = 0;
    for (size_t l = 0; l < fidelity_count.size(); ++l) {
      if (fidelity_count[l] == 0) continue;
      metric("recall.layer" + std::to_string(l), recall_sum[l] / fidelity_count[l], "ratio");
      metric("attention_output_error.layer" + std::to_string(l),
             output_error_sum[l] / fidelity_count[l], "ratio");
      recall += recall_sum[l];
      error += output_error_sum[l];
      count += fidelity_count[l];
    }
    if (count == 0) return;
    metric("recall", recall / count, "ratio");
    metric("attention_output_error", error / count, "ratio");
  }
};

// The id of tokenizer_config.json's eos_token (transformers' tokenizer.eos_token_id).
int eos_token_id(const LlamaModel& model, const Sample& sample) {
  const std::optional<std::string> text =
      special_token_text(model.tokenizer_config.value("eos_token", nlohmann::json()));
  if (!text)
    throw InputError("sample " + sample.id + ": its reference stops at the tokenizer's "
                     "eos_token, which " + model.source + "/tokenizer_config.json does not set "
                     "(nor a special_tokens_map.json read beside it)");
  const std::vector<int> ids = model.tokenizer->encode(*text, /*add_special=*/false);
  if (ids.size() != 1)
    throw InputError(model.source + "/tokenizer_config.json (or special_tokens_map.json): "
                     "eos_token: not one token");
  return ids[0];
}

}  // namespace

bool stops_at_eos_token_alone(const LlamaModel& model, const Sample& sample) {
  if (!sample.stops_at_eos_token_only) return false;
  const std::vector<std::string>& every = sample.every_eos_id_families;
  return every.empty() || std::find(every.begin(), every.end(),
                                    detect_chat_template(model.tokenizer_config)) == every.end();
}

std::vector<int> stop_ids(const LlamaModel& model, const Sample& sample) {
  std::vector<int> ids;
  if (stops_at_eos_token_alone(model, sample)) {
    ids.push_back(eos_token_id(model, sample));
  } else {
    ids = model.tokenizer->eos_ids();
    for (int id : model.config.eos_token_ids) ids.push_back(id);
  }
  // LongBench's convention for extra stop texts: the last token of the text's encoding.
  for (const std::string& text : sample.stop_texts) {
    std::vector<int> encoded = model.tokenizer->encode(text, /*add_special=*/false);
    if (!encoded.empty()) ids.push_back(encoded.back());
  }
  // Each id once, in the order found: the tokenizer's EOS and config.json's are often the same.
  std::vector<int> distinct;
  for (int id : ids)
    if (std::find(distinct.begin(), distinct.end(), id) == distinct.end()) distinct.push_back(id);
  return distinct;
}

ChatTemplateChoice chat_template_choice(const LlamaModel& model, const Sample& sample) {
  if (sample.chat_template != "auto") return {.name = sample.chat_template};
  const std::string family = detect_chat_template(model.tokenizer_config);
  if (family == "none") return {.name = "none", .automatic = true, .family = family};
  const auto instead = sample.auto_chat_as.find(family);
  if (instead == sample.auto_chat_as.end())
    return {.own = true, .automatic = true, .family = family};
  if (instead->second == kOwnTemplateAsText)
    return {.own = true, .as_text = true, .automatic = true, .family = family};
  return {.name = instead->second, .automatic = true, .family = family};
}

std::string prompt_text(const LlamaModel& model, const Sample& sample) {
  const ChatTemplateChoice choice = chat_template_choice(model, sample);
  if (!choice.applied()) return sample.prompt;
  if (choice.as_text)
    return render_model_chat_template(model.tokenizer_config, sample.prompt,
                                      model.chat_template_file);
  if (choice.own)
    return apply_model_chat_template(model.tokenizer_config, *model.tokenizer, sample.prompt,
                                     model.chat_template_file);
  check_chat_template_tokens(choice.name, *model.tokenizer, "sample " + sample.id);
  return apply_chat_template(choice.name, sample.prompt);
}

namespace {

// Where `sample.prompt` begins in `text` (prompt_text's): a chat template wraps it unchanged,
// or trimmed at its ends (llama3_1).
size_t prompt_start(const std::string& text, const Sample& sample) {
  const size_t at = wrapped_prompt_start(text, sample.prompt);
  if (at == std::string::npos)
    throw InputError("sample " + sample.id + ": its chat template changes the prompt's text, so "
                     "its parts cannot be told apart");
  return at;
}

// A prompt text's start (prompt_text's, from its first byte) encoded: with the tokenizer's
// special tokens, or under the model's own template as transformers' apply_chat_template
// (tokenize=True) encodes its rendered text, the template's BOS (which prompt_text left to the
// tokenizer) written before it and nothing added: a Metaspace "first" tokenizer then gives the
// text's start no "▁" and add_eos_token appends no EOS, as there.
std::vector<int> encode_start(const LlamaModel& model, const Sample& sample,
                              const std::string& text) {
  const ChatTemplateChoice choice = chat_template_choice(model, sample);
  if (!choice.own || choice.as_text) return model.tokenizer->encode(text, /*add_special=*/true);
  const std::string bos = model.tokenizer->decode(model.tokenizer->special_prefix(), false);
  return model.tokenizer->encode(bos + text, /*add_special=*/false);
}

// The prompt's pieces (Sample::encoded_apart_at) encoded apart: the first with BOS (and the
// template's prefix, encode_start), the rest without (the last with the template's suffix).
std::vector<std::vector<int>> encoded_pieces(const LlamaModel& model, const Sample& sample) {
  const std::string text = prompt_text(model, sample);
  const size_t at = prompt_start(text, sample);
  std::vector<size_t> cuts = {0};
  for (size_t offset : sample.encoded_apart_at) cuts.push_back(at + offset);
  cuts.push_back(text.size());
  std::vector<std::vector<int>> pieces;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::string piece = text.substr(cuts[i], cuts[i + 1] - cuts[i]);
    pieces.push_back(i == 0 ? encode_start(model, sample, piece)
                            : model.tokenizer->encode(piece, /*add_special=*/false));
  }
  return pieces;
}

std::vector<int> joined(std::vector<std::vector<int>>::const_iterator begin,
                        std::vector<std::vector<int>>::const_iterator end) {
  std::vector<int> ids;
  for (auto piece = begin; piece != end; ++piece) ids.insert(ids.end(), piece->begin(), piece->end());
  return ids;
}

}  // namespace

std::vector<int> encode_prompt(const LlamaModel& model, const Sample& sample) {
  if (!sample.prompt_ids.empty()) {
    if (sample.chat_template != "none")  // a template wraps text; these are tokens
      throw std::logic_error("sample " + sample.id + ": gives its tokens and a chat template");
    std::vector<int> ids = model.tokenizer->special_prefix();
    ids.insert(ids.end(), sample.prompt_ids.begin(), sample.prompt_ids.end());
    return ids;
  }
  if (!sample.encoded_apart_at.empty()) {
    const std::vector<std::vector<int>> pieces = encoded_pieces(model, sample);
    return joined(pieces.begin(), pieces.end());
  }
  return encode_start(model, sample, prompt_text(model, sample));
}

SplitPrompt split_prompt(const LlamaModel& model, const Sample& sample) {
  if (!sample.prompt_ids.empty())
    throw InputError("sample " + sample.id + ": its dataset gives its tokens, not text that "
                     "context_sharing per_sample could split");
  if (sample.question_offset == std::string::npos || sample.question_offset > sample.prompt.size())
    throw InputError("sample " + sample.id + ": its dataset does not mark where its question "
                     "begins, which context_sharing per_sample needs");
  if (!sample.encoded_apart_at.empty()) {  // the pieces before the question's: the context
    const auto& apart = sample.encoded_apart_at;
    const auto question = std::find(apart.begin(), apart.end(), sample.question_offset);
    if (question == apart.end())
      throw std::logic_error("sample " + sample.id + ": its question begins inside a piece");
    const std::vector<std::vector<int>> pieces = encoded_pieces(model, sample);
    const auto split = pieces.begin() + (question - apart.begin()) + 1;
    return SplitPrompt{.context = joined(pieces.begin(), split),
                       .question = joined(split, pieces.end())};
  }
  // The prompt is one text here (no tokens given, no pieces): encode_prompt's encoding of it.
  const std::string text = prompt_text(model, sample);
  const std::vector<int> prompt = encode_start(model, sample, text);
  const std::vector<int> context = encode_start(
      model, sample, text.substr(0, prompt_start(text, sample) + sample.question_offset));
  size_t shared = 0;
  while (shared < context.size() && shared < prompt.size() && context[shared] == prompt[shared])
    ++shared;
  return SplitPrompt{.context = std::vector<int>(prompt.begin(), prompt.begin() + shared),
                     .question = std::vector<int>(prompt.begin() + shared, prompt.end())};
}

SplitPrompt split_decoded_end(const LlamaModel& model, const Sample& sample) {
  const std::string text = prompt_text(model, sample);
  // Python's len and slices count code points: step back over UTF-8 continuation bytes.
  size_t at = text.size();
  for (size_t chars = 0; at > 0 && chars < sample.decoded_chars; ++chars)
    do --at; while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80);
  const size_t anchor = sample.decoded_anchor.empty() ? std::string::npos
                                                      : text.rfind(sample.decoded_anchor);
  if (anchor != std::string::npos) at = std::max(at, anchor);
  // The references encode the end as a sequence of its own and drop its first token: BOS
  // where that is the prefix (GLM-4's "[gMASK]<sop>" keeps its <sop>; a tokenizer adding
  // nothing loses the end's first token, as there).
  std::vector<int> end = model.tokenizer->encode(text.substr(at), /*add_special=*/true);
  if (!end.empty()) end.erase(end.begin());
  return SplitPrompt{
      .context = encode_start(model, sample, text.substr(0, at)),
      .question = std::move(end)};
}

namespace {

// What one sample produced, beside the session's counters.
struct SampleOutcome {
  std::string prediction;
  double score = 0;
  std::vector<MetricRow> metrics;  // per-sample metrics
};

// Generates the answer after `logits` (the last prompt token's) and scores it as `sample`'s.
// With `keep_in_cache` the whole answer is left in the cache (its last token fed too), for a
// next turn to follow it.
SampleOutcome answer(const Dataset& dataset, const Sample& sample, const LlamaModel& model,
                     Session& session, const at::Tensor& logits, int max_new,
                     bool keep_in_cache) {
  std::vector<int> tokens =
      session.generate_from(logits, max_new, stop_ids(model, sample), sample.min_new_tokens,
                            sample.unchecked_new_tokens);
  // generate_from feeds every token but the last when it stops at max_new.
  if (keep_in_cache && !tokens.empty() && int(tokens.size()) == max_new)
    session.decode(tokens.back());
  SampleOutcome out;
  out.prediction = model.tokenizer->decode(tokens);
  out.score = dataset.score(sample, out.prediction);
  return out;
}

// context_sharing "per_sample": the context alone is prefilled (so the method compresses it
// without the question), then the question's tokens are read one by one through the decode
// path, as a question appended to a compressed cache, and the answer generated after them.
SampleOutcome answer_after_context(const Dataset& dataset, const Sample& sample,
                                   const LlamaModel& model, Session& session,
                                   const SplitPrompt& split, int max_new, bool keep_in_cache) {
  at::Tensor logits = session.prefill(split.context);
  for (int token : split.question) logits = session.decode(token);
  SampleOutcome out = answer(dataset, sample, model, session, logits, max_new, keep_in_cache);
  auto metric = [&](const char* name, double value) {
    out.metrics.push_back(
        MetricRow{.sample_id = sample.id, .name = name, .value = value, .unit = "tokens"});
  };
  metric("context_tokens", double(split.context.size()));
  metric("question_tokens", double(split.question.size()));
  return out;
}

// A sample's follow-up turns (Sample::follow_ups) in its session, after its first answer:
// each turn's text read through the decode path, its answer generated and scored. Returns each
// turn as a sample "<id>.turn<k>" (k from 2) with its outcome.
std::vector<std::pair<Sample, SampleOutcome>> answer_follow_ups(const Dataset& dataset,
                                                                const Sample& sample,
                                                                const LlamaModel& model,
                                                                Session& session,
                                                                int max_new_override) {
  std::vector<std::pair<Sample, SampleOutcome>> out;
  for (size_t k = 0; k < sample.follow_ups.size(); ++k) {
    const Sample::Turn& turn = sample.follow_ups[k];
    Sample asked = sample;
    asked.id = sample.id + ".turn" + std::to_string(k + 2);
    asked.answers = turn.answers;
    asked.follow_ups.clear();
    at::Tensor logits;
    for (int token : model.tokenizer->encode(turn.text, /*add_special=*/false))
      logits = session.decode(token);
    if (!logits.defined()) throw std::logic_error(asked.id + ": an empty turn");
    const int max_new = max_new_override > 0 ? max_new_override : turn.max_new_tokens;
    out.emplace_back(asked, answer(dataset, asked, model, session, logits, max_new,
                                   k + 1 < sample.follow_ups.size()));
  }
  return out;
}

// Feeds the reference continuation token by token (so decode-time compression acts), scoring
// its negative log-likelihood, and compares each step's argmax with Full's on the same input.
SampleOutcome teacher_force(const Sample& sample, const LlamaModel& model, Session& session,
                            const std::vector<int>& prompt) {
  const std::vector<int> continuation =
      !sample.continuation_ids.empty()
          ? sample.continuation_ids
          : model.tokenizer->encode(sample.reference_continuation, /*add_special=*/false);
  if (continuation.empty()) throw InputError("sample " + sample.id + ": empty continuation");
  Method uncompressed;  // the hooks' defaults: every entry kept and attended (no method named)
  Session reference(model, uncompressed, SessionOptions{.model_view = session.model_view()});
  at::Tensor logits = session.prefill(prompt), full_logits = reference.prefill(prompt);
  double nll = 0;
  int agree = 0;
  for (size_t i = 0; i < continuation.size(); ++i) {
    const int token = continuation[i];
    nll -= at::log_softmax(logits.to(at::kDouble), 0)[token].item<double>();
    agree += argmax_token(logits) == argmax_token(full_logits);
    if (i + 1 == continuation.size()) break;
    logits = session.decode(token);
    full_logits = reference.decode(token);
  }
  const double n = double(continuation.size());
  SampleOutcome out;
  out.score = std::exp(nll / n);  // perplexity
  auto metric = [&](const char* name, double value, const char* unit) {
    out.metrics.push_back(
        MetricRow{.sample_id = sample.id, .name = name, .value = value, .unit = unit});
  };
  metric("nll", nll / n, "nats/token");
  metric("agreement_with_full", 100.0 * agree / n, "%");
  metric("continuation_tokens", n, "tokens");
  return out;
}

// The questions of one context must read the same context tokens (the dataset's promise,
// checked): `seen` holds the first question's of each context_id.
void check_same_context(const Sample& sample, const SplitPrompt& split,
                        std::map<std::string, std::vector<int>>& seen) {
  if (sample.context_id.empty()) return;
  const auto [it, first] = seen.emplace(sample.context_id, split.context);
  if (!first && it->second != split.context)
    throw std::logic_error("sample " + sample.id + ": its context differs from the other "
                           "questions' of context " + sample.context_id);
}

// Per-sample metric `name` averaged with each sample weighted by its continuation_tokens: a
// teacher-forced cell's value over all its scored tokens, whatever its windows' lengths.
double token_weighted_mean(const std::vector<MetricRow>& rows, const std::string& name) {
  std::map<std::string, double> tokens;
  for (const MetricRow& r : rows)
    if (r.sample_id && r.name == "continuation_tokens") tokens[*r.sample_id] = r.value;
  double sum = 0, weight = 0;
  for (const MetricRow& r : rows)
    if (r.sample_id && r.name == name) {
      const double w = tokens.at(*r.sample_id);
      sum += r.value * w;
      weight += w;
    }
  return weight > 0 ? sum / weight : 0.0;
}

// The reference row of a latency cell: every layer's dense decode attention through ATen's
// scaled_dot_product_attention at the cell's mean decode context, timed here, beside the
// cell's own attention_ms_per_token (issue 21). Where this LibTorch has no GQA SDPA (Debian's
// 1.13), no metric.
void add_sdpa_reference(std::vector<MetricRow>& out, const LlamaModel& model,
                        const CellTotals& totals, int samples) {
  if (totals.decode_steps == 0 || !sdpa_reference_available()) return;
  const ModelConfig& c = model.config;
  const double steps = double(totals.decode_steps) / samples;
  const int64_t context = std::llround(double(totals.prompt_tokens) / samples + steps / 2);
  const std::optional<double> seconds =
      sdpa_decode_seconds(model.device(), model.dtype(), c.num_attention_heads,
                          c.num_key_value_heads, c.head_dim, std::max<int64_t>(1, context));
  if (!seconds) return;
  out.push_back(MetricRow{.sample_id = std::nullopt, .name = "sdpa_attention_ms_per_token",
                          .value = 1e3 * *seconds * c.num_hidden_layers, .unit = "ms"});
  out.push_back(MetricRow{.sample_id = std::nullopt, .name = "sdpa_context_tokens",
                          .value = double(context), .unit = "tokens"});
}

}  // namespace

double pooled_counter(const std::map<std::string, std::pair<double, int>>& sums,
                      const std::string& name) {
  static const std::map<std::string, std::pair<std::string, std::string>> rates = {
      {"cache_hit_rate", {"cache_hits", "cache_lookups"}},
      {"cluster_cache_hit_rate", {"cluster_cache_hits", "cluster_cache_lookups"}},
      {"fetched_bytes_per_step", {"fetched_bytes", "fetch_steps"}}};
  if (const auto rate = rates.find(name); rate != rates.end()) {
    const auto num = sums.find(rate->second.first), den = sums.find(rate->second.second);
    if (num != sums.end() && den != sums.end() && den->second.first > 0)
      return num->second.first / den->second.first;
  }
  const auto& [sum, samples] = sums.at(name);
  return sum / double(samples);
}

CellResult run_cell(const Cell& cell, const LlamaModel& model,
                    const std::function<void(int, int)>& on_sample, const ModelView* view,
                    bool cuda_graphs) {
  const MethodInfo& method_info = method_registry().get(cell.method.name, "cell");
  std::unique_ptr<Dataset> dataset =
      dataset_registry().get(cell.dataset.name, "cell").create(cell.dataset.params);
  const std::vector<Sample> samples = dataset->samples(*model.tokenizer, cell.seed);
  const ModelConfig& c = model.config;
  CellResult result;
  CellTotals totals;
  double score_sum = 0;
  // The method's counters summed over the samples that report each, and how many did (a
  // sample the method never compressed reports no cache lookups, say).
  std::map<std::string, std::pair<double, int>> method_counters;
  std::map<std::string, std::vector<int>> shared_contexts;  // context_id -> its tokens
  int questions = 0;  // answers scored: a sample's, and its follow-up turns
  std::vector<std::string> answers;  // each sample's own, for score_breakdown
  reset_peak_device_memory(model.device());
  const std::optional<DeviceMemory> memory_at_start = device_memory(model.device());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (StopSignals::requested()) throw RunStopped();  // a stop asked for: give the cell up
    const Sample& sample = samples[i];
    std::unique_ptr<Method> method = method_info.create(cell.method.config);
    SessionOptions options;
    options.budget = cell.budget.value_or(0);
    options.seed = cell.seed;
    options.track_fidelity = cell.recall;
    options.model_view = view;
    options.cuda_graphs = cuda_graphs;
    Session session(model, *method, options);
    int64_t prompt_length = 0;  // the tokens the session reads
    const int max_new = cell.max_new_tokens > 0 ? cell.max_new_tokens : sample.max_new_tokens;
    const bool chat = !sample.follow_ups.empty();
    SampleOutcome outcome;
    // Each way encodes the prompt once: a split one in its own parts.
    if (dataset->teacher_forced()) {
      const std::vector<int> prompt = encode_prompt(model, sample);
      prompt_length = int64_t(prompt.size());
      outcome = teacher_force(sample, model, session, prompt);
    } else if (cell.context_sharing == "per_sample") {
      if (sample.decoded_chars > 0)
        throw InputError("sample " + sample.id + ": context_sharing per_sample and its "
                         "dataset's decoded question end (pred_script) split it two ways");
      const SplitPrompt split = split_prompt(model, sample);
      prompt_length = int64_t(split.context.size() + split.question.size());
      check_same_context(sample, split, shared_contexts);
      outcome = answer_after_context(*dataset, sample, model, session, split, max_new, chat);
    } else if (sample.decoded_chars > 0) {
      const SplitPrompt split = split_decoded_end(model, sample);  // encoded apart: other tokens
      prompt_length = int64_t(split.context.size() + split.question.size());
      outcome = answer_after_context(*dataset, sample, model, session, split, max_new, chat);
    } else {
      const std::vector<int> prompt = encode_prompt(model, sample);
      prompt_length = int64_t(prompt.size());
      outcome = answer(*dataset, sample, model, session, session.prefill(prompt), max_new, chat);
    }
    answers.push_back(outcome.prediction);
    std::vector<std::pair<Sample, SampleOutcome>> answered = {{sample, outcome}};
    for (auto& turn : answer_follow_ups(*dataset, sample, model, session, cell.max_new_tokens))
      answered.push_back(std::move(turn));
    totals.prompt_tokens += prompt_length;
    totals.add(session);
    for (const auto& [name, value] : method->counters()) {
      method_counters[name].first += value;
      ++method_counters[name].second;
    }
    for (const auto& [asked, result_of] : answered) {
      score_sum += result_of.score;
      ++questions;
      result.samples.push_back(SampleRow{.sample_id = asked.id,
                                         .input_length = prompt_length,
                                         .prediction = result_of.prediction,
                                         .answers_json = json(asked.answers).dump(),
                                         .score = result_of.score});
      result.metrics.insert(result.metrics.end(), result_of.metrics.begin(),
                            result_of.metrics.end());
    }
    for (const auto& [name, value] : sample.meta.items())  // e.g. needle depth, for reports
      if (value.is_number())
        result.metrics.push_back(MetricRow{
            .sample_id = sample.id, .name = "meta." + name, .value = value.get<double>()});
    on_sample(int(i + 1), int(samples.size()));
  }
  const int n = std::max<int>(1, int(samples.size()));
  auto cell_metric = [&](const std::string& name, double value, const std::string& unit) {
    result.metrics.push_back(
        MetricRow{.sample_id = std::nullopt, .name = name, .value = value, .unit = unit});
  };
  // Per answer; a teacher-forced cell's perplexity is that of all its tokens, exp of their
  // mean NLL (a mean of the windows' perplexities would sit above it).
  cell_metric("score",
              dataset->teacher_forced() ? std::exp(token_weighted_mean(result.metrics, "nll"))
                                        : score_sum / std::max(1, questions),
              dataset->metric_name());
  for (const Dataset::CellMetric& m : dataset->score_breakdown(samples, answers))
    cell_metric(m.name, m.value, m.unit);
  cell_metric("samples", double(samples.size()), "count");
  if (questions != int(samples.size())) cell_metric("questions", double(questions), "count");
  cell_metric("model_trained", model.trained ? 1.0 : 0.0, "bool");
  if (dataset->teacher_forced()) {
    cell_metric("agreement_with_full", token_weighted_mean(result.metrics, "agreement_with_full"),
                "%");
    cell_metric("nll", token_weighted_mean(result.metrics, "nll"), "nats/token");
  }
  for (const auto& [name, sum] : method_counters)
    cell_metric("method." + name, pooled_counter(method_counters, name), "");
  // Not where the cell also holds an uncompressed cache (the teacher-forced datasets' Full
  // reference, recall's shadow copy): its peak would be at least Full's whatever the method.
  const bool only_the_method = !dataset->teacher_forced() && !cell.recall;
  const std::optional<DeviceMemory> memory = device_memory(model.device());
  if (only_the_method && memory) {
    cell_metric("peak_device_memory_bytes", double(memory->peak_bytes), "bytes");
    cell_metric("peak_device_memory_over_start_bytes",
                double(memory->peak_bytes - memory_at_start->current_bytes), "bytes");
  }
  totals.emit(result.metrics, n, c.num_hidden_layers, c.num_key_value_heads);
  add_sdpa_reference(result.metrics, model, totals, n);
  return result;
}

RunInfo current_run_info(const Suite& suite, const std::vector<Cell>& cells,
                         const std::string& command, int threads) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  RunInfo info;
  info.suite = suite.name;
  info.suite_json = suite.source.dump();
  info.command = command;
  info.git_commit = KVBENCH_GIT_COMMIT;
  info.build_type = KVBENCH_BUILD_TYPE;
  info.torch_version = TORCH_VERSION;
  for (const std::string& name : devices_of(cells))  // the devices this run uses, described
    info.device += (info.device.empty() ? "" : "; ") +
                   describe_device(parse_device(name, "device"));
  if (info.device.empty()) info.device = "cpu";  // no cell to run
  info.threads = threads;
  info.host = host;
  return info;
}

std::string default_db_path(const std::string& suite_name) {
  return "results/runs/" + suite_name + ".db";
}

namespace {

// What --allow-unknown-config-keys let through, on the terminal and in the run's provenance.
void record_unknown_keys(ResultStore& store, int64_t run_id, const LlamaModel& model,
                         std::ostream& out) {
  for (const std::string& warning : model.unknown_key_warnings()) {
    out << "warning: " << warning << "\n";
    store.add_run_warning(run_id, warning);
  }
}

}  // namespace

std::vector<std::string> devices_of(const std::vector<Cell>& cells) {
  std::vector<std::string> out;
  for (const Cell& c : cells)
    if (std::find(out.begin(), out.end(), c.device) == out.end()) out.push_back(c.device);
  return out;
}

void check_devices(const Suite& suite, const std::vector<Cell>& cells) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const Cell& c : cells) {
    if (!seen.insert({c.device, c.dtype}).second) continue;
    const at::Device device = parse_device(c.device, suite.path + ": device");
    check_dtype_on_device(parse_dtype(c.dtype, "dtype"), device, suite.path + ": dtype");
  }
}

void check_model_configs(const Suite& suite, bool allow_unknown_config_keys) {
  std::set<std::string> seen;
  for (const Cell& cell : suite.cells()) {
    if (LlamaModel::is_builtin_reference(cell.model) || !seen.insert(cell.model).second) continue;
    ModelConfig::load(cell.model + "/config.json", allow_unknown_config_keys);
    Tokenizer::load(cell.model, allow_unknown_config_keys);
    check_checkpoint_files(cell.model);  // a truncated weights file: refused, not N failed cells
  }
}

namespace {

// A failed cell's message: LibTorch's without its C++ backtrace (a CUDA out-of-memory included).
std::string error_text(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e))
    return torch_error->what_without_backtrace();
  return e.what();
}

// Renews the heartbeat of a run and of its running cell every ResultStore::kHeartbeatS, from
// its own connection, for as long as it lives, so other processes see both are alive.
class Heartbeat {
 public:
  Heartbeat(const std::string& db, int64_t run_id) : thread_([this, db, run_id] {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto period = std::chrono::duration<double>(ResultStore::kHeartbeatS);
    while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
      try {
        ResultStore(db).heartbeat(run_id, cell_id_);
      } catch (const std::exception&) {
        // A missed beat costs nothing unless beats stay missing for kClaimTimeoutS.
      }
    }
  }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void set_cell(int64_t cell_id) {  // the running cell (0: none)
    std::lock_guard<std::mutex> lock(mutex_);
    cell_id_ = cell_id;
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  int64_t cell_id_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

const std::string& ModelFingerprints::of(const std::string& model) {
  auto it = known_.find(model);
  if (it == known_.end()) it = known_.emplace(model, checkpoint_fingerprint(model)).first;
  return it->second;
}

void settle_changed_models(ResultStore& store, const std::vector<Cell>& cells, bool redo,
                           ModelFingerprints& fingerprints, std::ostream& progress) {
  std::vector<std::pair<std::string, std::string>> changed;  // key, the model's fingerprint now
  const Cell* first = nullptr;
  std::set<std::string> seen;
  for (const Cell& cell : cells) {
    const std::string key = cell.key();
    if (!seen.insert(key).second) continue;
    const std::string& fingerprint = fingerprints.of(cell.model);
    if (!store.cell_complete(key) || store.cell_complete(key, fingerprint)) continue;
    changed.emplace_back(key, fingerprint);
    if (!first) first = &cell;
  }
  if (changed.empty()) return;
  const std::string count = std::to_string(changed.size()) + (changed.size() == 1 ? " cell" : " cells");
  if (!redo)
    throw InputError(store.path() + ": " + count + " of this run stored results of another "
                     "model under the name they give it (" + first->model + " is now " +
                     fingerprints.of(first->model) + "; first: " + first->description() +
                     "): --redo-changed-models forgets those results and redoes the cells, or "
                     "use another --db");
  const int64_t forgotten = store.forget_other_models(changed);
  progress << "--redo-changed-models: forgot " << forgotten << " results of another model ("
           << count << "); they are redone\n";
}

void forget_for_fresh(ResultStore& store, const Suite& suite, std::ostream& progress) {
  std::vector<std::string> keys;
  for (const Cell& cell : suite.cells()) keys.push_back(cell.key());
  if (const int64_t others = store.forget_suite(suite.name, keys))
    progress << "--fresh: also forgot " << others << (others == 1 ? " result" : " results")
             << " of this suite's cells that runs of other suites had stored\n";
}

RunSummary run_suite(const Suite& suite, const RunOptions& options, std::ostream& progress_out) {
  ResultStore store(options.db_path);
  if (options.fresh && !options.join_run) forget_for_fresh(store, suite, progress_out);
  const std::vector<Cell> cells =
      options.shard ? cells_of_shard(suite.cells(), *options.shard) : suite.cells();
  ModelFingerprints fingerprints;
  if (!options.join_run)  // a worker's supervisor settled them
    settle_changed_models(store, cells, options.redo_changed_models, fingerprints, progress_out);
  for (const Cell& cell : cells) fingerprints.of(cell.model);  // each model's, as the run begins
  if (!options.header.empty()) progress_out << options.header << "\n";
  RunSummary summary;
  summary.run_id = options.join_run ? *options.join_run
                                    : store.begin_run(current_run_info(
                                          suite, cells, options.command, at::get_num_threads()));
  Progress progress(progress_out, int(cells.size()), options.progress);
  Heartbeat heartbeat(options.db_path, summary.run_id);
  const StopSignals stop;
  std::map<std::string, std::shared_ptr<LlamaModel>> models;
  std::unique_ptr<ModelView> view;  // what methods see of the model in `models`
  bool stopped = false;  // cells left undone by a stop request
  for (size_t i = 0; i < cells.size() && !stopped; ++i) {
    if (StopSignals::requested()) {  // stopped, unless other processes did the cells left
      stopped = std::any_of(cells.begin() + long(i), cells.end(), [&](const Cell& c) {
        return !store.cell_complete(c.key(), fingerprints.of(c.model));
      });
      break;
    }
    const Cell& cell = cells[i];
    const int index = int(i);
    const std::string key = cell.key();
    const std::string& fingerprint = fingerprints.of(cell.model);
    // A read: resuming takes no write lock per complete cell.
    if (store.cell_complete(key, fingerprint)) {
      progress.cell_skipped(index, cell.description());
      ++summary.skipped;
      continue;
    }
    const CellClaim claim =
        store.claim_cell(summary.run_id, key, cell.model, cell.dataset.name, cell.method.label,
                         cell.budget, int64_t(cell.seed), fingerprint);
    if (claim.cell_id == 0) {  // another process completed it meanwhile, or runs it
      if (claim.held_by == "already complete") {
        progress.cell_skipped(index, cell.description());
        ++summary.skipped;
      } else if (claim.other_model) {  // stored since settle_changed_models
        progress.cell_started(index, cell.description());
        progress.cell_finished(index, "FAILED: a run of another model under the name " +
                                          cell.model + " stored its result meanwhile",
                               0.0);
        ++summary.failed;
      } else {
        progress.cell_elsewhere(index, cell.description(), claim.held_by);
        ++summary.elsewhere;
      }
      continue;
    }
    const int64_t cell_id = claim.cell_id;
    progress.cell_started(index, cell.description());
    heartbeat.set_cell(cell_id);
    auto start = Clock::now();
    try {
      const std::string model_key = cell.model + "|" + cell.device + "|" + cell.dtype;
      if (!models.count(model_key)) {
        view.reset();
        models.clear();  // one model in memory at a time (an 8B model on a GPU fills it)
        LoadOptions load;
        load.dtype = parse_dtype(cell.dtype, "dtype");
        load.device = parse_device(cell.device, "device");
        load.allow_unknown_config_keys = options.allow_unknown_config_keys;
        models[model_key] = LlamaModel::from_reference(cell.model, load);
        record_unknown_keys(store, summary.run_id, *models[model_key], progress_out);
        view = std::make_unique<ModelView>(*models[model_key], options.cache_dir);
      }
      const std::shared_ptr<LlamaModel> model = models[model_key];
      CellResult result = run_cell(
          cell, *model,
          [&](int done, int total) { progress.sample_done(index, done, total); },
          view.get(), options.cuda_graphs);
      store.complete_cell(cell_id, result.samples, result.metrics, seconds_since(start));
      progress.cell_finished(index, "complete", seconds_since(start));
      ++summary.ran;
    } catch (const DatabaseError&) {
      throw;  // the database itself failed (disk full, read-only): no cell can be recorded
    } catch (const RunStopped&) {
      stopped = true;
      store.release_cell(cell_id);
      progress.cell_finished(index, "given up (stopped by " +
                                        signal_name(StopSignals::requested()) + ")",
                             seconds_since(start));
    } catch (const std::exception& e) {
      const std::string error = error_text(e);
      store.fail_cell(cell_id, error, seconds_since(start));
      progress.cell_finished(index, "FAILED: " + error, seconds_since(start));
      ++summary.failed;
      release_cached_device_memory(parse_device(cell.device, "device"));  // after an OOM
    }
    heartbeat.set_cell(0);
  }
  summary.stopped_by = stopped ? StopSignals::requested() : 0;
  if (!options.join_run)
    store.finish_run(summary.run_id, summary.stopped_by ? "interrupted"
                                     : summary.failed > 0 ? "failures"
                                                          : "complete");
  return summary;
}

}  // namespace kvb
