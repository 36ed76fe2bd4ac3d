#include "engine/session.h"

#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "engine/common/error.h"
#include "engine/device.h"
#include "engine/kernel_adapter.h"
#include "engine/prefill_attention.h"

namespace kvb {

void AttendedTally::reset(int layers, int kv_heads, at::Device device) {
  const at::TensorOptions on = at::TensorOptions().device(device);
  sum_ = at::zeros({layers, kv_heads}, on.dtype(at::kDouble));
  min_ = at::full({layers, kv_heads}, std::numeric_limits<int64_t>::max(), on.dtype(at::kLong));
  max_ = at::zeros({layers, kv_heads}, on.dtype(at::kLong));
  const size_t cells = size_t(layers) * size_t(kv_heads);
  host_sum_.assign(cells, 0.0);
  host_min_.assign(cells, std::numeric_limits<int64_t>::max());
  host_max_.assign(cells, 0);
  steps_ = 0;
}

void AttendedTally::add(int layer, const at::Tensor& counts, int64_t units_per_head) {
  const at::Tensor per_head = counts.view({-1, units_per_head}).sum(1);  // [Hkv]
  sum_[layer].add_(per_head, 1.0 / double(units_per_head));
  const at::Tensor rounded = (per_head + units_per_head / 2).div(units_per_head, "floor");
  min_[layer] = at::minimum(min_[layer], rounded);
  max_[layer] = at::maximum(max_[layer], rounded);
}

void AttendedTally::add(int layer, const std::vector<int64_t>& counts, int64_t units_per_head) {
  for (size_t h = 0; h < counts.size() / size_t(units_per_head); ++h) {
    int64_t per_head = 0;
    for (int64_t u = 0; u < units_per_head; ++u) per_head += counts[h * units_per_head + u];
    const int64_t rounded = (per_head + units_per_head / 2) / units_per_head;
    const size_t i = size_t(layer) * size_t(sum_.size(1)) + h;  // sum_: [layers, Hkv]
    host_sum_[i] += double(per_head) / double(units_per_head);
    host_min_[i] = std::min(host_min_[i], rounded);
    host_max_[i] = std::max(host_max_[i], rounded);
  }
}

AttendedCounts AttendedTally::read() const {
  AttendedCounts out;
  out.steps = steps_;
  if (!sum_.defined()) return out;
  auto host = [](const at::Tensor& t) { return t.reshape({-1}).to(at::kCPU).contiguous(); };
  at::Tensor sum = host(sum_), min = host(min_), max = host(max_);
  out.sum.assign(sum.data_ptr<double>(), sum.data_ptr<double>() + sum.numel());
  out.min.assign(min.data_ptr<int64_t>(), min.data_ptr<int64_t>() + min.numel());
  out.max.assign(max.data_ptr<int64_t>(), max.data_ptr<int64_t>() + max.numel());
  for (size_t i = 0; i < out.sum.size(); ++i) {  // the steps tallied on the host
    out.sum[i] += host_sum_[i];
    out.min[i] = std::min(out.min[i], host_min_[i]);
    out.max[i] = std::max(out.max[i], host_max_[i]);
  }
  return out;
}

void FidelityCounts::reset(int layers) {
  recall_sum.assign(layers, 0.0);
  output_error_sum.assign(layers, 0.0);
  count.assign(layers, 0);
}

int argmax_token(const at::Tensor& logits) {
  // at::argmax does not promise the lowest index on ties; the reference output does.
  at::Tensor l = logits.to(at::kFloat).reshape({-1});
  at::Tensor ids = at::arange(l.numel(), l.options().dtype(at::kLong));
  at::Tensor at_max = l == l.max();
  const int64_t token = at::where(at_max, ids, at::full_like(ids, l.numel())).min().item<int64_t>();
  // A NaN makes the max NaN, equal to nothing: no token is the greedy pick.
  if (token == l.numel())
    throw InputError("logits: NaN, so no greedy token (non-finite weights or activations)");
  return int(token);
}

Session::Session(const LlamaModel& model, Method& method, SessionOptions options)
    : model_(model), method_(method), options_(options), clock_(model.device()) {
  if (!options_.model_view) {
    own_view_ = std::make_unique<ModelView>(model_, /*cache_dir=*/"");
    options_.model_view = own_view_.get();
  }
}

void Session::check_context(int64_t tokens) const {
  const int window = model_.config.sliding_window;
  if (window > 0 && tokens > window)
    throw InputError(model_.source + ": context of " + std::to_string(tokens) +
                     " tokens exceeds the model's sliding_window (" + std::to_string(window) +
                     "); sliding-window attention is not implemented, so kvbench refuses "
                     "rather than attend beyond the window");
}

namespace {

// RMSNorm with the model's eps, in one kernel call where the kernel adapter has one (a session
// never needs autograd).
at::Tensor normalize(const LlamaModel& model, const at::Tensor& x, const at::Tensor& weight) {
  return inference_rms_norm(x, weight, model.config.rms_norm_eps);
}

// The norm of what layer l's residual stream feeds: the layer's input norm, or after the last
// layer the final norm.
const at::Tensor& input_norm(const LlamaModel& model, int layer) {
  return layer < model.config.num_hidden_layers ? model.layers[size_t(layer)].attn_norm
                                                : model.final_norm;
}

// The residual stream as it enters layer 0: the embeddings x [L, D] and their input norm.
AddedAndNormed first_stream(const LlamaModel& model, const at::Tensor& x) {
  return {x, normalize(model, x, input_norm(model, 0))};
}

// stream + delta and its RMSNorm by `weight`, in one kernel call where the adapter has one.
AddedAndNormed add_and_normalize(const LlamaModel& model, const at::Tensor& stream,
                                 const at::Tensor& delta, const at::Tensor& weight) {
  return inference_add_rms_norm(stream, delta, weight, model.config.rms_norm_eps);
}

// The MLP of a prefill over [L, D] in row chunks: [rows, F] activations, never [L, F].
at::Tensor chunked_mlp(const LayerWeights& w, const at::Tensor& x, int64_t rows) {
  if (x.size(0) <= rows) return swiglu_mlp(w, x);
  at::Tensor out = at::empty_like(x);
  for (int64_t r0 = 0; r0 < x.size(0); r0 += rows) {
    const int64_t n = std::min(rows, x.size(0) - r0);
    out.narrow(0, r0, n).copy_(swiglu_mlp(w, x.narrow(0, r0, n)));
  }
  return out;
}

}  // namespace

at::Tensor Session::prefill(const std::vector<int>& ids, bool all_logits) {
  if (ids.empty()) throw InputError("prefill: empty prompt");
  const ModelConfig& c = model_.config;
  for (int id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw InputError("prefill: token id " + std::to_string(id) + " outside the vocabulary [0, " +
                       std::to_string(c.vocab_size) + ")");
  check_context(int64_t(ids.size()));
  // No autograd bookkeeping per operator (grad checks, version counters): ATen's host cost
  // per call, which a launch-bound GPU step waits on (`decode_host` in kvbench_bench). What
  // is made here is an inference tensor: not to be changed in place outside these calls.
  const c10::InferenceMode inference;
  RECORD_USER_SCOPE("kvbench::prefill");  // its phases' scopes: engine/op_profile.h
  const PhaseClock::Mark start = clock_.mark();
  const at::TensorOptions kv_options = model_.embed.options();  // the model's device and dtype
  kv_.clear();
  shadow_.clear();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    kv_.emplace_back(c.num_key_value_heads, c.head_dim, kv_options);
    if (options_.track_fidelity) shadow_.emplace_back(c.num_key_value_heads, c.head_dim, kv_options);
  }
  fidelity_.reset(c.num_hidden_layers);
  tally_.reset(c.num_hidden_layers, c.num_key_value_heads, model_.device());
  timings_ = SessionTimings{};
  timings_.attention_s.assign(size_t(c.num_hidden_layers), 0.0);
  const MethodContext context{.num_layers = c.num_hidden_layers,
                              .num_heads = c.num_attention_heads,
                              .num_kv_heads = c.num_key_value_heads,
                              .head_dim = c.head_dim,
                              .budget = options_.budget,
                              .prompt_length = int64_t(ids.size()),
                              .seed = options_.seed,
                              .model = options_.model_view};
  // Timed apart: what a method derives once per model (InfiniGen's calibration, memoized by the
  // model's view) is set-up, as its authors run it offline, not the prompt's prefill.
  const PhaseClock::Mark setup_start = clock_.mark();
  clock_.add_since(start, &timings_.prefill_s);
  method_.begin(context);
  clock_.add_since(setup_start, &timings_.method_setup_s);
  const PhaseClock::Mark after_setup = clock_.mark();

  at::Tensor token_ids = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong);
  at::Tensor x = model_.embed.index_select(0, token_ids.to(model_.device()));  // [L, D]
  const RopeAngles rope =
      rope_angles(model_, at::arange(x.size(0), x.options().dtype(at::kLong)));  // 0..L-1
  AddedAndNormed stream = first_stream(model_, x);
  for (int l = 0; l < c.num_hidden_layers; ++l) stream = prefill_layer(l, std::move(stream), rope);
  const PhaseClock::Mark hook_start = clock_.mark();
  {
    RECORD_USER_SCOPE("kvbench::prefill_method");
    method_.after_prefill(kv_);
    for (LayerKV& layer : kv_) layer.shrink_to_fit();  // evicted blocks leave the process
  }
  clock_.add_since(hook_start, &timings_.prefill_method_s);
  position_ = int64_t(ids.size());
  const at::Tensor& last = stream.normed;  // the last layer's output through the final norm
  at::Tensor out = all_logits ? lm_head_logits(model_, last)
                              : lm_head_logits(model_, last.narrow(0, last.size(0) - 1, 1))[0];
  clock_.add_since(after_setup, &timings_.prefill_s);  // reset to 0 above; its first part added
  capture_decode_graphs();  // timed apart (graph_capture_s): not the prefill's cost
  clock_.settle();
  return out;
}

