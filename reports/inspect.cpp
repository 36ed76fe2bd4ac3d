#include "reports/inspect.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/session.h"
#include "engine/model/safetensors.h"
#include "reports/plots.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

// Original positions of the entries KV head `head` attends to (sorted); `lists`: the
// selection's host lists (Selection::lists()), empty when it selects everything.
std::vector<int64_t> attended_positions(const LayerKV& kv,
                                        const std::vector<std::vector<int64_t>>& lists,
                                        bool per_query_head, int head, int64_t g) {
  const std::vector<int64_t>& positions = kv.positions(head);
  if (lists.empty()) return positions;
  std::vector<int64_t> out;
  auto add = [&](const std::vector<int64_t>& logical) {
    for (int64_t i : logical) out.push_back(positions[size_t(i)]);
  };
  if (!per_query_head) add(lists[size_t(head)]);
  else
    for (int64_t q = head * g; q < (head + 1) * g; ++q) add(lists[size_t(q)]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Runs `inner` unchanged, recording what it keeps and selects (and, asked, the q and k it sees).
class Recorder : public Method {
 public:
  Recorder(Method& inner, bool dump_qk, InspectTrace& trace)
      : inner_(inner), dump_qk_(dump_qk), trace_(trace) {}

  void begin(const MethodContext& c) override {
    Method::begin(c);
    inner_.begin(c);
    decode_q_.assign(size_t(c.num_layers), {});
    decode_k_.assign(size_t(c.num_layers), {});
  }
  // q: [Hq, L, d], k, v: [Hkv, L, d].
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  LayerKV& kv) override {
    if (dump_qk_) {
      trace_.qk["layer" + std::to_string(layer) + ".prefill.q"] = q.to(at::kCPU, at::kFloat).contiguous();
      trace_.qk["layer" + std::to_string(layer) + ".prefill.k"] = k.to(at::kCPU, at::kFloat).contiguous();
    }
    inner_.on_prefill(layer, q, k, v, kv);
  }
  void after_prefill(std::vector<LayerKV>& layers) override {
    inner_.after_prefill(layers);
    trace_.kept.clear();
    for (const LayerKV& kv : layers) {
      trace_.kept.emplace_back();
      for (int h = 0; h < kv.num_heads(); ++h) trace_.kept.back().push_back(kv.positions(h));
    }
  }
  void on_decode_step(std::vector<LayerKV>& layers) override {
    inner_.on_decode_step(layers);
    trace_.attended.emplace_back(layers.size());
  }
  void on_attention_input(int layer, const at::Tensor& x, int64_t position) override {
    inner_.on_attention_input(layer, x, position);
  }
  // k, v: [Hkv, d].
  void on_append(int layer, const at::Tensor& k, const at::Tensor& v, LayerKV& kv) override {
    if (dump_qk_) decode_k_[size_t(layer)].push_back(k.to(at::kCPU, at::kFloat).clone());
    inner_.on_append(layer, k, v, kv);
  }
  // q: [Hq, d].
  Selection select(int layer, const at::Tensor& q, const LayerKV& kv) override {
    Selection s = inner_.select(layer, q, kv);
    if (dump_qk_) decode_q_[size_t(layer)].push_back(q.to(at::kCPU, at::kFloat).clone());
    auto& heads = trace_.attended.back()[size_t(layer)];
    const std::vector<std::vector<int64_t>> lists = s.all ? std::vector<std::vector<int64_t>>{} : s.lists();
    for (int h = 0; h < kv.num_heads(); ++h)
      heads.push_back(attended_positions(kv, lists, s.per_query_head, h, context_.group_size()));
    return s;
  }
  void on_attention(int layer, const Selection& selection, const std::vector<at::Tensor>& probs,
                    LayerKV& kv) override {
    inner_.on_attention(layer, selection, probs, kv);
  }
  bool wants_attention() const override { return inner_.wants_attention(); }
  std::map<std::string, double> counters() const override { return inner_.counters(); }

  // The decode steps' q and k stacked per layer into the trace: [steps, H, d].
  void finish() {
    for (size_t l = 0; l < decode_q_.size(); ++l) {
      if (decode_q_[l].empty()) continue;
      trace_.qk["layer" + std::to_string(l) + ".decode.q"] = at::stack(decode_q_[l]).contiguous();
      trace_.qk["layer" + std::to_string(l) + ".decode.k"] = at::stack(decode_k_[l]).contiguous();
    }
  }

 private:
  Method& inner_;
  bool dump_qk_;
  InspectTrace& trace_;
  std::vector<std::vector<at::Tensor>> decode_q_, decode_k_;  // [layer][step]
};

// A gnuplot single-quoted string on one line ('' is an escaped quote; control characters,
// a generated newline say, become spaces).
std::string gnuplot_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    const char shown = static_cast<unsigned char>(c) < 32 ? ' ' : c;
    out += c == '\'' ? std::string("''") : std::string(1, shown);
  }
  return out + "'";
}

