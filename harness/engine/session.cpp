#include "harness/engine/session.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/common/error.h"
#include "harness/engine/kernel_adapter.h"

namespace kvb {

using Clock = std::chrono::steady_clock;

void AttendedCounts::reset(int cells) {
  sum.assign(cells, 0.0);
  min.assign(cells, std::numeric_limits<int64_t>::max());
  max.assign(cells, 0);
  steps = 0;
}

void AttendedCounts::add(int cell, int64_t attended) {
  sum[cell] += double(attended);
  min[cell] = std::min(min[cell], attended);
  max[cell] = std::max(max[cell], attended);
}

void FidelityCounts::reset(int layers) {
  recall_sum.assign(layers, 0.0);
  output_error_sum.assign(layers, 0.0);
  count.assign(layers, 0);
}

int argmax_token(const at::Tensor& logits) {
  // at::argmax does not promise the lowest index on ties; the reference output does.
  at::Tensor l = logits.to(at::kFloat).contiguous();
  const float* p = l.data_ptr<float>();
  int best = 0;
  for (int64_t i = 1; i < l.numel(); ++i)
    if (p[i] > p[best]) best = int(i);
  return best;
}

// Logical entries KV head `head` supplies at a step (the union over its query heads for a
// per-query-head selection). Returns [n] int64.
static at::Tensor attended_entries(const LayerKV& kv, const Selection& selection, int head,
                                   int64_t g) {
  if (selection.all) return at::arange(kv.size(head), at::kLong);
  if (selection.per_query_head.empty()) return at::tensor(selection.per_head[head], at::kLong);
  std::vector<int64_t> all;  // the union of the group's query heads' entries
  for (int64_t i = head * g; i < (head + 1) * g; ++i)
    all.insert(all.end(), selection.per_query_head[i].begin(), selection.per_query_head[i].end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return at::tensor(all, at::kLong);
}

Session::Session(const LlamaModel& model, Method& method, SessionOptions options)
    : model_(model), method_(method), options_(options) {}

void Session::check_context(int64_t tokens) const {
  const int window = model_.config.sliding_window;
  if (window > 0 && tokens > window)
    throw InputError(model_.source + ": context of " + std::to_string(tokens) +
                     " tokens exceeds the model's sliding_window (" + std::to_string(window) +
                     "); sliding-window attention is not implemented, so kvbench refuses "
                     "rather than attend beyond the window");
}

at::Tensor Session::prefill(const std::vector<int>& ids, bool all_logits) {
  if (ids.empty()) throw InputError("prefill: empty prompt");
  const ModelConfig& c = model_.config;
  for (int id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw InputError("prefill: token id " + std::to_string(id) + " outside the vocabulary");
  check_context(int64_t(ids.size()));
  auto start = Clock::now();
  kv_.clear();
  shadow_.clear();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    kv_.emplace_back(c.num_key_value_heads, c.head_dim, model_.embed.scalar_type());
    if (options_.track_fidelity)
      shadow_.emplace_back(c.num_key_value_heads, c.head_dim, model_.embed.scalar_type());
  }
  fidelity_.reset(c.num_hidden_layers);
  attended_.reset(c.num_hidden_layers * c.num_key_value_heads);
  timings_ = SessionTimings{};
  timings_.attention_s.assign(size_t(c.num_hidden_layers), 0.0);
  MethodContext context{c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
                        c.head_dim, options_.budget, int64_t(ids.size()), options_.seed, &model_};
  method_.begin(context);

  at::Tensor x = model_.embed.index_select(0, at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong));
  for (int l = 0; l < c.num_hidden_layers; ++l) x = prefill_layer(l, x);
  auto hook_start = Clock::now();
  method_.after_prefill(kv_);
  for (LayerKV& layer : kv_) layer.shrink_to_fit();  // evicted blocks leave the process
  timings_.prefill_method_s += seconds_since(hook_start);
  position_ = int64_t(ids.size());
  at::Tensor out = all_logits ? output_logits(model_, x)
                              : output_logits(model_, x.narrow(0, x.size(0) - 1, 1))[0];
  timings_.prefill_s = seconds_since(start);
  return out;
}

at::Tensor Session::prefill_layer(int layer, const at::Tensor& x) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const int64_t L = x.size(0), d = c.head_dim, Hq = c.num_attention_heads;
  const int64_t Hkv = c.num_key_value_heads, g = Hq / Hkv;
  at::Tensor h = rms_norm(x, w.attn_norm, model_.config.rms_norm_eps);
  at::Tensor positions = at::arange(L, at::kLong);
  at::Tensor q = layer_queries(model_, w, h, positions).contiguous();  // [Hq, L, d]
  at::Tensor k = layer_keys(model_, w, h, positions).contiguous();     // [Hkv, L, d]
  at::Tensor v = layer_values(model_, w, h).contiguous();              // [Hkv, L, d]