AddedAndNormed Session::prefill_layer(int layer, AddedAndNormed in, const RopeAngles& rope) {
  const ModelConfig& c = model_.config;
  const LayerWeights& w = model_.layers[layer];
  const at::Tensor& x = in.sum;
  const int64_t L = x.size(0), d = c.head_dim, Hq = c.num_attention_heads;
  const LayerQKV qkv = layer_qkv(model_, w, in.normed, rope, inference_apply_rope);
  in.normed.reset();  // [L, D] freed before the attention and the MLP allocate theirs
  at::Tensor q = qkv.q.contiguous();  // [Hq, L, d]
  at::Tensor k = qkv.k.contiguous();  // [Hkv, L, d]
  at::Tensor v = qkv.v.contiguous();  // [Hkv, L, d]

  const int64_t score_bytes = options_.prefill_score_bytes > 0 ? options_.prefill_score_bytes
                                                                : attention_score_bytes(x.device());
  const int kernel = options_.fused_prefill_attention ? fused_prefill_attention_kernel(q) : -1;
  const bool fused = kernel > 0;
  if (layer == 0) timings_.prefill_attention_kernel = fused ? kernel : -1;
  at::Tensor attn;  // [L, Hq * d]
  {
    RECORD_USER_SCOPE("kvbench::prefill_attention");
    const at::Tensor out = fused ? fused_causal_attention(q, k, v)
                                 : chunked_causal_attention(q, k, v, score_bytes);  // [Hq, L, d]
    attn = out.transpose(0, 1).reshape({L, Hq * d});
  }

  kv_[layer].append_many(k, v, 0);
  if (options_.track_fidelity) shadow_[layer].append_many(k, v, 0);
  const PhaseClock::Mark hook_start = clock_.mark();
  {
    RECORD_USER_SCOPE("kvbench::prefill_method");
    method_.on_prefill(layer, q, k, v, kv_[layer]);
  }
  clock_.add_since(hook_start, &timings_.prefill_method_s);

  const AddedAndNormed mid = add_and_normalize(model_, x, attention_output(w, attn), w.mlp_norm);
  const int64_t mlp_rows = options_.prefill_mlp_rows > 0 ? options_.prefill_mlp_rows : 4096;
  return add_and_normalize(model_, mid.sum, chunked_mlp(w, mid.normed, mlp_rows),
                           input_norm(model_, layer + 1));
}

