// kvbench inspect: what each KV head attends to, per layer and decode step, for one sequence
// (reports/inspect.h): attended.json, a heatmap PNG, and optionally the post-RoPE q/k.
#include <iostream>

#include "datasets/dataset.h"
#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/json_fields.h"
#include "harness/runner/runner.h"
#include "reports/inspect.h"

namespace kvb {
namespace {

struct InspectOptions {
  std::string model, method = "full", prompt, tokens, dataset, dataset_params = "{}", out;
  std::string needle, gnuplot = "gnuplot", cache_dir;
  ComputeOptions compute;
  int64_t budget = 0;
  int sample = 0, steps = 8, threads = 0;
  uint64_t seed = 0;
  bool dump_qk = false, allow_unknown_config_keys = false;
};

// The prompt ids and the text to mark (the needle), from exactly one of the three sources.
std::vector<int> prompt_ids(const InspectOptions& o, const LlamaModel& model, std::string& mark,
                            json& about) {
  const int given = !o.prompt.empty() + !o.tokens.empty() + !o.dataset.empty();
  if (given != 1) throw InputError("inspect: give exactly one of --prompt, --tokens, --dataset");
  if (o.dataset.empty() && (o.dataset_params != "{}" || o.sample != 0 || o.seed != 0))
    throw InputError("inspect: --dataset-params, --sample and --seed choose a sample of "
                     "--dataset, which " + std::string(o.prompt.empty() ? "--tokens" : "--prompt") +
                     " replaces");
  if (!o.tokens.empty()) {
    std::vector<int> ids = parse_token_list(o.tokens);
    check_token_ids(ids, model.config.vocab_size);
    return ids;
  }
  if (!o.prompt.empty()) return model.tokenizer->encode(o.prompt, /*add_special=*/true);
  const DatasetInfo& info = dataset_registry().get(o.dataset, "--dataset");
  const json params = info.normalise_params(parse_json_object(o.dataset_params, "--dataset-params"),
                                            "--dataset-params");
  const std::vector<Sample> samples = info.create(params)->samples(*model.tokenizer, o.seed);
  if (o.sample < 0 || o.sample >= int(samples.size()))
    throw InputError("--sample: " + std::to_string(o.sample) + " is not a sample of " +
                     o.dataset + " (it has " + std::to_string(samples.size()) + ")");
  const Sample& s = samples[size_t(o.sample)];
  about["dataset"] = {{"name", o.dataset}, {"params", params}, {"sample", o.sample}, {"id", s.id},
                      {"answers", s.answers}};
  if (mark.empty() && !s.answers.empty()) mark = s.answers[0];  // needle tasks: the needle's value
  return encode_prompt(model, s);
}

}  // namespace

void add_inspect_command(CLI::App& app, std::vector<Command>& out) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Run one sequence and record, per layer, KV head and decode step, the prompt "
                 "positions each head attends to (attended.json, attended.png heatmap)");
  add_model_option(cmd, o->model);
  cmd->add_option("--method", o->method, "KV method or method:preset (default full; see "
                                         "`kvbench list methods`)");
  cmd->add_option("--budget", o->budget, "Budget B for the method")->check(non_negative());
  cmd->add_option("--prompt", o->prompt, "Prompt text (BOS added as the tokenizer says)");
  cmd->add_option("--tokens", o->tokens, "Prompt as comma-separated token ids, e.g. 1,403,407");
  cmd->add_option("--dataset", o->dataset, "A dataset (`kvbench list datasets`); with --sample");
  cmd->add_option("--dataset-params", o->dataset_params,
                  "The dataset's params as a JSON object, e.g. '{\"context_length\": 1024}'");
  cmd->add_option("--sample", o->sample, "Which sample of --dataset (0-based, default 0)");
  cmd->add_option("--seed", o->seed, "Dataset seed (default 0, as the suites)");
  cmd->add_option("--needle", o->needle, "Text whose token span is marked on the heatmap "
                                         "(default with --dataset: the sample's first answer, "
                                         "when the prompt contains it)");
  cmd->add_option("--steps", o->steps, "Greedy decode steps recorded (default 8)")
      ->check(positive());
  cmd->add_option("--out", o->out, "Output folder")->required();
  cmd->add_flag("--dump-qk", o->dump_qk, "Also write qk.safetensors: every layer's post-RoPE "
                                         "q and k of the prompt and of each decode step (fp32)");
  cmd->add_option("--gnuplot", o->gnuplot,
                  "gnuplot binary: a path, or a name looked up in PATH (default gnuplot)");
  cmd->add_option("--threads", o->threads, "CPU threads (default: all cores)")
      ->check(thread_count());
  add_compute_options(cmd, o->compute);
  add_cache_dir_option(cmd, o->cache_dir);
  add_allow_unknown_config_keys_flag(cmd, o->allow_unknown_config_keys);
  out.push_back({cmd, [o] {
    const MethodChoice choice =
        resolve_method(o->method, json::object(), "--method", "--method " + o->method);
    if (choice.info->uses_budget && o->budget <= 0)
      throw InputError("--budget: method " + o->method + " needs a budget > 0");
    if (!choice.info->uses_budget && o->budget > 0)
      throw InputError("--budget: method " + o->method + " takes no budget");
    if (choice.info->uses_budget)
      choice.info->check_budget(choice.config, o->budget, "--method " + o->method);
    configure_threads(o->threads);
    auto model = load_for_cli(o->model, o->compute, o->allow_unknown_config_keys);
    json about = {{"model", o->model}, {"method", choice.info->name}, {"method_label", o->method},
                  {"preset", choice.preset}, {"config", choice.config}, {"budget", o->budget}};
    std::string mark = o->needle;
    InspectRequest request;
    request.prompt = prompt_ids(*o, *model, mark, about);
    request.budget = choice.info->uses_budget ? o->budget : 0;
    request.steps = o->steps;
    request.dump_qk = o->dump_qk;
    request.cache_dir = o->cache_dir;
    about["prompt_tokens"] = request.prompt;
    std::unique_ptr<Method> method = choice.info->create(choice.config);
    const InspectTrace trace = run_inspect(*model, *method, request);
    about["generated_text"] = model->tokenizer->decode(trace.generated);
    const std::optional<TokenSpan> needle =
        find_token_span(*model->tokenizer, request.prompt, mark);
    if (!mark.empty() && !needle)
      std::cerr << "note: \"" << mark << "\" is not in the prompt; no needle marked\n";
    for (const std::string& file : write_inspect(trace, about, needle, o->out, o->gnuplot))
      std::cout << file << "\n";
    return 0;
  }});
}

}  // namespace kvb
