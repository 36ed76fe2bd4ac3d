// kvbench list {methods,suites,datasets}
#include <iostream>

#include "datasets/dataset.h"
#include "harness/cli/commands.h"
#include "harness/common/error.h"
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
  }
}

void list_datasets() {
  for (const DatasetInfo* d : dataset_registry().all()) {
    std::cout << d->name << "  " << d->description << "\n";
    std::cout << "    source:   " << d->source << "\n";
    std::cout << "    defaults: " << defaults_text(d->normalise_params, d->name) << "\n";
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

}  // namespace

void add_list_command(CLI::App& app, std::vector<Command>& out) {
  auto what = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("list", "List the registered methods, datasets or the "
                                             "built-in suites");
  cmd->add_option("what", *what, "methods | datasets | suites")
      ->required()
      ->check(CLI::IsMember({"methods", "datasets", "suites"}));
  out.push_back({cmd, [what] {
    if (*what == "methods") list_methods();
    if (*what == "datasets") list_datasets();
    if (*what == "suites") list_suites();
    return 0;
  }});
}

}  // namespace kvb
