// kvbench generate / forward: run the engine on one prompt, for checks against other
// implementations.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/json_fields.h"
#include "engine/device.h"
#include "engine/op_profile.h"
#include "engine/session.h"
#include "engine/tokenizer/tokenizer.h"
#include "methods/method.h"

namespace kvb {

std::vector<int> parse_token_list(const std::string& text) {
  std::vector<int> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw InputError("--tokens: \"" + item + "\" is not an integer token id");
    }
  }
  if (ids.empty()) throw InputError("--tokens: empty list");
  return ids;
}

void check_token_ids(const std::vector<int>& ids, int64_t vocab_size) {
  for (int id : ids)
    if (id < 0 || id >= vocab_size)
      throw InputError("--tokens: token id " + std::to_string(id) +
                       " is outside the model's vocabulary [0, " + std::to_string(vocab_size) +
                       ")");
}

namespace {

// The prompt's ids in --chat-template: a built-in template's text encoded with the tokenizer's
// special tokens, or for "auto" the model's own template (tokenizer_config.json's or
// chat_template.jinja's) as transformers' apply_chat_template (tokenize=True) encodes it: its
// text as rendered, nothing added. A model with none (where transformers raises) gets the prompt
// as `none` does, with a note.
std::vector<int> prompt_ids(const std::string& chat_template, const LlamaModel& model,
                            const std::string& prompt) {
  if (chat_template == "auto") {
    if (detect_chat_template(model.tokenizer_config) == "none") {
      std::cerr << "note: --chat-template auto: the model has no chat template "
                   "(tokenizer_config.json, chat_template.jinja), so the prompt is encoded as "
                   "with none\n";
      return model.tokenizer->encode(prompt, /*add_special=*/true);
    }
    const std::string text =
        render_model_chat_template(model.tokenizer_config, prompt, model.chat_template_file);
    return model.tokenizer->encode(text, /*add_special=*/false);
  }
  check_chat_template_tokens(chat_template, *model.tokenizer, "--chat-template " + chat_template);
  return model.tokenizer->encode(apply_chat_template(chat_template, prompt), /*add_special=*/true);
}

// generate --profile: decode steps run before the profiler starts (first calls, allocations).
constexpr int kProfileWarmupSteps = 8;

// A profile file named by `option`, before the run: one that can be written (or none named).
void check_writable(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  if (!std::ofstream(tmp)) throw InputError(option + " " + path + ": cannot write");
  std::remove(tmp.c_str());
}

// generate --profile FILE, before the run: enough steps, a file that can be written.
void check_profile_option(const std::string& path, int max_new) {
  if (path.empty()) return;
  if (max_new <= kProfileWarmupSteps)
    throw InputError("--profile: needs --max-new > " + std::to_string(kProfileWarmupSteps) +
                     " (the first " + std::to_string(kProfileWarmupSteps) +
                     " steps are not recorded)");
  check_writable(path, "--profile");
}

// The profile's rows to `path` (TSV, written whole or not at all) and its summary to stderr,
// headed by `what`.
void write_profile(const std::vector<ProfileRow>& rows, const std::string& path,
                   const std::string& what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp);
    if (!(file << profile_tsv(rows))) throw InputError(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError(path + ": cannot write");
  std::cerr << "profile of " << what << " (" << path << "):\n" << profile_summary(rows, 25);
}

// The prefill of `prompt` under the profiler (its rows: generate --profile-prefill), then
// its next-token logits.
at::Tensor prefill_profiled(Session& session, const std::vector<int>& prompt, bool cuda,
                            const std::string& path) {
  if (path.empty()) return session.prefill(prompt);
  OpProfile profile(cuda);
  at::Tensor logits = session.prefill(prompt);
  write_profile(profile.finish(1, "", nullptr), path, "the prefill");
  return logits;
}

// Greedy decoding of max_new tokens from `logits`, each fed (no stop: every step is one
// measured), the steps after kProfileWarmupSteps under the profiler; its tables to `path` (TSV)
// and stderr, its Chrome trace to path + ".trace.json" where this LibTorch can write one.
std::vector<int> decode_profiled(Session& session, at::Tensor logits, int max_new, bool cuda,
                                 const std::string& path) {
  std::vector<int> ids;
  std::unique_ptr<OpProfile> profile;
  for (int i = 0; i < max_new; ++i) {
    if (i == kProfileWarmupSteps) profile = std::make_unique<OpProfile>(cuda);
    ids.push_back(argmax_token(logits));
    logits = session.decode(ids.back());
  }
  std::string trace_note;
  const std::vector<ProfileRow> rows =
      profile->finish(max_new - kProfileWarmupSteps, path + ".trace.json", &trace_note);
  write_profile(rows, path, "decode steps " + std::to_string(kProfileWarmupSteps + 1) + ".." +
                                std::to_string(max_new));
  if (!trace_note.empty()) std::cerr << "no Chrome trace: " << trace_note << "\n";
  return ids;
}

}  // namespace

