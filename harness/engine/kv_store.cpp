#include "harness/engine/kv_store.h"

#include <algorithm>
#include <stdexcept>

namespace kvb {

LayerKV::LayerKV(int num_kv_heads, int head_dim, at::ScalarType dtype)
    : head_dim_(head_dim), dtype_(dtype), heads_(num_kv_heads) {
  k_pool_ = at::empty({0, head_dim}, at::TensorOptions().dtype(dtype));
  v_pool_ = at::empty({0, head_dim}, at::TensorOptions().dtype(dtype));
}

void LayerKV::grow_pool(int64_t min_blocks) {
  int64_t new_capacity = std::max<int64_t>(min_blocks, capacity_blocks_ * 2);
  auto grow = [&](at::Tensor& pool) {
    at::Tensor bigger = at::empty({new_capacity * kKvBlockSize, head_dim_}, pool.options());
    if (pool.size(0) > 0) bigger.narrow(0, 0, pool.size(0)).copy_(pool);
    pool = bigger;
  };
  grow(k_pool_);
  grow(v_pool_);
  for (int64_t b = new_capacity - 1; b >= capacity_blocks_; --b)
    free_blocks_.push_back(static_cast<int32_t>(b));
  capacity_blocks_ = new_capacity;
}

int32_t LayerKV::allocate_block() {
  if (free_blocks_.empty()) grow_pool(capacity_blocks_ + 1);
  // Lowest free id first keeps a head's blocks close together in the pool.
  auto lowest = std::min_element(free_blocks_.begin(), free_blocks_.end());
  int32_t id = *lowest;
  *lowest = free_blocks_.back();
  free_blocks_.pop_back();
  return id;
}

void LayerKV::append(const at::Tensor& k, const at::Tensor& v, int64_t position) {
  append_many(k.unsqueeze(1), v.unsqueeze(1), position);
}

void LayerKV::append_many(const at::Tensor& k, const at::Tensor& v, int64_t first_position) {
  const int64_t count = k.size(1);
  int64_t needed = 0;
  for (const Head& h : heads_)
    needed += (h.size + count + kKvBlockSize - 1) / kKvBlockSize - int64_t(h.blocks.size());
  if (needed > int64_t(free_blocks_.size()))
    grow_pool(capacity_blocks_ + needed - int64_t(free_blocks_.size()));
  at::Tensor k_src = k.to(dtype_).contiguous(), v_src = v.to(dtype_).contiguous();
  for (int hi = 0; hi < num_heads(); ++hi) {
    Head& h = heads_[hi];
    std::vector<int64_t> rows(count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t logical = h.size + i;
      if (logical / kKvBlockSize >= int64_t(h.blocks.size())) h.blocks.push_back(allocate_block());
      rows[i] = row_of(h, logical);
      h.positions.push_back(first_position + i);
    }
    h.size += count;
    at::Tensor index = at::tensor(rows, at::kLong);
    k_pool_.index_copy_(0, index, k_src[hi]);
    v_pool_.index_copy_(0, index, v_src[hi]);
  }
}

void LayerKV::keep(int head, const std::vector<int64_t>& logical_indices) {
  Head& h = heads_[head];
  for (size_t i = 0; i < logical_indices.size(); ++i) {
    int64_t idx = logical_indices[i];
    if (idx < 0 || idx >= h.size || (i > 0 && idx <= logical_indices[i - 1]))
      throw std::logic_error("LayerKV::keep: indices must be sorted, unique and resident");
  }
  const int64_t kept = int64_t(logical_indices.size());
  if (kept > 0) {
    // Moving entries forward never overwrites a source not yet read: destination <= source.
    at::Tensor src = physical_rows(head, at::tensor(logical_indices, at::kLong));
    std::vector<int64_t> dst_logical(kept);
    for (int64_t i = 0; i < kept; ++i) dst_logical[i] = i;
    at::Tensor dst = physical_rows(head, at::tensor(dst_logical, at::kLong));
    k_pool_.index_copy_(0, dst, k_pool_.index_select(0, src));
    v_pool_.index_copy_(0, dst, v_pool_.index_select(0, src));
  }
  std::vector<int64_t> positions(kept);
  for (int64_t i = 0; i < kept; ++i) positions[i] = h.positions[logical_indices[i]];
  h.positions = std::move(positions);
  h.size = kept;
  const size_t blocks_needed = size_t((kept + kKvBlockSize - 1) / kKvBlockSize);
  while (h.blocks.size() > blocks_needed) {
    free_blocks_.push_back(h.blocks.back());
    h.blocks.pop_back();
  }
}

void LayerKV::shrink_to_fit() {
  const int64_t used = blocks_in_use();
  if (used == capacity_blocks_) return;
  // Renumber the owned blocks 0..used-1 in a fresh, exactly sized pool.
  at::Tensor k_new = at::empty({used * kKvBlockSize, head_dim_}, k_pool_.options());
  at::Tensor v_new = at::empty({used * kKvBlockSize, head_dim_}, v_pool_.options());
  int32_t next = 0;
  for (Head& h : heads_) {
    for (int32_t& block : h.blocks) {
      k_new.narrow(0, int64_t(next) * kKvBlockSize, kKvBlockSize)
          .copy_(k_pool_.narrow(0, int64_t(block) * kKvBlockSize, kKvBlockSize));
      v_new.narrow(0, int64_t(next) * kKvBlockSize, kKvBlockSize)
          .copy_(v_pool_.narrow(0, int64_t(block) * kKvBlockSize, kKvBlockSize));
      block = next++;
    }
  }
  k_pool_ = k_new;
  v_pool_ = v_new;
  capacity_blocks_ = used;
  free_blocks_.clear();
}

at::Tensor LayerKV::physical_rows(int head, const at::Tensor& logical) const {
  const Head& h = heads_[head];
  at::Tensor idx = logical.to(at::kLong).contiguous();
  at::Tensor rows = at::empty_like(idx);
  const int64_t* in = idx.data_ptr<int64_t>();
  int64_t* out = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) out[i] = row_of(h, in[i]);
  return rows;
}

at::Tensor LayerKV::all_physical_rows(int head) const {
  return physical_rows(head, at::arange(heads_[head].size, at::kLong));
}

at::Tensor LayerKV::keys(int head) const { return k_pool_.index_select(0, all_physical_rows(head)); }
at::Tensor LayerKV::values(int head) const {
  return v_pool_.index_select(0, all_physical_rows(head));
}
at::Tensor LayerKV::gather_keys(int head, const at::Tensor& logical) const {
  return k_pool_.index_select(0, physical_rows(head, logical));
}
at::Tensor LayerKV::gather_values(int head, const at::Tensor& logical) const {
  return v_pool_.index_select(0, physical_rows(head, logical));
}

int64_t LayerKV::entries() const {
  int64_t total = 0;
  for (const Head& h : heads_) total += h.size;
  return total;
}

int64_t LayerKV::blocks_in_use() const {
  int64_t total = 0;
  for (const Head& h : heads_) total += int64_t(h.blocks.size());
  return total;
}

int64_t LayerKV::allocated_bytes() const {
  return 2 * capacity_blocks_ * kKvBlockSize * head_dim_ * int64_t(at::elementSize(dtype_));
}

int64_t LayerKV::used_bytes() const {
  return 2 * blocks_in_use() * kKvBlockSize * head_dim_ * int64_t(at::elementSize(dtype_));
}

double LayerKV::fragmentation() const {
  const int64_t slots = blocks_in_use() * kKvBlockSize;
  return slots == 0 ? 0.0 : 1.0 - double(entries()) / double(slots);
}

}  // namespace kvb