void Session::add_phase(const PhaseClock::Mark& start, double* total, double* host_total) {
  clock_.add_since(start, total);
  *host_total += seconds_since(start.host);
}

at::Tensor Session::decode(int token) {
  if (kv_.empty()) throw std::logic_error("decode before prefill");
  if (token < 0 || token >= model_.config.vocab_size)
    throw InputError("decode: token id " + std::to_string(token) + " outside the vocabulary [0, " +
                     std::to_string(model_.config.vocab_size) + ")");
  check_context(position_ + 1);
  const c10::InferenceMode inference;  // as in prefill
  const DeviceSyncCounter syncs(model_.device());
  RECORD_USER_SCOPE("kvbench::decode");  // the phases' scopes: engine/op_profile.h
  const double fidelity_before = timings_.fidelity_s;
  const double fidelity_host_before = timings_.fidelity_host_s;
  const PhaseClock::Mark start = clock_.mark();
  {
    RECORD_USER_SCOPE("kvbench::select");
    method_.on_decode_step(kv_);  // cross-layer decisions before the step's token is appended
  }
  add_phase(start, &timings_.select_s, &timings_.select_host_s);
  const bool graphed = graphs_on() && graphs_;  // captured at the end of prefill
  const at::Tensor x = model_.embed.narrow(0, token, 1);  // [1, D]
  const RopeAngles rope = step_rope(graphed);
  const AddedAndNormed first = first_stream(model_, x);
  LayerInput in{first, layer_qkv(model_, model_.layers[0], first.normed, rope, inference_apply_rope)};
  for (int l = 0; l < model_.config.num_hidden_layers; ++l) {
    const at::Tensor attn = attend(l, in);
    in = graphed ? dense_graphed(l, in.stream.sum, attn, rope)
                 : dense_after_attention(l, in.stream.sum, attn, rope);
  }
  ++position_;
  tally_.step();
  ++timings_.decode_steps;
  if (graphed) ++timings_.graph_steps;
  at::Tensor out = lm_head_logits(model_, in.stream.normed)[0];  // normed by the final norm
  clock_.add_since(start, &timings_.decode_s);
  timings_.decode_host_s += seconds_since(start.host);
  timings_.decode_syncs += syncs.count();
  timings_.syncs_counted = syncs.counting();
  clock_.settle();  // the caller's read of the token waits for the GPU here anyway
  timings_.decode_s -= timings_.fidelity_s - fidelity_before;  // settled: both intervals known
  timings_.decode_host_s -= timings_.fidelity_host_s - fidelity_host_before;
  return out;
}