  // Causal attention in query chunks: scores [Hkv, g*chunk, keys] stay within the byte bound.
  const int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(L, options_.prefill_score_bytes / (int64_t(sizeof(float)) * Hq * L)));
  const double scale = 1.0 / std::sqrt(double(d));
  at::Tensor out = at::empty({Hkv, g, L, d}, q.options());
  at::Tensor q_grouped = q.view({Hkv, g, L, d});
  for (int64_t c0 = 0; c0 < L; c0 += chunk) {
    const int64_t n = std::min(chunk, L - c0), keys = c0 + n;
    at::Tensor qc = q_grouped.narrow(2, c0, n).reshape({Hkv, g * n, d});
    at::Tensor scores = at::bmm(qc, k.narrow(1, 0, keys).transpose(1, 2)).mul_(scale)
                            .view({Hkv, g, n, keys});
    // Query c0+i sees keys 0..c0+i.
    at::Tensor mask = at::arange(keys, at::kLong).unsqueeze(0) >
                      (at::arange(n, at::kLong) + c0).unsqueeze(1);  // [n, keys]
    scores.masked_fill_(mask, -std::numeric_limits<float>::infinity());
    at::Tensor probs = at::softmax(scores, -1).view({Hkv, g * n, keys});
    out.narrow(2, c0, n).copy_(at::bmm(probs, v.narrow(1, 0, keys)).view({Hkv, g, n, d}));
  }
  at::Tensor attn = out.view({Hq, L, d}).transpose(0, 1).reshape({L, Hq * d});

  kv_[layer].append_many(k, v, 0);
  if (options_.track_fidelity) shadow_[layer].append_many(k, v, 0);
  auto hook_start = Clock::now();
  method_.on_prefill(layer, q, k, v, kv_[layer]);
  timings_.prefill_method_s += seconds_since(hook_start);

  at::Tensor y = x + attention_output(w, attn);
  return y + swiglu_mlp(w, rms_norm(y, w.mlp_norm, model_.config.rms_norm_eps));
}

at::Tensor Session::decode(int token) {
  if (kv_.empty()) throw std::logic_error("decode before prefill");
  if (token < 0 || token >= model_.config.vocab_size)
    throw InputError("decode: token id " + std::to_string(token) + " outside the vocabulary");
  check_context(position_ + 1);
  auto start = Clock::now();
  method_.on_decode_step(kv_);  // cross-layer decisions before the step's token is appended
  timings_.select_s += seconds_since(start);
  at::Tensor x = model_.embed.narrow(0, token, 1);  // [1, D]
  for (int l = 0; l < model_.config.num_hidden_layers; ++l) x = decode_layer(l, x);
  ++position_;
  ++attended_.steps;
  ++timings_.decode_steps;
  at::Tensor out = output_logits(model_, x)[0];
  timings_.decode_s += seconds_since(start);
  return out;
}

at::Tensor Session::decode_layer(int layer, const at::Tensor& x) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const int64_t d = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  at::Tensor h = rms_norm(x, w.attn_norm, model_.config.rms_norm_eps);
  method_.on_attention_input(layer, h, position_);
  at::Tensor pos = at::full({1}, position_, at::kLong);
  at::Tensor q = layer_queries(model_, w, h, pos).reshape({Hq, d});
  at::Tensor k = layer_keys(model_, w, h, pos).reshape({Hkv, d});
  at::Tensor v = layer_values(model_, w, h).reshape({Hkv, d});

  LayerKV& kv = kv_[layer];
  kv.append(k, v, position_);
  if (options_.track_fidelity) shadow_[layer].append(k, v, position_);
  auto select_start = Clock::now();
  method_.on_append(layer, k, v, kv);
  Selection selection = method_.select(layer, q, kv);
  timings_.select_s += seconds_since(select_start);

  at::Tensor attn = decode_attention(layer, q, selection).view({1, Hq * d});
  at::Tensor y = x + attention_output(w, attn);
  return y + swiglu_mlp(w, rms_norm(y, w.mlp_norm, model_.config.rms_norm_eps));
}

