// kvbench list {methods,suites,datasets,config-keys}
#include <iostream>

#include "datasets/dataset.h"
#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "harness/suite/suite.h"
#include "methods/method.h"

namespace kvb {
namespace {

// The defaults of a config or params normaliser; an entry with a required field has none, and
// must not make the whole listing fail.
std::string defaults_text(const std::function<json(const json&, const std::string&)>& normalise,
                          const std::string& name) {
  try {
    return normalise(json::object(), name).dump();
  } catch (const InputError& e) {
    return std::string("none (") + e.what() + ")";
  }
}

// One line per field: name, type, default, what it does.
void print_fields(const std::string& heading, const std::vector<FieldDoc>& fields) {
  if (fields.empty()) return;
  std::cout << "    " << heading << ":\n";
  for (const FieldDoc& f : fields)
    std::cout << "      " << f.name << "  " << f.type << " = " << f.default_value << "  " << f.doc
              << "\n";
}

void list_methods() {
  for (const MethodInfo* m : method_registry().all()) {
    std::cout << m->name << "  [" << m->family << "]  " << m->title << "\n";
    if (!m->paper.empty()) std::cout << "    paper:    " << m->paper << "\n";
    std::cout << "    budget:   " << (m->uses_budget ? "yes" : "no (ignores budgets)") << "\n";
    if (m->dense_layers > 0)
      std::cout << "    dense:    layers 0-" << m->dense_layers - 1
                << " attend to everything (by design; reported in attended_mean.layerN)\n";
    std::cout << "    defaults: " << defaults_text(m->normalise_config, m->name) << "\n";
    std::cout << "    fidelity: " << m->fidelity << "\n";
    const bool eager = m->create(m->normalise_config(json::object(), m->name))->holds_step_tensors();
    std::cout << "    graphs:   "
              << (eager ? "no: --cuda-graphs leaves its decode steps eager (it may keep a step's "
                          "q, k, v or layer input)"
                        : "yes: --cuda-graphs replays the dense part of its decode steps")
              << "\n";
    print_fields("config", m->config_fields);
    for (const MethodPreset& p : m->presets)  // the fields it sets; the defaults fill the rest
      std::cout << "    preset:   " << m->name << ":" << p.name << "  " << p.config.dump()
                << "\n              " << p.description << "\n";
  }
}

void list_datasets() {
  for (const DatasetInfo* d : dataset_registry().all()) {
    std::cout << d->name << "  " << d->description << "\n";
    std::cout << "    source:   " << d->source << "\n";
    if (!d->fidelity.empty()) std::cout << "    fidelity: " << d->fidelity << "\n";
    std::cout << "    context sharing: "
              << (d->questions_per_context.empty()
                      ? "no (its samples do not mark their question)"
                      : "per_sample; questions per context: " + d->questions_per_context)
              << (d->reference_shares_context ? " (the reference's way: a suite must state it)"
                                              : "")
              << "\n";
    std::cout << "    defaults: " << d->default_params().dump() << "\n";
    if (!d->required_params.empty()) {
      std::string required;
      for (const std::string& p : d->required_params) required += (required.empty() ? "" : ", ") + p;
      std::cout << "    required: " << required << " (no default: the suite gives them)\n";
    }
    print_fields("params", d->param_fields);
  }
}

void list_suites() {
  for (const std::string& name : builtin_suite_names()) {
    try {  // one suite that does not validate here (a model folder not found) is listed as such
      Suite s = load_suite(name);
      std::cout << name << "  (" << s.cells().size() << " cells)  " << s.description << "\n";
    } catch (const InputError& e) {
      std::cout << name << "  (invalid here: " << e.what() << ")\n";
    }
  }
}

// The config.json keys a model folder may have, and what kvbench does with each.
void list_config_keys() {
  for (bool read : {true, false}) {
    std::cout << (read ? "read (implemented, or refused by value):\n"
                       : "known not to change inference (accepted, not used):\n");
    for (const ConfigKey& k : config_key_table())
      if (k.read == read) std::cout << "  " << k.key << ": " << k.why << "\n";
  }
  std::cout << "any other key: refused (exit 2) unless --allow-unknown-config-keys\n";
  std::cout << "\ntokenizer_config.json, read or known not to change the ids of a text:\n";
  for (const auto& [key, why] : tokenizer_config_key_table())
    std::cout << "  " << key << ": " << why << "\n";
  std::cout << "any other key: refused (exit 2) unless --allow-unknown-config-keys\n";
}

}  // namespace

void add_list_command(CLI::App& app, std::vector<Command>& out) {
  auto what = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "list", "List the registered methods, datasets, the built-in suites or the config.json "
              "and tokenizer_config.json keys models may have");
  cmd->add_option("what", *what, "methods | datasets | suites | config-keys")
      ->required()
      ->check(one_of({"methods", "datasets", "suites", "config-keys"}));
  out.push_back({cmd, [what] {
    if (*what == "methods") list_methods();
    if (*what == "datasets") list_datasets();
    if (*what == "suites") list_suites();
    if (*what == "config-keys") list_config_keys();
    return 0;
  }});
}

}  // namespace kvb
