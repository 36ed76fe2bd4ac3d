#include "methods/method.h"

#include <algorithm>

#include "engine/common/json_fields.h"
#include "engine/common/nearest_name.h"

namespace kvb {

Registry<MethodInfo>& method_registry() {
  static Registry<MethodInfo> registry("method");
  return registry;
}

namespace {

const MethodPreset& find_preset(const MethodInfo& info, const std::string& preset,
                                const std::string& where) {
  for (const MethodPreset& p : info.presets)
    if (p.name == preset) return p;
  std::string known;
  std::vector<std::string> names;
  for (const MethodPreset& p : info.presets) {
    known += (known.empty() ? "" : ", ") + info.name + ":" + p.name;
    names.push_back(p.name);
  }
  throw InputError(where + ": method " + info.name + " has no preset \"" + preset + "\"" +
                   did_you_mean(preset, names) + " (" +
                   (known.empty() ? std::string("it has none") : "known: " + known) + ")");
}

}  // namespace

MethodChoice resolve_method(const std::string& name, const json& config, const std::string& where,
                            const std::string& config_where, ConfigSource source) {
  const size_t colon = name.find(':');
  MethodChoice choice;
  choice.info = &method_registry().get(name.substr(0, colon), where);
  json merged = json::object();
  if (colon != std::string::npos) {
    choice.preset = name.substr(colon + 1);
    merged = find_preset(*choice.info, choice.preset, where).config;
  }
  if (!config.is_null() && !config.is_object())
    throw InputError(config_where + ": expected an object, got " + json_type_name(config));
  if (config.is_object()) merged.update(config);  // the entry's own fields win over the preset's
  choice.config = choice.info->normalise_config(merged, config_where);
  if (source == ConfigSource::given)
    if (const std::optional<UnusedField> u = choice.info->unused_field(choice.config)) {
      const bool by_preset = !(config.is_object() && config.contains(u->name));
      throw InputError(config_where + "." + u->name + ": " + u->value + " is set" +
                       (by_preset ? " by preset " + name : "") + ", but nothing reads it when " +
                       u->when + "; " +
                       (by_preset ? "give \"" + u->name + "\": " + u->default_value + " here"
                                  : "leave it at its default, " + u->default_value));
    }
  return choice;
}

}  // namespace kvb