void Session::capture_decode_graphs() {
  if (!graphs_on()) return;
  if (!graphs_) graphs_ = std::make_unique<DecodeGraphs>();
  const ModelConfig& c = model_.config;
  if (graphs_->captured() == size_t(c.num_hidden_layers)) return;  // by an earlier prefill
  const double before = graphs_->capture_seconds();
  const at::TensorOptions options = model_.embed.options();
  const RopeAngles rope = step_rope(/*graphed=*/true);
  // Inputs of a decode step's shapes; their values do not matter (a piece only computes).
  at::Tensor sum = at::zeros({1, c.hidden_size}, options);
  const at::Tensor attn = at::zeros({1, int64_t(c.num_attention_heads) * c.head_dim}, options);
  for (int l = 0; l < c.num_hidden_layers; ++l) sum = dense_graphed(l, sum, attn, rope).stream.sum;
  timings_.graph_capture_s = graphs_->capture_seconds() - before;
}

RopeAngles Session::step_rope(bool graphed) {
  RopeAngles rope =
      rope_angles(model_, at::full({1}, position_, model_.embed.options().dtype(at::kLong)));
  if (graphed)  // where every layer's graph reads them
    rope = {rope.interleaved, graphs_->fixed("rope.cos", rope.cos),
            graphs_->fixed("rope.sin", rope.sin)};
  return rope;
}

