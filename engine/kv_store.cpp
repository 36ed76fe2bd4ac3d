#include "engine/kv_store.h"

#include <ATen/TensorIndexing.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "engine/device.h"
#include "engine/kernel_adapter.h"

namespace kvb {

LayerKV::LayerKV(int num_kv_heads, int head_dim, const at::TensorOptions& options)
    : head_dim_(head_dim),
      dtype_(options.dtype().toScalarType()),
      device_(options.device()),
      heads_(num_kv_heads) {
  k_pool_ = at::empty({0, head_dim}, options);
  v_pool_ = at::empty({0, head_dim}, options);
}

const at::Tensor& LayerKV::device_row_table() const {
  if (row_table_.defined()) return row_table_;
  size_t widest = 1;
  for (const Head& h : heads_) widest = std::max(widest, h.blocks.size());
  std::vector<int64_t> blocks(heads_.size() * widest, 0);  // the block table [Hkv, widest]
  for (size_t hi = 0; hi < heads_.size(); ++hi)
    std::copy(heads_[hi].blocks.begin(), heads_[hi].blocks.end(), blocks.begin() + hi * widest);
  // Expanded on the device: the host copies 16x fewer values (once per table change).
  const at::Tensor table =
      host_to_device(blocks, device_).view({int64_t(heads_.size()), int64_t(widest), 1});
  const at::Tensor slot = at::arange(kKvBlockSize, table.options());  // [16]
  row_table_ = (table * kKvBlockSize + slot).view({int64_t(heads_.size()), -1});
  return row_table_;
}

LayerKV::LogicalTable LayerKV::logical_table() const {
  const at::Tensor& slots = device_row_table();  // [Hkv, W]
  bool same_front = true;
  for (const Head& h : heads_) same_front = same_front && h.front == heads_[0].front;
  if (same_front) return {slots, heads_.empty() ? 0 : heads_[0].front};
  if (!shifted_table_.defined()) {
    std::vector<int64_t> fronts;
    for (const Head& h : heads_) fronts.push_back(h.front);
    const int64_t width = slots.size(1);
    // Column i of head h is slot front[h] + i; columns past a head's last slot are never read,
    // so they may repeat it.
    const at::Tensor columns = (at::arange(width, slots.options()).unsqueeze(0) +
                                host_to_device(fronts, device_).unsqueeze(1))
                                   .clamp_max(width - 1);  // [Hkv, W]
    shifted_table_ = slots.gather(1, columns);
  }
  return {shifted_table_, 0};
}

void LayerKV::blocks_changed() {
  row_table_ = at::Tensor();
  shifted_table_ = at::Tensor();
}

void LayerKV::grow_pool(int64_t min_blocks) {
  // A quarter more, not double: a GPU holding a 128k-token cache cannot afford twice of it.
  int64_t new_capacity = std::max<int64_t>(min_blocks, capacity_blocks_ + capacity_blocks_ / 4);
  auto grow = [&](at::Tensor& pool) {
    at::Tensor bigger = at::empty({new_capacity * kKvBlockSize, head_dim_}, pool.options());
    if (pool.size(0) > 0) bigger.narrow(0, 0, pool.size(0)).copy_(pool);
    pool = bigger;
  };
  grow(k_pool_);
  grow(v_pool_);
  std::vector<int32_t> added;
  for (int64_t b = capacity_blocks_; b < new_capacity; ++b) added.push_back(static_cast<int32_t>(b));
  free_block_ids(added.begin(), added.end());
  capacity_blocks_ = new_capacity;
}

// free_blocks_ is a min-heap: a prefill allocates a block per 16 tokens of each head from a
// free list as long as the prompt's, and a scan for its lowest id made that quadratic (at 128k
// tokens of 8 heads, 65 536 blocks a layer: 2e9 comparisons a layer, most of a 49 s prefill on
// the H100's host).
void LayerKV::free_block_ids(std::vector<int32_t>::const_iterator begin,
                             std::vector<int32_t>::const_iterator end) {
  for (auto it = begin; it != end; ++it) {
    free_blocks_.push_back(*it);
    std::push_heap(free_blocks_.begin(), free_blocks_.end(), std::greater<>());
  }
}

int32_t LayerKV::allocate_block() {
  if (free_blocks_.empty()) grow_pool(capacity_blocks_ + 1);
  // Lowest free id first keeps a head's blocks close together in the pool.
  std::pop_heap(free_blocks_.begin(), free_blocks_.end(), std::greater<>());
  const int32_t id = free_blocks_.back();
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
    needed += (h.front + h.size + count + kKvBlockSize - 1) / kKvBlockSize -
              int64_t(h.blocks.size());
  if (needed > int64_t(free_blocks_.size()))
    grow_pool(capacity_blocks_ + needed - int64_t(free_blocks_.size()));
  if (needed > 0) blocks_changed();
  at::Tensor k_src = k.to(device_, dtype_).reshape({-1, head_dim_});  // [Hkv * count, d]
  at::Tensor v_src = v.to(device_, dtype_).reshape({-1, head_dim_});
  // A decode token on heads of equal size: its rows come from the device's block table, so the
  // step copies nothing to the device (the table itself every 16 tokens); else one copy.
  const int64_t before = heads_[0].size;
  bool uniform = count == 1;
  for (const Head& h : heads_) uniform = uniform && h.size == before;
  std::vector<int64_t> rows;  // head-major, like k_src; only when not uniform
  for (Head& h : heads_) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t logical = h.size + i;
      if ((h.front + logical) / kKvBlockSize >= int64_t(h.blocks.size()))
        h.blocks.push_back(allocate_block());
      if (!uniform) rows.push_back(row_of(h, logical));
      h.positions.push_back(first_position + i);
    }
    h.size += count;
  }
  at::Tensor index;  // [Hkv * count]
  if (uniform) {
    const LogicalTable rows_of = logical_table();
    index = rows_of.table.select(1, rows_of.offset + before);
  } else {
    index = host_to_device(rows, device_);
  }
  write_kv_rows(k_pool_, v_pool_, index, k_src, v_src);  // one kernel call where it can
}