at::Tensor Session::decode_attention(int layer, const at::Tensor& q, const Selection& selection) {
  auto start = Clock::now();
  LayerKV& kv = kv_[layer];
  const int64_t Hkv = kv.num_heads(), d = kv.head_dim(), Hq = q.size(0), g = Hq / Hkv;
  // One attention unit per KV head, or one per query head for a per-query-head selection.
  const bool per_query = !selection.all && !selection.per_query_head.empty();
  const int64_t units = per_query ? Hq : Hkv, queries_per_unit = Hq / units;
  const auto& lists = per_query ? selection.per_query_head : selection.per_head;
  if (!selection.all && int64_t(lists.size()) != units)
    throw std::logic_error("Selection has " + std::to_string(lists.size()) +
                           " lists, the layer has " + std::to_string(units) +
                           (per_query ? " query heads" : " KV heads"));
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<at::Tensor> rows(units);  // [n_u] physical pool rows of unit u's KV head
  for (int64_t u = 0; u < units; ++u) {
    const int h = int(u * queries_per_unit / g);
    rows[u] = selection.all ? kv.all_physical_rows(h)
                            : kv.physical_rows(h, at::tensor(lists[u], at::kLong));
  }
  for (int64_t h = 0; h < Hkv; ++h) {  // per KV head: the mean over its units, rounded
    const int64_t per_head = units / Hkv;
    int64_t total = 0;
    for (int64_t u = h * per_head; u < (h + 1) * per_head; ++u) total += rows[u].numel();
    attended_.add(int(layer * Hkv + h), (total + per_head / 2) / per_head);
  }
  at::Tensor out;  // [units, queries_per_unit, d]
  std::vector<at::Tensor> probs_per_unit;
  if (sparse_attention_supported(q, kv.key_pool(), kv.value_pool())) {
    // fp32: one pass of kernels::sparse_decode_attention over the pool rows, no gathered copy.
    out = sparse_decode_attention(q, kv.key_pool(), kv.value_pool(), rows, scale,
                                  method_.wants_attention() ? &probs_per_unit : nullptr);
  } else {
    out = at::empty({units, queries_per_unit, d}, q.options());
    for (int64_t u = 0; u < units; ++u) {
      at::Tensor keys = kv.key_pool().index_select(0, rows[u]);      // [n, d]
      at::Tensor values = kv.value_pool().index_select(0, rows[u]);  // [n, d]
      at::Tensor q_unit = q.narrow(0, u * queries_per_unit, queries_per_unit);  // [q/u, d]
      at::Tensor probs = at::softmax(at::matmul(q_unit, keys.t()).mul_(scale), -1);  // [q/u, n]
      out[u] = at::matmul(probs, values);
      if (method_.wants_attention()) probs_per_unit.push_back(probs);
    }
  }
  out = out.view({Hkv, g, d});
  timings_.attention_s[size_t(layer)] += seconds_since(start);
  if (options_.track_fidelity)
    for (int64_t h = 0; h < Hkv; ++h)
      measure_fidelity(layer, int(h), q.narrow(0, h * g, g),
                       attended_entries(kv, selection, int(h), g), out[h]);
  if (method_.wants_attention()) {
    auto hook_start = Clock::now();
    method_.on_attention(layer, selection, probs_per_unit, kv);
    timings_.select_s += seconds_since(hook_start);
  }
  return out.view({Hkv * g, d});
}

void Session::measure_fidelity(int layer, int head, const at::Tensor& q_group,
                               const at::Tensor& logical, const at::Tensor& out_head) {
  const LayerKV& full = shadow_[layer];
  const double scale = 1.0 / std::sqrt(double(full.head_dim()));
  at::Tensor probs = at::softmax(at::matmul(q_group, full.keys(head).t()).mul_(scale), -1);  // [g, N]
  at::Tensor full_out = at::matmul(probs, full.values(head));                               // [g, d]
  // Shadow entries sit at logical index == position; the method's attended positions:
  const std::vector<int64_t>& positions = kv_[layer].positions(head);
  at::Tensor attended = at::zeros({full.size(head)}, at::kBool);
  at::Tensor idx = logical.contiguous();
  for (int64_t i = 0; i < idx.numel(); ++i) attended[positions[idx.data_ptr<int64_t>()[i]]] = true;
  const int64_t b = options_.budget > 0 ? std::min(options_.budget, full.size(head)) : idx.numel();
  at::Tensor top = std::get<1>(at::topk(probs.sum(0), b));  // I_true
  const double hits = attended.index_select(0, top).sum().item<double>();
  fidelity_.recall_sum[layer] += hits / double(b);
  fidelity_.output_error_sum[layer] +=
      ((out_head - full_out).norm() / full_out.norm().clamp_min(1e-30)).item<double>();
  ++fidelity_.count[layer];
}

std::vector<int> Session::generate(const std::vector<int>& prompt, int max_new,
                                   const std::vector<int>& stop_ids) {
  std::vector<int> generated;
  at::Tensor next_logits = prefill(prompt);
  for (int i = 0; i < max_new; ++i) {
    int token = argmax_token(next_logits);
    if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) break;
    generated.push_back(token);
    if (i + 1 < max_new) next_logits = decode(token);
  }
  return generated;
}

int64_t Session::kv_allocated_bytes() const {
  int64_t total = 0;
  for (const LayerKV& layer : kv_) total += layer.allocated_bytes();
  return total;
}

}  // namespace kvb