bool Session::graphs_on() const {
  return options_.cuda_graphs && DecodeGraphs::available() && model_.device().is_cuda() &&
         !method_.holds_step_tensors();
}

at::Tensor Session::attend(int layer, const LayerInput& in) {
  const ModelConfig& c = model_.config;
  const int64_t d = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  method_.on_attention_input(layer, in.stream.normed, position_);
  at::Tensor q = in.qkv.q.reshape({Hq, d});
  at::Tensor k = in.qkv.k.reshape({Hkv, d});
  at::Tensor v = in.qkv.v.reshape({Hkv, d});

  LayerKV& kv = kv_[layer];
  kv.append(k, v, position_);
  if (options_.track_fidelity) shadow_[layer].append(k, v, position_);
  const PhaseClock::Mark select_start = clock_.mark();
  Selection selection = [&] {
    RECORD_USER_SCOPE("kvbench::select");
    method_.on_append(layer, k, v, kv);
    return method_.select(layer, q, kv);
  }();
  add_phase(select_start, &timings_.select_s, &timings_.select_host_s);
  return decode_attention(layer, q, selection).view({1, Hq * d});
}

Session::LayerInput Session::dense_after_attention(int layer, const at::Tensor& sum,
                                                   const at::Tensor& attn,
                                                   const RopeAngles& rope) {
  const LayerWeights& w = model_.layers[layer];
  const AddedAndNormed mid = add_and_normalize(model_, sum, attention_output(w, attn), w.mlp_norm);
  LayerInput next;
  next.stream = add_and_normalize(model_, mid.sum, swiglu_mlp(w, mid.normed),
                                  input_norm(model_, layer + 1));
  if (layer + 1 < model_.config.num_hidden_layers)
    next.qkv = layer_qkv(model_, model_.layers[size_t(layer + 1)], next.stream.normed, rope,
                         inference_apply_rope);
  return next;
}

Session::LayerInput Session::dense_graphed(int layer, const at::Tensor& sum,
                                           const at::Tensor& attn, const RopeAngles& rope) {
  const bool interleaved = rope.interleaved;
  const std::vector<at::Tensor> out = graphs_->run(
      size_t(layer), {sum, attn, rope.cos, rope.sin},
      [this, layer, interleaved](const std::vector<at::Tensor>& in) {
        const LayerInput next =
            dense_after_attention(layer, in[0], in[1], RopeAngles{interleaved, in[2], in[3]});
        return std::vector<at::Tensor>{next.stream.sum, next.stream.normed, next.qkv.q,
                                       next.qkv.k, next.qkv.v};
      });
  return {{out[0], out[1]}, {out[2], out[3], out[4]}};
}

namespace {

// Every resident entry of heads of different sizes (after an eviction): head h's first size(h)
// rows of the row table, [Hkv, longest] read through its row stride, counts from the host.
AttendedRows every_entry_of_ragged_heads(const LayerKV& kv) {
  const int64_t Hkv = kv.num_heads();
  std::vector<int64_t> indptr(static_cast<size_t>(Hkv + 1), 0), counts;
  for (int h = 0; h < Hkv; ++h) {
    counts.push_back(kv.size(h));
    indptr[size_t(h + 1)] = indptr[size_t(h)] + kv.size(h);
  }
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  return {.indptr = host_to_device(indptr, kv.key_pool().device()),
          .rows = kv.leading_rows(longest),
          .longest = longest,
          .host_counts = counts};
}

// Each KV head's resident entries, 0 .. size - 1, on the host.
std::vector<std::vector<int64_t>> resident_entries(const LayerKV& kv) {
  std::vector<std::vector<int64_t>> lists(size_t(kv.num_heads()));
  for (int h = 0; h < kv.num_heads(); ++h) {
    lists[size_t(h)].resize(size_t(kv.size(h)));
    std::iota(lists[size_t(h)].begin(), lists[size_t(h)].end(), int64_t(0));
  }
  return lists;
}

}  // namespace