void LayerKV::keep(int head, const std::vector<int64_t>& logical_indices, Compaction how) {
  check_kept(head, logical_indices);
  RowMoves moves;
  compact(head, logical_indices, how, moves);
  move_rows(moves);
}

void LayerKV::keep(const std::vector<std::vector<int64_t>>& kept, Compaction how) {
  if (kept.size() != heads_.size())
    throw std::logic_error("LayerKV::keep: one list of entries per head expected");
  for (size_t h = 0; h < kept.size(); ++h) check_kept(int(h), kept[h]);  // before any change
  RowMoves moves;
  for (size_t h = 0; h < kept.size(); ++h) compact(int(h), kept[h], how, moves);
  move_rows(moves);
}

void LayerKV::drop(const std::vector<EntryRange>& dropped, Compaction how) {
  if (dropped.size() != heads_.size())
    throw std::logic_error("LayerKV::drop: one range of entries per head expected");
  for (size_t hi = 0; hi < dropped.size(); ++hi)  // all checked before any head changes
    if (dropped[hi].begin < 0 || dropped[hi].begin > dropped[hi].end ||
        dropped[hi].end > heads_[hi].size)
      throw std::logic_error("LayerKV::drop: the range must lie within the head's entries");
  RowMoves moves;
  for (size_t hi = 0; hi < dropped.size(); ++hi) {
    const EntryRange r = dropped[hi];
    const Head& h = heads_[hi];
    const int64_t count = r.end - r.begin;
    if (count == 0) continue;
    compact_head(
        int(hi), h.size - count, r.begin, h.size - r.end,
        [&](int64_t i) { return i < r.begin ? i : i + count; },
        [&](std::vector<int64_t>& positions) {
          positions.erase(positions.begin() + r.begin, positions.begin() + r.end);
        },
        how, moves);
  }
  move_rows(moves);
}

void LayerKV::check_kept(int head, const std::vector<int64_t>& logical_indices) const {
  const Head& h = heads_[head];
  for (size_t i = 0; i < logical_indices.size(); ++i) {
    int64_t idx = logical_indices[i];
    if (idx < 0 || idx >= h.size || (i > 0 && idx <= logical_indices[i - 1]))
      throw std::logic_error("LayerKV::keep: indices must be sorted, unique and resident");
  }
}

void LayerKV::compact(int head, const std::vector<int64_t>& logical_indices, Compaction how,
                      RowMoves& moves) {
  const Head& h = heads_[head];
  const int64_t kept = int64_t(logical_indices.size());
  if (kept == h.size) return;  // sorted, unique and resident: every entry, nothing changes
  auto kept_at = [&](int64_t i) { return logical_indices[size_t(i)]; };
  // Entries that stay where they are: a prefix when the front stays, a suffix when the back
  // stays (then the front advances by `dropped`). Only the others move.
  int64_t same_front = 0, same_back = 0;
  while (same_front < kept && kept_at(same_front) == same_front) ++same_front;
  while (same_back < kept && kept_at(kept - 1 - same_back) == h.size - 1 - same_back) ++same_back;
  compact_head(
      head, kept, same_front, same_back, kept_at,
      [&](std::vector<int64_t>& positions) {
        std::vector<int64_t> kept_positions(static_cast<size_t>(kept));
        for (int64_t i = 0; i < kept; ++i) kept_positions[size_t(i)] = positions[size_t(kept_at(i))];
        positions = std::move(kept_positions);
      },
      how, moves);
}

