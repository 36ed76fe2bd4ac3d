// A config struct's fields declared once: each field's JSON name, member, doc line and check in
// one list, from which reading (strict: wrong types and unknown keys are errors), validation
// messages, JSON output and `kvbench list` documentation all come. A config declares
//
//   struct WindowConfig {
//     int window = 8;
//     std::string pooling = "max";
//     static const ConfigFields<WindowConfig>& fields() {
//       static const ConfigFields<WindowConfig> f = ConfigFields<WindowConfig>()
//           .field("window", &WindowConfig::window, "observation window W", check::at_least(1))
//           .field("pooling", &WindowConfig::pooling, "pooling", check::one_of({"max", "avg"}));
//       return f;
//     }
//   };
//
// so a new field is its member (with its default) and its line in fields(). C++ has no
// reflection; the alternatives (an X-macro generating the struct) hide the struct from its
// readers, so the member keeps its ordinary declaration.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/json_fields.h"

namespace kvb {

// A check on one field's value (as JSON, after reading): the text after "<path>: " when the
// value is refused, "" when it passes; `doc` says the rule in `kvbench list`.
struct FieldCheck {
  std::function<std::string(const json&)> refuse;
  std::string doc;
};

// The checks a field line names: check::at_least(1), check::one_of({"max", "avg"}), ...
namespace check {

// value >= min
FieldCheck at_least(double min);
// lo <= value <= hi, with open ends where `interval` says: "[0, 1]", "(0, 1]", "(0, 1)".
FieldCheck in_interval(const std::string& interval);
// An odd integer >= 1 (pooling kernels).
FieldCheck odd_at_least_one();
// One of the given strings.
FieldCheck one_of(std::vector<std::string> values);

}  // namespace check

// A field set where the config's other fields make it unused (ConfigFields::unused_when), its
// value and default as JSON text.
struct UnusedField {
  std::string name, value, default_value, when;
};

// What `kvbench list` shows of one field.
struct FieldDoc {
  std::string name, type, default_value, doc;
};

template <typename C>
class ConfigFields {
 public:
  // A plain field (int, int64_t, double, bool, string, or a vector of int64_t or strings).
  template <typename T>
  ConfigFields field(std::string name, T C::*member, std::string doc,
                     FieldCheck check = {}) const {
    return plain(std::move(name), member, std::move(doc), std::move(check), /*required=*/false);
  }
  // A field without a default, which the JSON must give (a dataset's file, say).
  template <typename T>
  ConfigFields required(std::string name, T C::*member, std::string doc,
                        FieldCheck check = {}) const {
    return plain(std::move(name), member, std::move(doc), std::move(check), /*required=*/true);
  }

  // A plain field added after configs were stored: left out of the written JSON while it has
  // its default, so configs (and results keys) from before it keep their identity.
  template <typename T>
  ConfigFields added_field(std::string name, T C::*member, std::string doc,
                           FieldCheck check = {}) const {
    ConfigFields out = plain(name, member, std::move(doc), std::move(check), false);
    const T default_value = C{}.*member;
    out.fields_.back().default_text = json(default_value).dump();
    out.fields_.back().write = [name, member, default_value](const C& c, json& j) {
      if (c.*member != default_value) j[name] = c.*member;
    };
    return out;
  }

  // A field with its own JSON form (e.g. a count or "L/<k>"): `read` gets the raw value and
  // the field's path and sets `c`; `write` gives the JSON of `c`'s value (null: the field is
  // left out of the output, e.g. an optional field added after configs were stored).
  ConfigFields custom(std::string name, std::string type, std::string doc,
                      std::function<void(const json&, const std::string&, C&)> read,
                      std::function<json(const C&)> write) const {
    ConfigFields out = *this;
    out.fields_.push_back(Field{
        .name = name,
        .type = std::move(type),
        .doc = std::move(doc),
        .read = [name, read](JsonFields& f, C& c) {
          if (const json* v = f.raw(name)) read(*v, f.path(name), c);
        },
        .write = [name, write](const C& c, json& j) {
          json value = write(c);
          if (!value.is_null()) j[name] = std::move(value);
        }});
    return out;
  }

  // The fields of a member struct, read and written as fields of this config (SnapKV's
  // scoring, shared by three methods).
  template <typename S>
  ConfigFields fields_of(S C::*member, const ConfigFields<S>& inner) const {
    ConfigFields out = *this;
    for (const typename ConfigFields<S>::Field& f : inner.fields_)
      out.fields_.push_back(Field{
          .name = f.name,
          .type = f.type,
          .doc = f.doc,
          .required = f.required,
          .default_text = f.default_text,
          .read = [member, read = f.read](JsonFields& j, C& c) { read(j, c.*member); },
          .write = [member, write = f.write](const C& c, json& j) { write(c.*member, j); }});
    for (const auto& rule : inner.rules_)
      out.rules_.push_back([member, rule](C& c, const JsonFields& f) { rule(c.*member, f); });
    for (const auto& u : inner.unused_)
      out.unused_.push_back(
          Unused{u.name, [member, unused = u.unused](const C& c) { return unused(c.*member); },
                 u.when});
    return out;
  }