AttendedRows attended_rows(const LayerKV& kv, const Selection& selection,
                           EqualCountsIndptr* indptr) {
  if (selection.all && !kv.equally_filled()) return every_entry_of_ragged_heads(kv);
  if (selection.all) {
    // The rows straight from the row table, without building the entries' logical indices.
    const int64_t Hkv = kv.num_heads(), n = kv.size(0);
    const at::TensorOptions longs = kv.key_pool().options().dtype(at::kLong);
    return {.indptr = indptr ? indptr->get(Hkv, n, longs) : equal_counts_indptr(Hkv, n, longs),
            .rows = kv.uniform_rows(),
            .longest = n,
            .host_counts = std::vector<int64_t>(size_t(Hkv), n)};
  }
  const Selection& s = selection;
  const int64_t units = s.units(), units_per_head = units / kv.num_heads();
  if (s.row_width > 0) {
    // Each unit's first count entries of its row: the pool rows of the whole rows, [units, k],
    // read by the kernels through the table's row stride; the counts stay on the device.
    at::Tensor logical = s.indices.view({kv.num_heads(), units_per_head, s.row_width});
    return {.indptr = s.indptr,
            .rows = kv.physical_rows_per_head(logical).view({units, s.row_width})};
  }
  const std::vector<int64_t>& c = s.host_counts;
  if (int64_t(c.size()) == units && std::equal(c.begin() + 1, c.end(), c.begin())) {
    // k entries in every unit (a fixed-k selection): the heads' rows in one gather.
    const int64_t k = units > 0 ? c[0] : 0;
    at::Tensor logical = s.indices.view({kv.num_heads(), units_per_head, k});
    return {.indptr = s.indptr, .rows = kv.physical_rows_per_head(logical).view({-1}),
            .longest = k, .host_counts = c};
  }
  at::Tensor counts = s.indptr.narrow(0, 1, units) - s.indptr.narrow(0, 0, units);
  at::Tensor unit_of_entry = at::arange(units, s.indptr.options())
                                 .repeat_interleave(counts, 0, s.indices.size(0));
  return {.indptr = s.indptr,
          .rows = kv.physical_rows(unit_of_entry.div(units_per_head, "floor"), s.indices),
          .longest = s.max_count,
          .host_counts = s.host_counts};
}

at::Tensor gathered_decode_attention(const at::Tensor& q, const LayerKV& kv,
                                     const AttendedRows& attended, std::vector<at::Tensor>* probs) {
  const at::Tensor rows = attended.rows.reshape({-1});  // [nnz], or the table's [units * n]
  const int64_t units = attended.units(), d = q.size(1), per_unit = q.size(0) / units;
  const at::TensorOptions longs = rows.options();
  at::Tensor counts = attended.indptr.narrow(0, 1, units) - attended.indptr.narrow(0, 0, units);
  // Where unit u's rows start: indptr[u] in a packed list, u * n in a [units, n] table.
  at::Tensor first = attended.rows.dim() == 2
                         ? at::arange(units, longs) * attended.rows.size(1)
                         : attended.indptr.narrow(0, 0, units);  // [units]
  const int64_t longest = attended.longest >= 0      ? attended.longest
                          : attended.rows.dim() == 2 ? attended.rows.size(1)  // a bound
                                                     : counts.max().item<int64_t>();
  at::Tensor out;  // [units, per_unit, d]
  at::Tensor p;    // [units, per_unit, longest] fp32
  if (longest == 0) {
    out = at::zeros({units, per_unit, d}, q.options());
    p = at::zeros({units, per_unit, 0}, q.options().dtype(attention_score_type(q)));
  } else {
    at::Tensor slot = at::arange(longest, longs).unsqueeze(0);             // [1, longest]
    at::Tensor valid = slot < counts.unsqueeze(1);                         // [units, longest]
    // Padding slots read the unit's last entry again (masked below): a table's columns past a
    // unit's count may be pool rows never written, whose NaN would survive 0 * value.
    at::Tensor in_unit = at::minimum(slot, (counts - 1).clamp_min(0).unsqueeze(1));
    at::Tensor at_slot =
        (first.unsqueeze(1) + in_unit).clamp_max(std::max<int64_t>(rows.size(0) - 1, 0));
    at::Tensor padded = rows.index_select(0, at_slot.reshape({-1}));      // [units * longest]
    // In fp32 (16-bit K/V widened as gathered), as the kernels compute: no rounded scores or P.
    const at::ScalarType score_type = attention_score_type(q);
    at::Tensor keys = kv.key_pool().index_select(0, padded).view({units, longest, d}).to(score_type);
    at::Tensor values = kv.value_pool().index_select(0, padded).view({units, longest, d}).to(score_type);
    at::Tensor scores = at::bmm(q.view({units, per_unit, d}).to(score_type), keys.transpose(1, 2))
                            .mul_(1.0 / std::sqrt(double(d)));
    scores.masked_fill_(valid.logical_not().unsqueeze(1), -std::numeric_limits<float>::infinity());
    p = at::softmax(scores, -1).nan_to_num_(0.0);  // a unit with no entries: all zero
    out = at::bmm(p, values).to(q.scalar_type());
  }
  if (probs) {
    std::vector<int64_t> n = attended.host_counts;  // read from the device only where unknown
    if (int64_t(n.size()) != units) {
      const at::Tensor host = counts.to(at::kCPU).contiguous();
      n.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + units);
    }
    probs->clear();
    for (int64_t u = 0; u < units; ++u) probs->push_back(p[u].narrow(-1, 0, n[size_t(u)]));
  }
  return out.reshape({units * per_unit, d});
}

