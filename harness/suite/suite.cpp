#include "harness/suite/suite.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "datasets/dataset.h"
#include "datasets/longbench/longbench.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"
#include "engine/common/nearest_name.h"
#include "engine/common/shared_folder.h"
#include "engine/device.h"
#include "engine/model/llama_model.h"
#include "methods/method.h"

namespace kvb {
namespace {

const char* kSuiteDir = KVBENCH_SOURCE_DIR "/suites";

int64_t parse_integer(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    int64_t v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw InputError(what + ": \"" + text + "\" is not an integer");
}

// Entries of a "methods"/"datasets" axis: a name, or an object with the name and settings.
json as_named_object(const json& entry) {
  return entry.is_string() ? json{{"name", entry}} : entry;
}

// Whether entry `e` (a name or an object) has `value` as its `key` ("name" or "label"); an
// entry of the wrong shape has none (validation reports it).
bool entry_has(const json& e, const char* key, const std::string& value) {
  const json obj = as_named_object(e);
  return obj.is_object() && obj.contains(key) && obj[key].is_string() && obj[key] == value;
}

// Keeps the suite's entries that a listed value names: by label (that method entry), else by
// name (every entry of that name, labelled variants included), each entry once; a value naming
// none is a new entry with the defaults of that name.
json select_named(const json& entries, const std::vector<std::string>& names) {
  json out = json::array();
  for (const std::string& name : names) {
    const bool labelled = std::any_of(entries.begin(), entries.end(), [&](const json& e) {
      return entry_has(e, "label", name);
    });
    bool found = false;
    for (const json& e : entries) {
      if (!entry_has(e, labelled ? "label" : "name", name)) continue;
      found = true;
      const json obj = as_named_object(e);
      if (std::find(out.begin(), out.end(), obj) == out.end()) out.push_back(obj);
    }
    if (!found) out.push_back(json{{"name", name}});
  }
  return out;
}

// Applies one --set override to the suite's JSON; returns the suite key it replaced.
std::string apply_override(json& j, const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError("--set " + text + ": expected KEY=VALUE[,VALUE...]");
  std::string key = text.substr(0, eq);
  const std::vector<std::string> values = split(text.substr(eq + 1), ',');
  const std::string where = "--set " + key;
  for (const std::string& v : values)
    if (v.empty()) throw InputError(where + ": empty value in \"" + text.substr(eq + 1) + "\"");
  if (key.back() != 's' && key != "max_new_tokens" && key != "context_sharing")
    key += "s";  // budget -> budgets
  if (key == "budgets" || key == "seeds") {
    j[key] = json::array();
    for (const auto& v : values) j[key].push_back(parse_integer(v, where));
  } else if (key == "models" || key == "devices" || key == "dtypes" ||
             key == "context_sharing") {
    j[key] = values;
  } else if (key == "methods" || key == "datasets") {
    j[key] = select_named(j.value(key, json::array()), values);
  } else if (key == "max_new_tokens") {
    if (values.size() != 1) throw InputError(where + ": takes one value");
    j[key] = parse_integer(values[0], where);
  } else {
    throw InputError(where + ": unknown axis (expected model, device, dtype, dataset, method, "
                     "budget, seed, context_sharing or max_new_tokens)" +
                     did_you_mean(text.substr(0, eq),
                                  {"model", "device", "dtype", "dataset", "method", "budget",
                                   "seed", "context_sharing", "max_new_tokens"}));
  }
  return key;
}

std::string at_path(const std::string& file, const std::string& json_path) {
  return file + ": " + json_path;
}

// An error in a field that a --set flag replaced names the flag, not the suite file:
// "smoke.json: $.budgets: budget -5 must be > 0" -> "--set budget=-5: budget -5 must be > 0".
// `flags`: suite key -> the flag's text ("budgets" -> "budget=-5").
InputError blame_override_flag(const InputError& e, const std::string& path,
                               const std::map<std::string, std::string>& flags) {
  const std::string message = e.what();
  for (const auto& [key, flag] : flags) {
    const std::string field = at_path(path, "$." + key);
    if (message.rfind(field, 0) != 0) continue;
    const std::string rest = message.substr(field.size());  // ": ..." or "[0].name: ..."
    if (rest.empty() || (rest[0] != ':' && rest[0] != '[' && rest[0] != '.')) continue;
    const std::string inside = rest[0] == ':' ? "" : "$." + key + rest.substr(0, rest.find(": "));
    const std::string what = rest.substr(rest.find(": ") + 2);
    return InputError("--set " + flag + ": " + (inside.empty() ? "" : inside + ": ") + what);
  }
  return e;
}

// Every "${SHARED}" in the strings of `j` replaced by the shared folder.
json with_shared_folder(json j) {
  if (j.is_string()) return expand_shared(j.get<std::string>());
  if (j.is_structured())
    for (auto& item : j) item = with_shared_folder(item);
  return j;
}

// One suite model: a built-in name or an existing folder; else an error saying where it looked.
void check_model(const std::string& as_written, const std::string& model, const std::string& where) {
  if (LlamaModel::is_builtin_reference(model) || std::filesystem::is_directory(model)) return;
  std::string looked = "no folder " + std::filesystem::absolute(model).lexically_normal().string();
  if (mentions_shared(as_written)) looked += "; " + shared_folder_hint();
  else if (std::filesystem::path(model).is_relative())
    looked += ": relative paths are taken from the working directory";
  if (as_written.rfind("../shared/", 0) == 0)
    looked += "; write ${SHARED}/" + as_written.substr(10) + " to find it wherever the shared "
              "folder is";
  const std::vector<std::string> builtins = LlamaModel::builtin_model_names();
  throw InputError(where + ": \"" + as_written + "\" is neither a built-in model (" +
                   join(builtins, ", ") +
                   ") nor a model folder (" + looked + ")" +
                   did_you_mean(as_written, builtins));
}

DatasetSpec parse_dataset(const json& entry, const std::string& where) {
  json obj = as_named_object(entry);
  JsonFields f(obj, where);
  DatasetSpec spec;
  f.require("name", spec.name);
  const json* params = f.raw("params");
  f.finish();
  const DatasetInfo& info = dataset_registry().get(spec.name, f.path("name"));
  spec.params = info.normalise_params(params ? *params : json::object(), f.path("params"));
  spec.revision = info.revision ? info.revision(spec.params) : 0;
  return spec;
}

MethodSpec parse_method(const json& entry, const std::string& where, ConfigSource source) {
  json obj = as_named_object(entry);
  JsonFields f(obj, where);
  MethodSpec spec;
  f.require("name", spec.name);
  f.get("label", spec.label);
  // A label is a table row, a plot tic and a progress line: one line of text.
  for (char c : spec.label)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw InputError(f.path("label") + ": a control character (a newline, a tab) in \"" +
                       spec.label.substr(0, spec.label.find(c)) + "...\"; give one line of text");
  const json* config = f.raw("config");
  f.finish();
  // "<method>:<preset>" names a reference's defaults; the label keeps the preset's name.
  const std::string given = spec.name;
  if (spec.label.empty()) spec.label = given;
  try {
    MethodChoice choice = resolve_method(given, config ? *config : json::object(), f.path("name"),
                                         f.path("config"), source);
    spec.name = choice.info->name;
    spec.config = std::move(choice.config);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " (method " + given + ")");
  }
  return spec;
}

template <typename T, typename Parse>
std::vector<T> parse_list(const json* list, const std::string& where, Parse parse) {
  if (!list) throw InputError(where + ": missing required field");
  if (!list->is_array() || list->empty())
    throw InputError(where + ": expected a non-empty array, got " + json_type_name(*list));
  std::vector<T> out;
  for (size_t i = 0; i < list->size(); ++i)
    out.push_back(parse((*list)[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace

std::string Cell::description() const {
  std::string where = model;
  if (device != "cpu") where += ", " + device;
  if (dtype != "f32") where += ", " + dtype;
  if (context_sharing != "none") where += ", context_sharing " + context_sharing;
  return method.label + " @ " + budget_text() + " on " + dataset.name + " (" + where + ", seed " +
         std::to_string(seed) + ")";
}

json Cell::to_json() const {
  json j = {{"model", model},
            {"dataset", {{"name", dataset.name}, {"params", dataset.params}}},
            {"method", {{"name", method.name}, {"label", method.label}, {"config", method.config}}},
            {"budget", budget ? json(*budget) : json(nullptr)},
            {"seed", seed},
            {"max_new_tokens", max_new_tokens},
            {"recall", recall}};
  if (device != "cpu") j["device"] = device;
  if (dtype != "f32") j["dtype"] = dtype;
  if (context_sharing != "none") j["context_sharing"] = context_sharing;
  if (dataset.revision > 0) j["dataset"]["revision"] = dataset.revision;
  // How recall is measured, where it is: 1 since a per-query-head selection is scored per query
  // head (2026-11-29; before, the group's union), so earlier recall results are redone.
  if (recall) j["recall_revision"] = 1;
  return j;
}

std::string device_suffix(const json& cell_config) {
  std::string parts;
  for (const char* key : {"device", "dtype"})
    if (cell_config.contains(key))
      parts += (parts.empty() ? "" : ", ") + cell_config[key].get<std::string>();
  return parts.empty() ? "" : " (" + parts + ")";
}

std::string sharing_suffix(const json& cell_config) {
  return cell_config.value("context_sharing", "none") == "per_sample" ? " (shared context)" : "";
}

std::vector<Cell> Suite::cells() const {
  std::vector<Cell> out;
  for (const auto& model : models)
    for (const auto& device : devices)
    for (const auto& dtype : dtypes)
    for (const auto& dataset : datasets)
      for (const auto& method : methods) {
        const bool uses_budget = method_registry().get(method.name, path).uses_budget;
        std::vector<std::optional<int64_t>> cell_budgets;
        if (uses_budget)
          for (int64_t b : budgets) cell_budgets.push_back(b);
        else
          cell_budgets.push_back(std::nullopt);
        for (const auto& budget : cell_budgets)
          for (uint64_t seed : seeds)
            for (const std::string& sharing : context_sharing)
              out.push_back(Cell{.model = model, .device = device, .dtype = dtype,
                                 .dataset = dataset, .method = method, .budget = budget,
                                 .seed = seed, .max_new_tokens = max_new_tokens,
                                 .recall = recall, .context_sharing = sharing});
      }
  return out;
}

std::vector<std::string> builtin_suite_names() {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(kSuiteDir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(kSuiteDir))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_suite_path(const std::string& name_or_path) {
  if (std::filesystem::is_regular_file(name_or_path)) return name_or_path;
  std::string builtin = std::string(kSuiteDir) + "/" + name_or_path + ".json";
  if (std::filesystem::is_regular_file(builtin)) return builtin;
  const std::vector<std::string> known = builtin_suite_names();  // the folder listed once
  throw InputError("suite \"" + name_or_path + "\": no such file, and not a built-in suite (" +
                   join(known, ", ") + ")" + did_you_mean(name_or_path, known));
}

Suite load_suite(const std::string& name_or_path, const std::vector<std::string>& overrides) {
  const std::string path = resolve_suite_path(name_or_path);
  return parse_suite(read_json_file(path), path, overrides);
}

namespace {

// A suite's name names files (results/runs/NAME.db, its shards' databases, Slurm scripts and
// logs) and stands in shell scripts: letters, digits, '.', '_' and '-', not starting with '.'
// or '-'.
void check_suite_name(const std::string& name, const std::string& where) {
  const bool safe =
      !name.empty() && name.front() != '.' && name.front() != '-' &&
      std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '_' || c == '-';
      });
  if (!safe)
    throw InputError(where + ": " + json(name).dump() + " names files and scripts: use letters, "
                     "digits, '.', '_' and '-' (not first: '.', '-')");
}

// The suite of `written` (the file's JSON after --set overrides), ${SHARED} expanded in its
// models and dataset params, validated completely; `stored`: a suite stored with an earlier
// run, its name and repeated axis values as an earlier kvbench took them.
Suite validate_suite(const json& written, const std::string& path, bool stored) {
  json j = written;
  for (const char* axis : {"models", "datasets"})
    if (j.contains(axis)) j[axis] = with_shared_folder(j[axis]);
  Suite s;
  s.path = path;
  s.source = written;
  JsonFields f(j, at_path(path, "$"));
  f.require("name", s.name);
  if (!stored) check_suite_name(s.name, f.path("name"));
  f.get("description", s.description);
  f.require("models", s.models);
  for (size_t i = 0; i < s.models.size(); ++i)
    check_model(written["models"][i].get<std::string>(), s.models[i],
                f.path("models") + "[" + std::to_string(i) + "]");
  f.get("devices", s.devices);
  f.get("dtypes", s.dtypes);
  for (size_t i = 0; i < s.devices.size(); ++i) {  // spelling only: the machine is checked by run
    check_device_name(s.devices[i], f.path("devices") + "[" + std::to_string(i) + "]");
    if (s.devices[i] == "cuda") s.devices[i] = "cuda:0";  // one name per GPU in cell keys
  }
  for (size_t i = 0; i < s.dtypes.size(); ++i)
    parse_dtype(s.dtypes[i], f.path("dtypes") + "[" + std::to_string(i) + "]");
  if (s.devices.empty()) throw InputError(f.path("devices") + ": expected a non-empty array");
  if (s.dtypes.empty()) throw InputError(f.path("dtypes") + ": expected a non-empty array");
  try {
    s.datasets = parse_list<DatasetSpec>(f.raw("datasets"), f.path("datasets"), parse_dataset);
  } catch (const InputError& e) {  // a data file under ${SHARED} not found: say where that was
    const bool in_shared = mentions_shared(written.value("datasets", json()).dump()) &&
                           std::string(e.what()).find(shared_folder()) != std::string::npos;
    if (!in_shared) throw;
    throw InputError(std::string(e.what()) + " (" + shared_folder_hint() + ")");
  }
  const ConfigSource source = stored ? ConfigSource::stored : ConfigSource::given;
  s.methods = parse_list<MethodSpec>(
      f.raw("methods"), f.path("methods"),
      [source](const json& entry, const std::string& where) {
        return parse_method(entry, where, source);
      });
  std::vector<int64_t> budgets, seeds = {0};
  f.get("budgets", budgets);
  f.get("seeds", seeds);
  f.get("max_new_tokens", s.max_new_tokens);
  f.get("recall", s.recall);
  const bool sharing_stated = f.raw("context_sharing") != nullptr;
  if (const json* sharing = f.raw("context_sharing"); sharing && sharing->is_string())
    s.context_sharing = {sharing->get<std::string>()};  // one value, or a list (an axis)
  else
    f.get("context_sharing", s.context_sharing);
  f.finish();
  if (s.models.empty()) throw InputError(f.path("models") + ": expected a non-empty array");
  for (int64_t b : budgets)
    if (b <= 0) throw InputError(f.path("budgets") + ": budget " + std::to_string(b) + " must be > 0");
  for (int64_t seed : seeds)
    if (seed < 0) throw InputError(f.path("seeds") + ": seeds must be >= 0");
  if (s.max_new_tokens < 0) throw InputError(f.path("max_new_tokens") + ": must be >= 0");
  if (s.context_sharing.empty())
    throw InputError(f.path("context_sharing") + ": expected a non-empty array");
  for (const DatasetSpec& d : s.datasets)  // a stored suite ran before the rule: taken as run
    if (!stored && !sharing_stated && dataset_registry().get(d.name, "").reference_shares_context)
      throw InputError(f.path("context_sharing") + ": " + d.name + "'s reference prefills and "
                       "compresses a context before reading its questions: state per_sample "
                       "(the reference's way) or none (each question prefilled with its "
                       "context)");
  const bool shares = std::count(s.context_sharing.begin(), s.context_sharing.end(), "per_sample");
  for (size_t i = 0; shares && i < s.datasets.size(); ++i)
    if (dataset_registry().get(s.datasets[i].name, "").questions_per_context.empty())
      throw InputError(f.path("context_sharing") + ": per_sample needs datasets that mark their "
                       "questions, and " + s.datasets[i].name + " does not (kvbench list "
                       "datasets says which do)");
    else if (s.datasets[i].name == "longbench" &&  // its own split of the question
             longbench_decodes_question_end(s.datasets[i].params.value("pred_script", "")))
      throw InputError(f.path("context_sharing") + ": per_sample splits the prompts of " +
                       s.datasets[i].params.value("dataset", s.datasets[i].name) +
                       " otherwise than its pred_script " +
                       s.datasets[i].params["pred_script"].get<std::string>() + " does");
  for (const std::string& v : s.context_sharing)
    if (std::find(kContextSharing.begin(), kContextSharing.end(), v) == kContextSharing.end())
      throw InputError(f.path("context_sharing") + ": \"" + v + "\" is not one of none, per_sample");
  // An axis listing a value twice would list its cells twice (counted twice by run, once by
  // plan, the second run of each "already complete").
  const auto once_each = [&](const std::string& axis, const std::vector<std::string>& values) {
    std::set<std::string> seen;
    for (const std::string& v : values)
      if (!seen.insert(v).second)
        throw InputError(f.path(axis) + ": " + v + " is listed twice");
  };
  const auto texts = [](const auto& values) {
    std::vector<std::string> out;
    for (const auto& v : values) out.push_back(json(v).dump());
    return out;
  };
  if (!stored) {
    once_each("budgets", texts(budgets));
    once_each("seeds", texts(seeds));
    once_each("models", texts(s.models));
    once_each("devices", texts(s.devices));
    once_each("dtypes", texts(s.dtypes));
    once_each("context_sharing", texts(s.context_sharing));
    std::vector<std::string> datasets;
    for (const DatasetSpec& d : s.datasets) datasets.push_back(json{{d.name, d.params}}.dump());
    once_each("datasets", datasets);
  }
  s.budgets = budgets;
  s.seeds.assign(seeds.begin(), seeds.end());
  std::set<std::string> labels;
  for (size_t i = 0; i < s.methods.size(); ++i) {
    const MethodSpec& m = s.methods[i];
    if (!labels.insert(m.label).second)
      throw InputError(f.path("methods") + ": two entries share the label \"" + m.label +
                       "\" (give each config of a method its own \"label\")");
    const MethodInfo& info = method_registry().get(m.name, path);
    if (info.uses_budget && s.budgets.empty())
      throw InputError(f.path("budgets") + ": method \"" + m.name +
                       "\" needs a budget, and the suite lists none");
    const std::string config_path = f.path("methods") + "[" + std::to_string(i) + "].config";
    for (int64_t b : info.uses_budget ? s.budgets : std::vector<int64_t>{}) {
      try {
        info.check_budget(m.config, b, config_path);
      } catch (const InputError& e) {
        throw InputError(std::string(e.what()) + " (method " + m.label + ", budget " +
                         std::to_string(b) + ")");
      }
    }
  }
  return s;
}

}  // namespace

Suite parse_suite(const json& source, const std::string& path,
                  const std::vector<std::string>& overrides) {
  if (!source.is_object()) throw InputError(at_path(path, "$") + ": expected an object");
  json written = source;
  std::map<std::string, std::string> flags;  // suite key -> the --set text that replaced it
  for (const auto& o : overrides) flags[apply_override(written, o)] = o;
  try {
    return validate_suite(written, path, /*stored=*/false);
  } catch (const InputError& e) {
    throw blame_override_flag(e, path, flags);
  }
}

Suite parse_stored_suite(const json& source, const std::string& path) {
  if (!source.is_object()) throw InputError(at_path(path, "$") + ": expected an object");
  return validate_suite(source, path, /*stored=*/true);
}

}  // namespace kvb
