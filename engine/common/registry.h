// A name -> description registry, filled by one static registration line per entry
// (methods, datasets). Entries are looked up by the suite validator and the runner.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/nearest_name.h"

namespace kvb {

template <typename Info>
class Registry {
 public:
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  void add(Info info) {
    if (find(info.name)) throw std::logic_error(kind_ + " registered twice: " + info.name);
    entries_.push_back(std::move(info));
  }
  const Info* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  // The entry, or an InputError at `where` listing the known names.
  const Info& get(const std::string& name, const std::string& where) const {
    if (const Info* e = find(name)) return *e;
    std::string known;
    std::vector<std::string> names;
    for (const Info* e : all()) {
      known += (known.empty() ? "" : ", ") + e->name;
      names.push_back(e->name);
    }
    throw InputError(where + ": unknown " + kind_ + " \"" + name + "\"" + did_you_mean(name, names) +
                     " (known: " + known + ")");
  }
  std::vector<const Info*> all() const {  // sorted by group, then name
    std::vector<const Info*> out;
    for (const auto& e : entries_) out.push_back(&e);
    std::sort(out.begin(), out.end(), [](const Info* a, const Info* b) {
      return std::make_pair(a->sort_key(), a->name) < std::make_pair(b->sort_key(), b->name);
    });
    return out;
  }

 private:
  std::string kind_;
  std::vector<Info> entries_;
};

#define KVB_CONCAT_INNER(a, b) a##b
#define KVB_CONCAT(a, b) KVB_CONCAT_INNER(a, b)

}  // namespace kvb