at::Tensor Session::decode_attention(int layer, const at::Tensor& q, const Selection& chosen) {
  RECORD_USER_SCOPE("kvbench::attention");
  const PhaseClock::Mark start = clock_.mark();
  LayerKV& kv = kv_[layer];
  const int64_t Hkv = kv.num_heads(), d = kv.head_dim(), Hq = q.size(0), g = Hq / Hkv;
  // One attention unit per KV head, or one per query head for a per-query-head selection.
  const int64_t units = chosen.per_query_head ? Hq : Hkv, units_per_head = units / Hkv;
  if (!chosen.all && chosen.units() != units)
    throw std::logic_error("Selection has " + std::to_string(chosen.units()) +
                           " lists, the layer has " + std::to_string(units) +
                           (chosen.per_query_head ? " query heads" : " KV heads"));
  const AttendedRows attended = attended_rows(kv, chosen, &all_rows_indptr_);
  // Per KV head: the mean over its units' counts.
  if (int64_t(attended.host_counts.size()) == units) {
    tally_.add(layer, attended.host_counts, units_per_head);
  } else {
    const at::Tensor& indptr = attended.indptr;
    tally_.add(layer, indptr.narrow(0, 1, units) - indptr.narrow(0, 0, units),  // [units]
               units_per_head);
  }
  std::vector<at::Tensor> probs;
  std::vector<at::Tensor>* wanted = method_.wants_attention() ? &probs : nullptr;
  at::Tensor out;  // [Hq, d]
  if (sparse_attention_supported(q, kv.key_pool(), kv.value_pool(), units)) {
    // A kernel (CPU, or CUDA) reads the selected pool rows in place: no gathered copy.
    out = sparse_decode_attention(q, kv.key_pool(), kv.value_pool(), attended.indptr,
                                  attended.rows, 1.0 / std::sqrt(double(d)), wanted,
                                  attended.longest, attended.host_counts);
  } else {
    out = gathered_decode_attention(q, kv, attended, wanted);
  }
  add_phase(start, &timings_.attention_s[size_t(layer)], &timings_.attention_host_s);
  if (options_.track_fidelity) {
    const PhaseClock::Mark fidelity_start = clock_.mark();
    const std::vector<std::vector<int64_t>> lists = chosen.all ? resident_entries(kv) : chosen.lists();
    for (int64_t h = 0; h < Hkv; ++h) {
      const auto first = lists.begin() + (chosen.all ? h : h * units_per_head);
      const std::vector<std::vector<int64_t>> units_of_head(
          first, first + (chosen.all ? 1 : units_per_head));
      measure_fidelity(layer, int(h), q.narrow(0, h * g, g), units_of_head,
                       out.narrow(0, h * g, g));
    }
    add_phase(fidelity_start, &timings_.fidelity_s, &timings_.fidelity_host_s);
  }
  if (wanted) {
    const PhaseClock::Mark hook_start = clock_.mark();
    {
      RECORD_USER_SCOPE("kvbench::select");
      method_.on_attention(layer, chosen, probs, kv);
    }
    add_phase(hook_start, &timings_.select_s, &timings_.select_host_s);
  }
  return out;
}

