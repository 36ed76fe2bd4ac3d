// The extension point: a KV-cache compression method is one class implementing the engine's
// hooks (engine/method_hooks.h), registered here with its config; the runner and the engine
// never name a method.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/common/config_fields.h"
#include "engine/common/registry.h"
#include "engine/method_hooks.h"

namespace kvb {

using json = nlohmann::json;

// The fewest and the most entries one KV head of a sparse layer attends at a decode step.
struct AttendedRange {
  double fewest = 0, most = 0;
};

// A named config that reproduces one reference implementation's defaults.
struct MethodPreset {
  std::string name;         // e.g. "kvpress": used as "snapkv:kvpress"
  std::string description;  // the reference repository and file it follows, and what it sets
  json config;              // the fields it sets; the method's defaults fill the rest
};

// How the registry describes a method (shown by `kvbench list methods`).
struct MethodInfo {
  std::string name;      // suite name, e.g. "snapkv"
  std::string title;     // e.g. "SnapKV (Li et al. 2024)"
  std::string paper;     // URL
  std::string family;    // "baseline", "eviction", "retrieval"
  bool uses_budget = true;
  // How far the measured attended entries per (layer, KV head) may sit from B at the first
  // decode step, averaged, and why (block-wise eviction, rounding in a per-head allocation).
  double budget_tolerance = 0.0;
  // The method's own budget rule, for methods whose reference does not attend exactly B per KV
  // head of a sparse layer (recent tokens on top of B, whole pages only, a data-dependent
  // count): the range attended given the normalised config, B, the entries resident (n > B,
  // the current one included) and the decode step (1 = the first). Unset: exactly B.
  // Filled by make_method_info from `Config::attended(budget, entries, step)` when it exists.
  std::function<AttendedRange(const json& config, int64_t budget, int64_t entries, int64_t step)>
      attended;
  // Layers the method keeps dense by design (attend to everything); reported, not hidden.
  // Filled by make_method_info from the class's `static constexpr int kDenseLayers`.
  int dense_layers = 0;
  std::string fidelity;  // what it follows, and where it is not (yet) faithful
  // Named configs reproducing a reference's defaults, usable as "<name>:<preset>" wherever a
  // method name is (suites, --set method=, generate --method); declared in the method's file.
  std::vector<MethodPreset> presets;
  // The config's fields: name, type, default, what it does (from Config::fields()).
  std::vector<FieldDoc> config_fields;
  // Validates `config` (defaults filled in) and returns it normalised; throws InputError
  // naming `where` and the field.
  std::function<json(const json& config, const std::string& where)> normalise_config;
  // A normalised config's field set away from its default where the config's other fields
  // make it unused: refused in configs given now, not in those stored with results, which ran
  // as they read.
  std::function<std::optional<UnusedField>(const json& config)> unused_field;
  // Checks a normalised config against one budget (e.g. window <= budget), before any model
  // is loaded; InputError naming `where` and the field.
  std::function<void(const json& config, int64_t budget, const std::string& where)> check_budget;
  // Builds the method from a normalised config.
  std::function<std::unique_ptr<Method>(const json& config)> create;

  int sort_key() const { return family == "baseline" ? 0 : family == "eviction" ? 1 : 2; }
};

// Registry of methods. Order in listings: baselines, eviction, retrieval.
Registry<MethodInfo>& method_registry();

// A method name or "<method>:<preset>" resolved against the registry, with its config.
struct MethodChoice {
  const MethodInfo* info = nullptr;
  std::string preset;  // empty: the method's own defaults
  json config;         // normalised: the preset's fields, then `config`'s on top, then defaults
};
// Where a method config comes from: given now (a suite file, a flag), or stored with results
// (a run's suite), which is read as it ran, without the rules added since.
enum class ConfigSource { given, stored };
// InputError at `where` for an unknown method or preset (listing the known ones) or a bad
// config; the config's own errors name `config_where`.
MethodChoice resolve_method(const std::string& name, const json& config, const std::string& where,
                            const std::string& config_where,
                            ConfigSource source = ConfigSource::given);

// Whether a config type declares its method's budget rule: AttendedRange attended(B, n, step).
template <typename C, typename = void>
struct has_attended_rule : std::false_type {};
template <typename C>
struct has_attended_rule<C, std::void_t<decltype(std::declval<const C&>().attended(
                                int64_t(), int64_t(), int64_t()))>> : std::true_type {};

// Whether a method class states layers it keeps dense: static constexpr int kDenseLayers.
template <typename M, typename = void>
struct has_dense_layers : std::false_type {};
template <typename M>
struct has_dense_layers<M, std::void_t<decltype(M::kDenseLayers)>> : std::true_type {};

// Registers a method whose config type `Config` provides
//   static const ConfigFields<Config>& fields()  (engine/common/config_fields.h: the fields,
//                                                 their checks and docs, declared once)
//   void check_budget(int64_t budget, const std::string& where) const
//   AttendedRange attended(int64_t budget, int64_t entries, int64_t step) const  (optional)
// and whose class has a constructor taking `const Config&`.
template <typename MethodClass, typename Config>
MethodInfo make_method_info(MethodInfo info) {
  if constexpr (has_dense_layers<MethodClass>::value) info.dense_layers = MethodClass::kDenseLayers;
  info.config_fields = Config::fields().docs();
  info.normalise_config = [](const json& config, const std::string& where) {
    return Config::fields().write(Config::fields().read(config, where));
  };
  info.unused_field = [](const json& config) {
    return Config::fields().first_unused(Config::fields().read(config, "config"));
  };
  info.check_budget = [](const json& config, int64_t budget, const std::string& where) {
    Config::fields().read(config, where).check_budget(budget, where);
  };
  if constexpr (has_attended_rule<Config>::value)
    info.attended = [](const json& config, int64_t budget, int64_t entries, int64_t step) {
      return Config::fields().read(config, "config").attended(budget, entries, step);
    };
  info.create = [](const json& config) -> std::unique_ptr<Method> {
    return std::make_unique<MethodClass>(Config::fields().read(config, "config"));
  };
  return info;
}

// The one registration line of a method's .cpp.
#define KVB_REGISTER_METHOD(...)                                                      \
  static const bool KVB_CONCAT(kvb_method_registered_, __LINE__) = [] {               \
    ::kvb::method_registry().add(__VA_ARGS__);                               \
    return true;                                                                      \
  }()

}  // namespace kvb