// The heatmap: one row per (layer, KV head), prompt positions along x, the share of decode
// steps that attended each position; the needle's span shaded red.
std::string heatmap_script(const InspectTrace& trace, const json& about,
                           const std::optional<TokenSpan>& needle) {
  const int64_t bin = std::max<int64_t>(1, (trace.prompt_length + 767) / 768);
  const std::vector<std::vector<double>> share = attended_share(trace, bin);
  const int rows = int(share.size());
  const int height = std::clamp(140 + rows * 10, 260, 1400);
  char head[512];
  std::snprintf(head, sizeof(head),
                "set terminal pngcairo noenhanced size 900,%d font 'DejaVu Sans,10'\n"
                "set output 'attended.png'\n",
                height);
  std::string s = "# Written by kvbench inspect; re-render with: gnuplot attended.gp\n";
  s += head;
  s += "set title " + gnuplot_quoted(about.value("method_label", std::string("method")) +
                                     "  B=" + std::to_string(about.value("budget", int64_t(0))) +
                                     ": share of the " + std::to_string(trace.attended.size()) +
                                     " decode steps attending each prompt position") + "\n";
  std::string xlabel = "prompt position";
  if (about.contains("generated_text"))
    xlabel += "      generated: \"" + about["generated_text"].get<std::string>() + "\"";
  if (about.contains("dataset") && !about["dataset"]["answers"].empty())
    xlabel += "   answer: \"" + about["dataset"]["answers"][0].get<std::string>() + "\"";
  s += "set xlabel " + gnuplot_quoted(xlabel) + "\nset ylabel 'layer (one row per KV head)'\n";
  s += "set xrange [0:" + std::to_string(trace.prompt_length) + "]\nset yrange [" +
       std::to_string(rows) + "-0.5:-0.5]\n";  // layer 0 on top
  std::string tics;
  for (int l = 0; l < trace.layers; ++l)
    tics += (tics.empty() ? "" : ", ") + std::string("'") + std::to_string(l) + "' " +
            std::to_string(l * trace.kv_heads);
  s += "set ytics (" + tics + ")\nset cbrange [0:1]\nset cblabel 'share of decode steps'\n";
  s += "set palette defined (0 '#ffffff', 0.001 '#deebf7', 1 '#08306b')\n";
  for (int l = 1; l < trace.layers; ++l)  // a line between layers
    s += "set arrow from graph 0, first " + std::to_string(l * trace.kv_heads) +
         "-0.5 to graph 1, first " + std::to_string(l * trace.kv_heads) +
         "-0.5 nohead lc rgb '#999999' lw 0.5 front\n";
  if (needle)
    s += "set object 1 rect from " + std::to_string(needle->first) + ", graph 0 to " +
         std::to_string(needle->last + 1) +
         ", graph 1 front fs transparent solid 0.25 noborder fc rgb '#d62728'\n"
         "set label 1 'needle' at " + std::to_string(needle->last + 1) +
         ", graph 1.02 tc rgb '#d62728' front\n";
  s += "$m << EOD\n";
  for (const auto& row : share) {
    for (size_t i = 0; i < row.size(); ++i) {
      char v[32];
      std::snprintf(v, sizeof(v), "%s%.4g", i ? " " : "", row[i]);
      s += v;
    }
    s += "\n";
  }
  s += "EOD\n";
  s += "plot $m matrix using (($1 + 0.5) * " + std::to_string(bin) +
       "):2:3 with image notitle\nunset output\n";
  return s;
}

// Renders <dir>/attended.gp with gnuplot; false (and a note on stderr) when it is missing.
bool render_heatmap(const std::string& dir, const std::string& gnuplot_name) {
  std::string gnuplot;
  try {
    gnuplot = find_gnuplot(gnuplot_name);
  } catch (const InputError& e) {
    std::cerr << "note: " << e.what() << ": attended.png not rendered (attended.gp kept)\n";
    return false;
  }
  const std::string command = "cd " + shell_quote(dir) + " && " + shell_quote(gnuplot) +
                              " attended.gp 2> attended.log";
  if (std::system(command.c_str()) != 0 || !fs::exists(dir + "/attended.png"))
    throw std::runtime_error("gnuplot failed on " + dir + "/attended.gp (log: " + dir +
                             "/attended.log)");
  fs::remove(dir + "/attended.log");
  return true;
}

}  // namespace