std::shared_ptr<LlamaModel> load_for_cli(const std::string& reference,
                                         const ComputeOptions& compute,
                                         bool allow_unknown_config_keys) {
  LoadOptions options;
  options.dtype = parse_dtype(compute.dtype, "--dtype");
  options.device = parse_device(compute.device, "--device");
  options.allow_unknown_config_keys = allow_unknown_config_keys;
  check_dtype_on_device(options.dtype, options.device, "--dtype");
  auto model = LlamaModel::from_reference(reference, options);
  for (const std::string& warning : model->unknown_key_warnings())
    std::cerr << "warning: " << warning << "\n";
  return model;
}

void add_compute_options(CLI::App* cmd, ComputeOptions& options) {
  cmd->add_option("--device", options.device, "cpu (default), cuda or cuda:N (a build against "
                                              "a CUDA LibTorch; README: On a GPU machine)");
  cmd->add_option("--dtype", options.dtype, "Compute dtype: f32 (default), bf16, f16 (weights "
                                            "are converted from the checkpoint's dtype on load; "
                                            "softmax and attention accumulate in fp32)");
}

void add_model_commands(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string model, prompt, tokens, out_path, method = "full", chat_template = "none",
                cache_dir, profile_path, profile_prefill_path;
    ComputeOptions compute;
    int max_new = 64, threads = 0;
    int64_t budget = 0;
    bool all_positions = false, allow_unknown_config_keys = false, cuda_graphs = false;
  };
  auto o = std::make_shared<Options>();

  CLI::App* gen = app.add_subcommand("generate", "Greedy generation from a prompt; prints the "
                                                 "continuation and tokens/s");
  add_model_option(gen, o->model);
  gen->add_option("--prompt", o->prompt, "Prompt text (BOS is added as the tokenizer says)")->required();
  gen->add_option("--max-new", o->max_new,
                  "Maximum new tokens (default 64; stops earlier on EOS)")
      ->check(positive());
  gen->add_option("--method", o->method, "KV method or method:preset (default full; see `kvbench list methods`)");
  gen->add_option("--budget", o->budget, "Budget B for the method")->check(non_negative());
  std::vector<std::string> templates = chat_template_names();  // "none" first, then "auto"
  templates.insert(templates.begin() + 1, "auto");
  std::string template_help =
      "none (default), auto (the model's own: tokenizer_config.json's or chat_template.jinja's, "
      "rendered as transformers does)";
  for (size_t i = 2; i < templates.size(); ++i) template_help += ", " + templates[i];
  gen->add_option("--chat-template", o->chat_template, template_help)->check(one_of(templates));
  gen->add_option("--threads", o->threads, "CPU threads (default: all cores)")
      ->check(thread_count());
  add_compute_options(gen, o->compute);
  add_cache_dir_option(gen, o->cache_dir);
  add_allow_unknown_config_keys_flag(gen, o->allow_unknown_config_keys);
  add_cuda_graphs_flag(gen, o->cuda_graphs);
  gen->add_option("--profile", o->profile_path,
                  "Record the decode steps after the first 8 with the PyTorch profiler: each "
                  "operator's host time and, on a GPU, each kernel's device time, per step and "
                  "session phase, into this TSV file (and a Chrome trace, FILE.trace.json, where "
                  "the LibTorch has Kineto); every token is fed, none stops the run; needs "
                  "--max-new > 8");
  gen->add_option("--profile-prefill", o->profile_prefill_path,
                  "Record the prefill with the PyTorch profiler, as --profile records decode "
                  "steps, into this TSV file (phases prefill, prefill_attention and "
                  "prefill_method; no Chrome trace)");
  out.push_back({gen, [o] {
    check_cuda_graphs_flag(o->cuda_graphs);
    check_profile_option(o->profile_path, o->max_new);
    check_writable(o->profile_prefill_path, "--profile-prefill");
    const MethodChoice choice =
        resolve_method(o->method, json::object(), "--method", "--method " + o->method);
    const MethodInfo& info = *choice.info;
    const json& config = choice.config;
    if (info.uses_budget && o->budget <= 0)
      throw InputError("--budget: method " + o->method + " needs a budget > 0");
    if (!info.uses_budget && o->budget > 0)
      throw InputError("--budget: method " + o->method + " takes no budget");
    if (info.uses_budget) info.check_budget(config, o->budget, "--method " + o->method);
    configure_threads(o->threads);
    auto model = load_for_cli(o->model, o->compute, o->allow_unknown_config_keys);
    std::unique_ptr<Method> method = info.create(config);
    const ModelView view(*model, o->cache_dir);
    Session session(*model, *method, SessionOptions{.budget = o->budget, .model_view = &view,
                                                    .cuda_graphs = o->cuda_graphs});
    const std::vector<int> prompt = prompt_ids(o->chat_template, *model, o->prompt);
    std::vector<int> stop = model->tokenizer->eos_ids();
    stop.insert(stop.end(), model->config.eos_token_ids.begin(), model->config.eos_token_ids.end());
    const bool cuda = model->device().is_cuda();
    at::Tensor logits = prefill_profiled(session, prompt, cuda, o->profile_prefill_path);
    const std::vector<int> ids =
        o->profile_path.empty()
            ? session.generate_from(logits, o->max_new, stop)
            : decode_profiled(session, logits, o->max_new, cuda, o->profile_path);
    std::cout << model->tokenizer->decode(ids) << "\n";
    const SessionTimings& t = session.timings();
    std::cerr << "prompt " << prompt.size() << " tokens: prefill " << t.prefill_s << " s ("
              << prompt.size() / std::max(t.prefill_s, 1e-9) << " tok/s"
              << (t.method_setup_s >= 1e-3
                      ? "; the method's set-up before it " + std::to_string(t.method_setup_s) + " s"
                      : std::string())
              << "); " << ids.size()
              << " new tokens: decode " << t.decode_steps / std::max(t.decode_s, 1e-9)
              << " tok/s";
    if (t.decode_steps > 0 && t.syncs_counted)  // on a GPU: is the host what the device waits on?
      std::cerr << " (host " << 1e3 * t.decode_host_s / double(t.decode_steps)
                << " ms/token until its wait, "
                << double(t.decode_syncs) / double(t.decode_steps) << " device syncs/token)";
    if (o->cuda_graphs)
      std::cerr << "; " << t.graph_steps << " steps through CUDA graphs, captured in "
                << t.graph_capture_s << " s after the prefill";
    std::cerr << "\n";
    return 0;
  }});

  CLI::App* fwd = app.add_subcommand("forward", "Run token ids through the model and write the "
                                                "logits as JSON");
  add_model_option(fwd, o->model);
  fwd->add_option("--tokens", o->tokens, "Comma-separated token ids, e.g. 1,403,407")->required();
  fwd->add_option("--out", o->out_path, "Output JSON file: {\"tokens\", \"logits\"}")->required();
  fwd->add_flag("--all-positions", o->all_positions,
                "Write logits for every position ([L][V]) instead of the last one ([V])");
  fwd->add_option("--threads", o->threads, "CPU threads (default: all cores)")
      ->check(thread_count());
  add_compute_options(fwd, o->compute);
  add_allow_unknown_config_keys_flag(fwd, o->allow_unknown_config_keys);
  out.push_back({fwd, [o] {
    const std::vector<int> ids = parse_token_list(o->tokens);  // refused before the model loads
    configure_threads(o->threads);
    auto model = load_for_cli(o->model, o->compute, o->allow_unknown_config_keys);
    check_token_ids(ids, model->config.vocab_size);
    Method uncompressed;  // the hooks' defaults: the model's own forward pass
    Session session(*model, uncompressed, SessionOptions{});
    at::Tensor logits = session.prefill(ids, o->all_positions).to(at::kCPU, at::kDouble).contiguous();
    if (!at::isfinite(logits).all().item<bool>())  // JSON has no NaN or infinity: they'd be null
      throw InputError(o->model + ": the logits hold NaN or infinite values (non-finite weights "
                       "or activations); nothing written");
    json j;
    j["tokens"] = ids;
    if (o->all_positions) {
      j["logits"] = json::array();
      for (int64_t i = 0; i < logits.size(0); ++i) {
        at::Tensor row = logits[i].contiguous();
        j["logits"].push_back(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()));
      }
    } else {
      j["logits"] = std::vector<double>(logits.data_ptr<double>(), logits.data_ptr<double>() + logits.numel());
    }
    write_file_atomically(o->out_path, j.dump() + "\n");
    return 0;
  }});
}

}  // namespace kvb
