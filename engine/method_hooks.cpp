#include "engine/method_hooks.h"

#include <algorithm>

#include "engine/device.h"

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
  s.indptr = host_to_device(indptr, device);
  s.indices = host_to_device(indices, device);
  s.max_count = longest;
  for (const std::vector<int64_t>& list : lists) s.host_counts.push_back(int64_t(list.size()));
  return s;
}

at::Tensor equal_counts_indptr(int64_t units, int64_t k, const at::TensorOptions& longs) {
  return k > 0 ? at::arange(0, (units + 1) * k, k, longs) : at::zeros({units + 1}, longs);
}

const at::Tensor& EqualCountsIndptr::get(int64_t units, int64_t k, const at::TensorOptions& longs) {
  if (units != units_ || k != k_ || indptr_.device() != longs.device()) {
    indptr_ = equal_counts_indptr(units, k, longs);
    units_ = units;
    k_ = k;
  }
  return indptr_;
}

Selection Selection::from_rows(const at::Tensor& rows, bool per_query_head,
                               EqualCountsIndptr* indptr) {
  const int64_t units = rows.size(0), k = rows.size(1);
  const at::TensorOptions longs = rows.options().dtype(at::kLong);
  Selection s;
  s.all = false;
  s.per_query_head = per_query_head;
  s.indptr = indptr ? indptr->get(units, k, longs) : equal_counts_indptr(units, k, longs);
  s.indices = rows.to(at::kLong).reshape({units * k});
  s.max_count = k;
  s.host_counts.assign(size_t(units), k);
  return s;
}

Selection Selection::from_row_prefixes(const at::Tensor& rows, const at::Tensor& counts,
                                       bool per_query_head) {
  const int64_t units = rows.size(0), k = rows.size(1);
  Selection s;
  s.all = false;
  s.per_query_head = per_query_head;
  s.indptr = at::constant_pad_nd(counts.to(at::kLong).reshape({units}).cumsum(0), {1, 0});
  s.indices = rows.to(at::kLong).reshape({units * k});
  s.row_width = k;
  return s;
}

std::vector<std::vector<int64_t>> Selection::lists() const {
  at::Tensor ptr = indptr.to(at::kCPU).contiguous(), idx = indices.to(at::kCPU).contiguous();
  const int64_t* p = ptr.data_ptr<int64_t>();
  const int64_t* i = idx.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(units()));
  for (int64_t u = 0; u < units(); ++u) {
    const int64_t* first = row_width > 0 ? i + u * row_width : i + p[u];
    out[size_t(u)].assign(first, first + (p[u + 1] - p[u]));
  }
  return out;
}

}  // namespace kvb