  // A rule over several fields, run after all are read: throws InputError naming the field
  // (f.path(name)); may also set derived members.
  ConfigFields rule(std::function<void(C&, const JsonFields&)> check) const {
    ConfigFields out = *this;
    out.rules_.push_back(std::move(check));
    return out;
  }

  // A field that another field's value makes unused (H2O's prefill window in decode mode):
  // `when` says that condition for the error and for `kvbench list` ("mode is \"decode\"").
  // first_unused then finds the field set away from its default while `unused(c)` holds: the
  // run would ignore it, and its results would be stored under a setting that never acted.
  ConfigFields unused_when(const std::string& name, std::function<bool(const C&)> unused,
                           std::string when) const {
    ConfigFields out = *this;
    bool declared = false;
    for (Field& f : out.fields_)
      if (f.name == name) {
        f.doc += " [unused when " + when + "]";
        declared = true;
      }
    if (!declared) throw std::logic_error("unused_when: no field \"" + name + "\"");
    out.unused_.push_back(Unused{name, std::move(unused), std::move(when)});
    return out;
  }

  // The first field set away from its default where unused_when says nothing reads it.
  std::optional<UnusedField> first_unused(const C& c) const {
    const json given = write(c), defaults = write(C{});
    for (const Unused& u : unused_) {
      const json value = given.value(u.name, json()), default_value = defaults.value(u.name, json());
      if (u.unused(c) && value != default_value)
        return UnusedField{u.name, value.dump(), default_text(u.name, default_value), u.when};
    }
    return std::nullopt;
  }

  // Reads `j` (null reads as {}: every default) strictly over `c`'s values (the defaults);
  // `where` prefixes every error.
  C read(const json& j, const std::string& where, C c = C{}) const {
    JsonFields f(j.is_null() ? json::object() : j, where);
    for (const Field& field : fields_) field.read(f, c);
    f.finish();
    for (const auto& rule : rules_) rule(c, f);
    return c;
  }

  json write(const C& c) const {
    json j = json::object();
    for (const Field& field : fields_) field.write(c, j);
    return j;
  }

  // Every field with its type, default (`defaults`'s value; "required" for a required one)
  // and doc line.
  std::vector<FieldDoc> docs() const {
    const C defaults;
    return docs(defaults);
  }
  std::vector<FieldDoc> docs(const C& defaults) const {
    const json values = write(defaults);
    std::vector<FieldDoc> out;
    for (const Field& f : fields_)
      out.push_back(FieldDoc{.name = f.name,
                             .type = f.type,
                             .default_value = f.required                ? "required"
                                              : !f.default_text.empty()   ? f.default_text
                                              : values.contains(f.name)   ? values.at(f.name).dump()
                                                                          : "unset",
                             .doc = f.doc});
    return out;
  }

  // The fields a JSON must give.
  std::vector<std::string> required_names() const {
    std::vector<std::string> out;
    for (const Field& f : fields_)
      if (f.required) out.push_back(f.name);
    return out;
  }

 private:
  template <typename>
  friend class ConfigFields;

  struct Field {
    std::string name, type, doc;
    bool required = false;
    std::string default_text;  // added_field's default (not in the written JSON)
    std::function<void(JsonFields&, C&)> read;
    std::function<void(const C&, json&)> write;
  };

  template <typename T>
  ConfigFields plain(std::string name, T C::*member, std::string doc, FieldCheck check,
                     bool required) const {
    ConfigFields out = *this;
    out.fields_.push_back(Field{
        .name = name,
        .type = type_name<T>(),
        .doc = doc + (check.doc.empty() ? "" : " (" + check.doc + ")"),
        .required = required,
        .read = [name, member, check, required](JsonFields& f, C& c) {
          if (required) f.require(name, c.*member);
          else if (!f.get(name, c.*member)) return;
          if (!check.refuse) return;
          const std::string refused = check.refuse(json(c.*member));
          if (!refused.empty()) throw InputError(f.path(name) + ": " + refused);
        },
        .write = [name, member](const C& c, json& j) { j[name] = c.*member; }});
    return out;
  }

  template <typename T>
  static std::string type_name() {
    if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_integral_v<T>) return "int";
    else if constexpr (std::is_floating_point_v<T>) return "number";
    else if constexpr (std::is_same_v<T, std::string>) return "string";
    else return "list";
  }

  // A field's default as JSON text: an added field's is kept aside (write leaves it out).
  std::string default_text(const std::string& name, const json& written) const {
    for (const Field& f : fields_)
      if (f.name == name && !f.default_text.empty()) return f.default_text;
    return written.dump();
  }

  struct Unused {
    std::string name;
    std::function<bool(const C&)> unused;
    std::string when;
  };

  std::vector<Field> fields_;
  std::vector<std::function<void(C&, const JsonFields&)>> rules_;
  std::vector<Unused> unused_;
};

}  // namespace kvb