void Session::measure_fidelity(int layer, int head, const at::Tensor& q_group,
                               const std::vector<std::vector<int64_t>>& lists,
                               const at::Tensor& out_head) {
  const LayerKV& full = shadow_[layer];
  // In fp32 whatever the model's dtype (a 16-bit product rounds near-ties together), as Oracle
  // top-k scores (methods/common/selection.cpp): its recall is then 1 in bf16 too.
  at::Tensor logits = at::matmul(q_group.to(at::kFloat), full.keys(head).to(at::kFloat).t());
  at::Tensor probs = at::softmax(logits.div_(std::sqrt(double(full.head_dim()))), -1);  // [g, N]
  at::Tensor full_out = at::matmul(probs, full.values(head).to(at::kFloat));  // [g, d]
  // Shadow entries sit at logical index == position. Per list: the share of the true top-b
  // keys of its attention (the group's summed, or its query head's) among the entries it attends.
  const std::vector<int64_t>& positions = kv_[layer].positions(head);
  double recall = 0;
  for (size_t u = 0; u < lists.size(); ++u) {
    std::vector<int64_t> attended_positions;
    for (int64_t i : lists[u]) attended_positions.push_back(positions[size_t(i)]);
    at::Tensor attended = at::zeros({full.size(head)}, probs.options().dtype(at::kBool))
        .index_fill_(0, at::tensor(attended_positions, at::kLong).to(probs.device()), true);
    const int64_t b = options_.budget > 0 ? std::min(options_.budget, full.size(head))
                                          : int64_t(lists[u].size());
    const at::Tensor weights = lists.size() == 1 ? probs.sum(0) : probs[int64_t(u)];  // [N]
    // I_true; ties to the earliest entry, as Oracle's top_k_indices (at::topk's order is not
    // fixed).
    at::Tensor top = std::get<1>(at::sort(weights, /*stable=*/true, 0, /*descending=*/true)).narrow(0, 0, b);
    recall += attended.index_select(0, top).sum().item<double>() / double(b);
  }
  fidelity_.recall_sum[layer] += recall / double(lists.size());
  fidelity_.output_error_sum[layer] +=
      ((out_head.to(at::kFloat) - full_out).norm() / full_out.norm().clamp_min(1e-30)).item<double>();
  ++fidelity_.count[layer];
}

std::vector<int> Session::generate(const std::vector<int>& prompt, int max_new,
                                   const std::vector<int>& stop_ids) {
  return generate_from(prefill(prompt), max_new, stop_ids);
}

std::vector<int> Session::generate_from(at::Tensor next_logits, int max_new,
                                        const std::vector<int>& stop_ids, int min_new,
                                        int unchecked) {
  std::vector<int> generated;
  for (int i = 0; i < max_new; ++i) {
    if (i < min_new && !stop_ids.empty()) {  // -inf at the stop ids, as MinLengthLogitsProcessor
      const at::Tensor ids = at::tensor(std::vector<int64_t>(stop_ids.begin(), stop_ids.end()))
                                 .to(next_logits.device());
      next_logits = next_logits.reshape({-1}).index_fill(0, ids, -INFINITY);
    }
    int token = argmax_token(next_logits);
    if (i >= unchecked && std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end())
      break;
    generated.push_back(token);
    if (i + 1 < max_new) next_logits = decode(token);
  }
  return generated;
}

const AttendedCounts& Session::attended() const {
  attended_ = tally_.read();
  return attended_;
}

int64_t Session::kv_allocated_bytes() const {
  int64_t total = 0;
  for (const LayerKV& layer : kv_) total += layer.allocated_bytes();
  return total;
}

}  // namespace kvb
