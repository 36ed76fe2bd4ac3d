// `kvbench inspect`: one sequence through one method, recording which prompt positions every KV
// head of every layer attends to at every decode step, to see why a method fails a sample.
// The method runs unchanged inside a recording wrapper (its hooks forwarded), so what is
// recorded is exactly what the engine attended.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/llama_model.h"
#include "methods/method.h"

namespace kvb {

using json = nlohmann::json;

// A span of prompt token positions [first, last] (the needle of a retrieval task).
struct TokenSpan {
  int64_t first = 0, last = 0;
};

struct InspectRequest {
  std::vector<int> prompt;  // token ids, BOS included
  int64_t budget = 0;
  int steps = 8;            // greedy decode steps recorded
  bool dump_qk = false;     // keep the post-RoPE q and k of every layer
  std::string cache_dir;    // where methods keep what they derive from the model ("": nowhere)
};

// What one run attended, in original token positions.
struct InspectTrace {
  int layers = 0, kv_heads = 0, query_heads = 0;
  int64_t prompt_length = 0;
  std::vector<std::vector<std::vector<int64_t>>> kept;  // [layer][KV head]: resident after prefill
  // [step][layer][KV head]: attended at decode step step+1 (a per-query-head selection: the
  // union of the group's query heads)
  std::vector<std::vector<std::vector<std::vector<int64_t>>>> attended;
  std::vector<int> generated;  // the tokens fed at the decode steps (greedy)
  // With dump_qk: "layer<l>.prefill.q" [Hq, L, d], "layer<l>.prefill.k" [Hkv, L, d],
  // "layer<l>.decode.q" [steps, Hq, d], "layer<l>.decode.k" [steps, Hkv, d], post-RoPE, fp32.
  std::map<std::string, at::Tensor> qk;
};

// Prefill of `request.prompt`, then `request.steps` greedy decode steps with `method`.
InspectTrace run_inspect(const LlamaModel& model, Method& method, const InspectRequest& request);

// The token span of the first occurrence of `text` in the decoded prompt `ids` (decoded
// prefixes locate it; special tokens skipped); none when `text` is empty or absent.
std::optional<TokenSpan> find_token_span(const Tokenizer& tokenizer, const std::vector<int>& ids,
                                         const std::string& text);

// Share of the decode steps at which each (layer, KV head) attended each prompt position,
// averaged over bins of `bin` positions: [layers * Hkv][ceil(L / bin)], row = layer * Hkv + head.
std::vector<std::vector<double>> attended_share(const InspectTrace& trace, int64_t bin);

// The JSON record: `about` (model, method, config, ...) plus the trace and the needle.
json inspect_json(const InspectTrace& trace, const json& about,
                  const std::optional<TokenSpan>& needle);

// Writes <dir>/attended.json, <dir>/attended.png (+ .gp, the gnuplot script that re-renders it;
// skipped, with a note on stderr, when `gnuplot` is absent) and, with q/k, qk.safetensors.
// Returns the files written.
std::vector<std::string> write_inspect(const InspectTrace& trace, const json& about,
                                       const std::optional<TokenSpan>& needle,
                                       const std::string& dir, const std::string& gnuplot);

}  // namespace kvb
