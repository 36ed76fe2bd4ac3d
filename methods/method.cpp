#include "methods/method.h"

#include <algorithm>

#include "harness/common/json_fields.h"

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
  for (const MethodPreset& p : info.presets)
    known += (known.empty() ? "" : ", ") + info.name + ":" + p.name;
  throw InputError(where + ": method " + info.name + " has no preset \"" + preset + "\" (" +
                   (known.empty() ? std::string("it has none") : "known: " + known) + ")");
}

}  // namespace

MethodChoice resolve_method(const std::string& name, const json& config, const std::string& where,
                            const std::string& config_where) {
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
  return choice;
}

}  // namespace kvb

namespace kvb {

Selection Selection::from_lists(const std::vector<std::vector<int64_t>>& lists,
                                bool per_query_head, at::Device device) {
  std::vector<int64_t> indptr(lists.size() + 1, 0), indices;
  int64_t longest = 0;
  for (size_t u = 0; u < lists.size(); ++u) {
    indptr[u + 1] = indptr[u] + int64_t(lists[u].size());
    indices.insert(indices.end(), lists[u].begin(), lists[u].end());
    longest = std::max<int64_t>(longest, int64_t(lists[u].size()));
  }
  Selection s;
  s.all = false;
  s.per_query_head = per_query_head;
  s.indptr = at::tensor(indptr, at::kLong).to(device);
  s.indices = at::tensor(indices, at::kLong).to(device);
  s.max_count = longest;
  return s;
}

Selection Selection::from_rows(const at::Tensor& rows, bool per_query_head) {
  const int64_t units = rows.size(0), k = rows.size(1);
  Selection s;
  s.all = false;
  s.per_query_head = per_query_head;
  s.indptr = at::arange(units + 1, rows.options().dtype(at::kLong)) * k;
  s.indices = rows.to(at::kLong).reshape({units * k});
  s.max_count = k;
  return s;
}

std::vector<std::vector<int64_t>> Selection::lists() const {
  at::Tensor ptr = indptr.to(at::kCPU).contiguous(), idx = indices.to(at::kCPU).contiguous();
  const int64_t* p = ptr.data_ptr<int64_t>();
  const int64_t* i = idx.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(units()));
  for (int64_t u = 0; u < units(); ++u) out[size_t(u)].assign(i + p[u], i + p[u + 1]);
  return out;
}

}  // namespace kvb