InspectTrace run_inspect(const LlamaModel& model, Method& method, const InspectRequest& request) {
  InspectTrace trace;
  trace.layers = model.config.num_hidden_layers;
  trace.kv_heads = model.config.num_key_value_heads;
  trace.query_heads = model.config.num_attention_heads;
  trace.prompt_length = int64_t(request.prompt.size());
  Recorder recorder(method, request.dump_qk, trace);
  const ModelView view(model, request.cache_dir);
  Session session(model, recorder,
                  SessionOptions{.budget = request.budget, .model_view = &view});
  at::Tensor logits = session.prefill(request.prompt);
  for (int t = 0; t < request.steps; ++t) {
    trace.generated.push_back(argmax_token(logits));
    logits = session.decode(trace.generated.back());
  }
  recorder.finish();
  return trace;
}

std::optional<TokenSpan> find_token_span(const Tokenizer& tokenizer, const std::vector<int>& ids,
                                         const std::string& text) {
  if (text.empty()) return std::nullopt;
  const size_t at = tokenizer.decode(ids).find(text);
  if (at == std::string::npos) return std::nullopt;
  // The first prefix of ids whose decoded text is longer than `chars`.
  auto first_past = [&](size_t chars) {
    int64_t lo = 1, hi = int64_t(ids.size());
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      const std::string prefix = tokenizer.decode(std::vector<int>(ids.begin(), ids.begin() + mid));
      if (prefix.size() > chars) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  return TokenSpan{first_past(at) - 1, first_past(at + text.size() - 1) - 1};
}

std::vector<std::vector<double>> attended_share(const InspectTrace& trace, int64_t bin) {
  const int64_t cols = (trace.prompt_length + bin - 1) / bin;
  std::vector<std::vector<double>> out(size_t(trace.layers * trace.kv_heads),
                                       std::vector<double>(size_t(cols), 0.0));
  if (trace.attended.empty()) return out;
  const double weight = 1.0 / double(trace.attended.size());
  for (const auto& step : trace.attended)
    for (int l = 0; l < trace.layers; ++l)
      for (int h = 0; h < trace.kv_heads; ++h)
        for (int64_t p : step[size_t(l)][size_t(h)]) {
          if (p >= trace.prompt_length) continue;  // decode tokens are not on the prompt axis
          const int64_t width = std::min(bin, trace.prompt_length - p / bin * bin);
          out[size_t(l * trace.kv_heads + h)][size_t(p / bin)] += weight / double(width);
        }
  return out;
}

json inspect_json(const InspectTrace& trace, const json& about,
                  const std::optional<TokenSpan>& needle) {
  json j = about;
  j["layers"] = trace.layers;
  j["kv_heads"] = trace.kv_heads;
  j["query_heads"] = trace.query_heads;
  j["prompt_length"] = trace.prompt_length;
  j["generated_tokens"] = trace.generated;
  j["needle"] = needle ? json{{"first", needle->first}, {"last", needle->last}} : json(nullptr);
  j["kept_after_prefill"] = trace.kept;
  j["steps"] = json::array();
  for (size_t t = 0; t < trace.attended.size(); ++t)
    j["steps"].push_back({{"step", t + 1},
                          {"position", trace.prompt_length + int64_t(t)},
                          {"attended", trace.attended[t]}});
  return j;
}

std::vector<std::string> write_inspect(const InspectTrace& trace, const json& about,
                                       const std::optional<TokenSpan>& needle,
                                       const std::string& dir, const std::string& gnuplot) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create the output folder: " + ec.message());
  const std::string abs = fs::absolute(dir).string();
  std::vector<std::string> written;
  {
    std::ofstream out(abs + "/attended.json");
    if (!out) throw InputError(dir + "/attended.json: cannot write");
    out << inspect_json(trace, about, needle).dump() << "\n";
  }
  written.push_back(dir + "/attended.json");
  std::ofstream(abs + "/attended.gp") << heatmap_script(trace, about, needle);
  written.push_back(dir + "/attended.gp");
  if (render_heatmap(abs, gnuplot)) written.push_back(dir + "/attended.png");
  if (!trace.qk.empty()) {
    write_safetensors(abs + "/qk.safetensors", trace.qk, {{"written_by", "kvbench inspect"}});
    written.push_back(dir + "/qk.safetensors");
  }
  return written;
}

}  // namespace kvb