template <typename KeptAt, typename KeepPositions>
void LayerKV::compact_head(int head, int64_t kept, int64_t same_front, int64_t same_back,
                           KeptAt kept_at, KeepPositions keep_positions, Compaction how,
                           RowMoves& moves) {
  Head& h = heads_[head];
  const int64_t dropped = h.size - kept;
  // Blocks the head needs once the next token is appended, with its front at `front`: moving
  // the front may not make that append take a block keeping it would not (the pool would grow
  // past the peak a method held before; H2O at B = 64 by a quarter).
  auto blocks_after_append = [&](int64_t front) {
    return (front % kKvBlockSize + kept + 1 + kKvBlockSize - 1) / kKvBlockSize;
  };
  const bool shorter_back = how == Compaction::kShorterSide && dropped < kKvBlockSize &&
                            same_back > same_front;
  const bool back_stays =
      shorter_back && blocks_after_append(h.front + dropped) <= blocks_after_append(h.front);
  // Where the front may not advance, a front past slot 0 returns there (every kept entry
  // moves, a few more than keeping the front moves), so that it can advance again over the
  // next steps (StreamingLLM at B = 40: 4 rows a step for 7 steps, then 40, not 36 a step).
  const bool rebase = shorter_back && !back_stays && h.front > 0;
  // An emptied head starts again at slot 0 too (its blocks all go).
  const int64_t front = kept == 0 || rebase ? 0 : back_stays ? h.front + dropped : h.front;
  const int64_t move_begin = back_stays || rebase ? 0 : same_front;
  const int64_t move_end = back_stays ? kept - same_back : kept;
  for (int64_t i = move_begin; i < move_end; ++i) {
    moves.src.push_back(row_of(h, kept_at(i)));
    moves.dst.push_back(row_at_slot(h, front + i));
  }
  keep_positions(h.positions);
  h.size = kept;
  if (front != h.front) shifted_table_ = at::Tensor();
  h.front = front;
  // Blocks wholly before the front or after the last entry are freed; they keep their rows
  // until the next allocation, after move_rows has read them.
  const size_t leading = size_t(h.front / kKvBlockSize);
  if (leading > 0) {
    free_block_ids(h.blocks.begin(), h.blocks.begin() + leading);
    h.blocks.erase(h.blocks.begin(), h.blocks.begin() + leading);
    h.front %= kKvBlockSize;
    blocks_changed();
  }
  const size_t blocks_needed = size_t((h.front + kept + kKvBlockSize - 1) / kKvBlockSize);
  if (h.blocks.size() > blocks_needed) {
    free_block_ids(h.blocks.begin() + blocks_needed, h.blocks.end());
    h.blocks.resize(blocks_needed);
    blocks_changed();
  }
}

void LayerKV::move_rows(const RowMoves& moves) {
  if (moves.src.empty()) return;
  std::vector<int64_t> rows = moves.src;  // [src..., dst...]: one copy to the device
  rows.insert(rows.end(), moves.dst.begin(), moves.dst.end());
  const at::Tensor both = host_to_device(rows, device_);
  const int64_t n = int64_t(moves.src.size());
  rows_moved_ += n;
  const at::Tensor src = both.narrow(0, 0, n), dst = both.narrow(0, n, n);
  // The sources are copied out before any destination is written (a row may be both).
  write_kv_rows(k_pool_, v_pool_, dst, k_pool_.index_select(0, src), v_pool_.index_select(0, src));
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
  blocks_changed();
}

at::Tensor LayerKV::physical_rows(int head, const at::Tensor& logical) const {
  const LogicalTable rows = logical_table();
  return rows.table[head]
      .narrow(0, rows.offset, rows.table.size(1) - rows.offset)
      .index_select(0, logical.to(device_, at::kLong).reshape({-1}));
}

at::Tensor LayerKV::physical_rows(const at::Tensor& heads, const at::Tensor& logical) const {
  const LogicalTable rows = logical_table();  // [Hkv, W]
  const at::Tensor flat = rows.table.view({-1});
  return flat.narrow(0, rows.offset, flat.size(0) - rows.offset)
      .index_select(0, heads * rows.table.size(1) + logical);
}

at::Tensor LayerKV::physical_rows_per_head(const at::Tensor& logical) const {
  const LogicalTable rows = logical_table();
  const at::Tensor table = rows.table.narrow(1, rows.offset, rows.table.size(1) - rows.offset);
  return table.unsqueeze(1).expand({table.size(0), logical.size(1), table.size(1)}).gather(2, logical);
}

at::Tensor LayerKV::all_physical_rows(int head) const {
  const LogicalTable rows = logical_table();
  return rows.table[head].narrow(0, rows.offset, heads_[head].size);
}

bool LayerKV::equally_filled() const {
  for (const Head& h : heads_)
    if (h.size != heads_[0].size) return false;
  return true;
}

at::Tensor LayerKV::uniform_rows() const {
  if (!equally_filled())
    throw std::logic_error("LayerKV::uniform_rows: heads hold different sizes");
  return leading_rows(heads_.empty() ? 0 : heads_[0].size);
}

at::Tensor LayerKV::leading_rows(int64_t n) const {
  const LogicalTable rows = logical_table();
  return rows.table.narrow(1, rows.offset, n);
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

at::Tensor LayerKV::keys_in_range(int64_t begin, int64_t end) const {
  if (!equally_filled() || begin < 0 || begin > end || (num_heads() > 0 && end > size(0)))
    throw std::logic_error("LayerKV::keys_in_range: needs equally filled heads and 0 <= begin "
                           "<= end <= their size");
  // [Hkv, n] rows, a view of the table: one indexing operator, no copy of them first.
  const at::Tensor rows = leading_rows(end).narrow(1, begin, end - begin);
  return k_pool_.index({rows});  // [Hkv, n, d]
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
