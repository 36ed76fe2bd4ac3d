// kvbench samples SUITE: the prompts a suite's cells would feed the model, as the runner builds
// them (dataset, chat template, BOS), with their token counts and reference answers, so that a
// suite can be checked before it runs. Loads each model's tokenizer only, never its weights.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/common/shared_folder.h"
#include "engine/model/llama_model.h"
#include "harness/runner/runner.h"

namespace kvb {

namespace {

struct SamplesOptions {
  std::string suite, dataset, model;
  std::vector<std::string> overrides;
  std::optional<uint64_t> seed;
  int samples = 1;
  int chars = 300;
  bool full = false, json = false, allow_unknown_config_keys = false;
};

// The cells that build the same prompts: methods, budgets, devices and dtypes do not change
// them. The first cell of each group stands for it.
std::vector<Cell> prompt_groups(const std::vector<Cell>& cells, const SamplesOptions& o) {
  std::vector<Cell> groups;
  std::set<std::string> seen;
  for (const Cell& c : cells) {
    if (!o.dataset.empty() && c.dataset.name != o.dataset) continue;
    if (!o.model.empty() && c.model != o.model) continue;
    if (o.seed && c.seed != *o.seed) continue;
    const json key = {c.model, c.dataset.name, c.dataset.params, c.seed, c.max_new_tokens,
                      c.context_sharing};
    if (seen.insert(key.dump()).second) groups.push_back(c);
  }
  return groups;
}

// The values a filter could have taken, for the message when it matches nothing.
std::string choices(const std::vector<Cell>& cells, std::string (*value)(const Cell&)) {
  std::set<std::string> values;
  for (const Cell& c : cells) values.insert(value(c));
  return join(std::vector<std::string>(values.begin(), values.end()), ", ");
}

void check_filters_match(const std::vector<Cell>& cells, const SamplesOptions& o) {
  const auto refuse = [&](const std::string& option, const std::string& given,
                          std::string (*value)(const Cell&)) {
    throw InputError(option + ": '" + given + "' is in none of the suite's cells (it has: " +
                     choices(cells, value) + ")");
  };
  const auto any = [&](auto matches) { return std::any_of(cells.begin(), cells.end(), matches); };
  if (!o.dataset.empty() && !any([&](const Cell& c) { return c.dataset.name == o.dataset; }))
    refuse("--dataset", o.dataset, [](const Cell& c) { return c.dataset.name; });
  if (!o.model.empty() && !any([&](const Cell& c) { return c.model == o.model; }))
    refuse("--model", o.model, [](const Cell& c) { return c.model; });
  if (o.seed && !any([&](const Cell& c) { return c.seed == *o.seed; }))
    refuse("--seed", std::to_string(*o.seed), [](const Cell& c) { return std::to_string(c.seed); });
}

// The bytes of `text` before `at`, moved back to the start of a UTF-8 character.
size_t character_start(const std::string& text, size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

size_t characters_in(const std::string& text) {
  return size_t(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// `text` whole, or its first and last `keep` bytes (whole characters) with what is left out
// said between them. Whole too when less than 200 bytes would be left out: the marker would
// hide little.
std::string abbreviated(const std::string& text, int keep, bool full) {
  const size_t k = size_t(std::max(keep, 0));
  if (full || text.size() <= 2 * k + 200) return text;
  const size_t head_end = character_start(text, k);
  const size_t tail_begin = character_start(text, text.size() - k);
  const std::string left_out = text.substr(head_end, tail_begin - head_end);
  return text.substr(0, head_end) + "\n[... " + std::to_string(characters_in(left_out)) +
         " characters left out (--full shows them) ...]\n" + text.substr(tail_begin);
}

// The chat template the runner wraps the sample's prompt in, for this model. A dataset may
// have wrapped the prompt itself already (a named chat_template param of RULER or LongBench):
// that shows in its params and its text, not here.
std::string template_description(const LlamaModel& model, const Sample& sample) {
  const ChatTemplateChoice choice = chat_template_choice(model, sample);
  if (!choice.automatic) return choice.name;
  if (choice.family == "none") return "auto: the model has no chat template";
  const std::string own = "auto: the model's own (" + choice.family + " family)";
  if (choice.as_text)
    return own + ", rendered as text and encoded with its BOS again for this dataset";
  if (choice.own) return own;
  return own + ", " + (choice.applied() ? "as " + choice.name : "left unwrapped") +
         " for this dataset";
}

std::string quoted_list(const std::vector<std::string>& answers) {
  std::vector<std::string> quoted;
  for (const std::string& a : answers) quoted.push_back(json(a).dump());
  return quoted.empty() ? "(none)" : join(quoted, " | ");
}

// The ids that end the sample's answer, as the runner stops it (runner.h stop_ids), and the
// script's rules around them: "the model's EOS ids" or "the tokenizer's eos_token alone", the
// stop texts, each id with its text, then min_new_tokens (the ids suppressed, as
// transformers' min_length does) and unchecked_new_tokens.
std::string stop_rule(const LlamaModel& model, const Sample& s) {
  std::string rule = stops_at_eos_token_alone(model, s) ? "the tokenizer's eos_token alone"
                                                       : "the model's EOS ids";
  if (!s.stop_texts.empty()) rule += " and " + quoted_list(s.stop_texts);
  std::vector<std::string> shown;
  for (int id : stop_ids(model, s))
    shown.push_back(std::to_string(id) + " " + json(model.tokenizer->decode({id}, false)).dump());
  rule += " (ids " + join(shown, ", ") + ")";
  if (s.min_new_tokens > 0)
    rule += "; suppressed in the first " + std::to_string(s.min_new_tokens) + " generated token(s)";
  if (s.unchecked_new_tokens > 0)
    rule += "; the first " + std::to_string(s.unchecked_new_tokens) +
            " generated token(s) not compared with them (generated on)";
  return rule;
}

// What the runner adds to the sample's own tokens: encode(text, add_special = true)'s, or, for
// a sample that gives its tokens, the tokenizer's prefix alone.
std::string special_tokens(const Tokenizer& tokenizer, const Sample& sample) {
  const bool bos = tokenizer.add_bos_by_default();
  const bool eos = tokenizer.adds_eos() && sample.prompt_ids.empty();
  if (bos && eos) return "BOS and EOS included";
  if (bos || eos) return std::string(bos ? "BOS" : "EOS") + " included";
  return "the tokenizer adds no BOS";
}

struct SampleView {
  const Sample* sample;
  std::string text;       // prompt_text: what is encoded
  int64_t tokens = 0;     // encode_prompt's count, BOS included
  int64_t context_tokens = -1, question_tokens = -1;  // under context_sharing per_sample
  int max_new_tokens = 0;
};

SampleView view_of(const LlamaModel& model, const Cell& cell, const Sample& sample) {
  SampleView v{.sample = &sample, .text = prompt_text(model, sample)};
  const std::vector<int> prompt = encode_prompt(model, sample);
  v.tokens = int64_t(prompt.size());
  if (cell.context_sharing == "per_sample") {
    const SplitPrompt split = split_prompt(model, sample);
    v.context_tokens = int64_t(split.context.size());
    v.question_tokens = int64_t(split.question.size());
  }
  v.max_new_tokens = cell.max_new_tokens > 0 ? cell.max_new_tokens : sample.max_new_tokens;
  return v;
}

// A follow-up turn's sample id in the results database, as the runner names it.
std::string turn_id(const Sample& s, size_t turn) { return s.id + ".turn" + std::to_string(turn + 2); }

json to_json(const SampleView& v, const LlamaModel& model) {
  const Sample& s = *v.sample;
  json j = {{"id", s.id},
            {"prompt_tokens", v.tokens},
            {"prompt_text", v.text},
            {"runner_chat_template", template_description(model, s)},
            {"answers", s.answers},
            {"max_new_tokens", v.max_new_tokens},
            {"min_new_tokens", s.min_new_tokens},
            {"stop_texts", s.stop_texts},
            {"meta", s.meta}};
  if (s.reference_continuation.empty()) {
    j["stop_ids"] = stop_ids(model, s);
    j["stops_at_eos_token_only"] = stops_at_eos_token_alone(model, s);  // for this model
    j["unchecked_new_tokens"] = s.unchecked_new_tokens;
  }
  if (v.context_tokens >= 0) {
    j["context_tokens"] = v.context_tokens;
    j["question_tokens"] = v.question_tokens;
  }
  if (!s.context_id.empty()) j["context_id"] = s.context_id;
  if (!s.reference_continuation.empty()) j["reference_continuation"] = s.reference_continuation;
  // The text of a sample that gives its tokens is for reading: they are what is fed.
  if (!s.prompt_ids.empty()) j["prompt_ids"] = s.prompt_ids;
  if (!s.continuation_ids.empty()) j["continuation_ids"] = s.continuation_ids;
  for (size_t t = 0; t < s.follow_ups.size(); ++t) {
    const Sample::Turn& turn = s.follow_ups[t];
    j["follow_ups"].push_back({{"id", turn_id(s, t)},
                               {"text", turn.text},
                               {"answers", turn.answers},
                               {"max_new_tokens", turn.max_new_tokens}});
  }
  return j;
}

void print(const SampleView& v, const LlamaModel& model, const SamplesOptions& o) {
  const Sample& s = *v.sample;
  std::cout << "-- sample " << s.id << ": " << v.tokens << " prompt tokens ("
            << special_tokens(*model.tokenizer, s) << ")";
  if (v.context_tokens >= 0)
    std::cout << " = context " << v.context_tokens << " + question " << v.question_tokens;
  if (s.reference_continuation.empty())
    std::cout << ", answer up to " << v.max_new_tokens << " tokens\n";
  else if (!s.continuation_ids.empty())
    std::cout << ", then its " << s.continuation_ids.size() << " continuation tokens are scored\n";
  else
    std::cout << ", then its reference continuation is scored\n";
  if (s.reference_continuation.empty()) {
    std::cout << "answers: " << quoted_list(s.answers) << "\n";
    std::cout << "stops at: " << stop_rule(model, s) << "\n";
  }
  if (!s.meta.empty()) std::cout << "meta: " << s.meta.dump() << "\n";
  if (s.prompt_ids.empty())
    std::cout << "prompt (the runner's chat template: " << template_description(model, s) << "):\n";
  else
    std::cout << "prompt (its tokens decoded, for reading; the tokens are what is fed):\n";
  std::cout << abbreviated(v.text, o.chars, o.full) << "\n";
  if (!s.reference_continuation.empty())
    std::cout << "reference continuation:\n" << abbreviated(s.reference_continuation, o.chars, o.full)
              << "\n";
  for (size_t t = 0; t < s.follow_ups.size(); ++t)
    std::cout << "follow-up " << turn_id(s, t) << " (answers " << quoted_list(s.follow_ups[t].answers)
              << ", up to " << s.follow_ups[t].max_new_tokens << " tokens):\n"
              << abbreviated(s.follow_ups[t].text, o.chars, o.full) << "\n";
}

struct PromptLengths {
  int64_t min = 0, max = 0;
  double mean = 0;
};

PromptLengths lengths_of(const std::vector<SampleView>& views) {
  PromptLengths l;
  if (views.empty()) return l;
  l.min = views.front().tokens;
  for (const SampleView& v : views) {
    l.min = std::min(l.min, v.tokens);
    l.max = std::max(l.max, v.tokens);
    l.mean += double(v.tokens) / double(views.size());
  }
  return l;
}

std::string group_title(const Cell& c) {
  std::string title = c.dataset.name + " " + c.dataset.params.dump() + " · model " + c.model +
                      " · seed " + std::to_string(c.seed);
  if (c.context_sharing != "none") title += " · context_sharing " + c.context_sharing;
  if (c.max_new_tokens > 0) title += " · max_new_tokens " + std::to_string(c.max_new_tokens);
  return title;
}

// The group's samples; a dataset's error names the group, which a suite may hold several of.
std::vector<Sample> samples_of(const Dataset& dataset, const LlamaModel& model, const Cell& cell) {
  try {
    return dataset.samples(*model.tokenizer, cell.seed);
  } catch (const InputError& e) {
    throw InputError(group_title(cell) + ": " + e.what());
  }
}

int run_samples(const SamplesOptions& o) {
  const Suite suite = load_suite(o.suite, o.overrides);
  const std::vector<Cell> cells = suite.cells();
  check_filters_match(cells, o);
  std::map<std::string, std::shared_ptr<LlamaModel>> models;  // tokenizers only
  LoadOptions load;
  load.weights = false;
  load.allow_unknown_config_keys = o.allow_unknown_config_keys;
  json out = json::array();
  for (const Cell& cell : prompt_groups(cells, o)) {
    std::shared_ptr<LlamaModel>& model = models[cell.model];
    if (!model) {
      model = LlamaModel::from_reference(cell.model, load);
      for (const std::string& warning : model->unknown_key_warnings())
        std::cerr << "warning: " << warning << "\n";
    }
    const std::unique_ptr<Dataset> dataset =
        dataset_registry().get(cell.dataset.name, "cell").create(cell.dataset.params);
    const std::vector<Sample> samples = samples_of(*dataset, *model, cell);
    std::vector<SampleView> views;
    for (const Sample& s : samples) views.push_back(view_of(*model, cell, s));
    const size_t shown = std::min(samples.size(), size_t(std::max(o.samples, 0)));
    const PromptLengths lengths = lengths_of(views);
    if (o.json) {
      json group = {{"dataset", cell.dataset.name}, {"params", cell.dataset.params},
                    {"model", cell.model},          {"seed", cell.seed},
                    {"context_sharing", cell.context_sharing},
                    {"samples_total", samples.size()}, {"samples", json::array()}};
      if (!views.empty())
        group["prompt_tokens"] = {{"min", lengths.min}, {"max", lengths.max}, {"mean", lengths.mean}};
      for (size_t i = 0; i < shown; ++i) group["samples"].push_back(to_json(views[i], *model));
      out.push_back(group);
      continue;
    }
    std::cout << "== " << group_title(cell) << ": " << samples.size() << " sample"
              << (samples.size() == 1 ? "" : "s");
    if (!views.empty())
      std::cout << ", prompts of " << lengths.min << " to " << lengths.max << " tokens (mean "
                << fixed(lengths.mean, 0) << ")";
    std::cout << "\n";
    for (size_t i = 0; i < shown; ++i) print(views[i], *model, o);
    std::cout << "\n";
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_samples_command(CLI::App& app, std::vector<Command>& out) {
  auto o = std::make_shared<SamplesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "samples", "Show the prompts a suite's cells feed the model (chat template and BOS as the "
                 "runner applies them), their token counts and answers, without running anything");
  cmd->add_option("suite", o->suite, "Suite name or path to a suite JSON file")->required();
  cmd->add_option("--set", o->overrides, "Override an axis, as in `kvbench run`. Repeatable");
  cmd->add_option("--dataset", o->dataset, "Only this dataset's cells");
  cmd->add_option("--model", o->model,
                  "Only this model's cells (as the suite names it, ${SHARED} included)");
  cmd->add_option("--seed", o->seed, "Only this seed's cells");
  cmd->add_option("-n,--samples", o->samples,
                  "Samples shown of each group (dataset and its params, model, seed, context "
                  "sharing; default 1)")
      ->check(non_negative());
  cmd->add_option("--chars", o->chars,
                  "Bytes shown of each end of a long prompt (default 300, whole characters; a "
                  "prompt that would lose less than 200 bytes is shown whole)")
      ->check(non_negative());
  cmd->add_flag("--full", o->full, "Show whole prompts");
  cmd->add_flag("--json", o->json, "Print JSON (whole prompts) instead of text");
  add_allow_unknown_config_keys_flag(cmd, o->allow_unknown_config_keys);
  out.push_back({cmd, [o] {
    SamplesOptions options = *o;
    options.model = expand_shared(o->model);  // as the suite names it, ${SHARED} too
    return run_samples(options);
  }});
}

}  // namespace kvb
