// The KV cache of one layer, paged per KV head: each head owns its own list of 16-entry blocks
// in a pool shared by the layer's heads, so heads may hold different numbers of entries
// (ragged), eviction really frees blocks, and freed blocks are reused by later appends.
// The pools live on the model's device in its dtype. The block table is kept on the host (the
// bookkeeping of appends and evictions) and mirrored on the device as a table of pool rows,
// copied again only after it changed (a new block every 16 tokens, an eviction), so row
// lookups are device ops.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvb {

constexpr int64_t kKvBlockSize = 16;

// How LayerKV::keep closes the gaps left by dropped entries.
enum class Compaction {
  // The entries after the first dropped one move forward: the kept entries fill the fewest
  // blocks their front allows (the front is slot 0 unless kShorterSide moved it), as prefill
  // evictions and KV-Compress's block-freeing plans need (the memory they hold is measured).
  kKeepFront,
  // When fewer than a block's worth of entries go, the side of them with fewer entries moves:
  // the entries before them move back and the head's front advances (an eviction per decode
  // step: after StreamingLLM's 4 sinks this moves 4 rows, not B - 4). Only where the next
  // append then needs no block that kKeepFront would not need, so a method's peak memory is
  // as before: StreamingLLM at B a multiple of 16 always qualifies, H2O (B - 1 entries after
  // its eviction) at such B never does. Where the front may not advance, a front past slot 0 returns
  // there (all kept entries move) so that it can advance again over the next steps. The head
  // may hold one partly filled block more between steps.
  kShorterSide,
};

class LayerKV {
 public:
  // options: the pools' dtype and device.
  LayerKV(int num_kv_heads, int head_dim, const at::TensorOptions& options);

  int num_heads() const { return static_cast<int>(heads_.size()); }
  int head_dim() const { return head_dim_; }
  int64_t size(int head) const { return heads_[head].size; }
  // Every head holds the same number of entries.
  bool equally_filled() const;
  // Original token position of each resident entry of `head`, in logical order.
  const std::vector<int64_t>& positions(int head) const { return heads_[head].positions; }

  // Appends one token to every head. k, v: [Hkv, d].
  void append(const at::Tensor& k, const at::Tensor& v, int64_t position);
  // Appends L tokens to every head, positions first_position.. . k, v: [Hkv, L, d].
  void append_many(const at::Tensor& k, const at::Tensor& v, int64_t first_position);

  // Keeps only the listed logical entries of `head` (sorted ascending, unique), compacting them
  // as `how` says and freeing the blocks no longer needed.
  void keep(int head, const std::vector<int64_t>& logical_indices,
            Compaction how = Compaction::kKeepFront);
  // The same for every head at once (kept[h] for head h; all of a head's entries leave it as
  // it is), with one copy of row indices to the device and one row move per pool for the whole
  // layer: a method evicting on every decode step (StreamingLLM, H2O) would otherwise pay both
  // per head.
  void keep(const std::vector<std::vector<int64_t>>& kept,
            Compaction how = Compaction::kKeepFront);
  // Drops the entries [begin, end) of every head h given by dropped[h] (an empty range: none),
  // as keep() with every other entry listed would, in host work proportional to the rows
  // moved, not to the entries (StreamingLLM drops one entry after its sinks on every step).
  struct EntryRange {
    int64_t begin = 0, end = 0;
  };
  void drop(const std::vector<EntryRange>& dropped, Compaction how = Compaction::kKeepFront);
  // Releases the pool's unused capacity (after a prefill eviction) so resident bytes shrink.
  void shrink_to_fit();

  // Physical rows in the pool of the given logical entries of `head`. logical: [n] int64 (any
  // device); returns [n] int64 on the pools' device.
  at::Tensor physical_rows(int head, const at::Tensor& logical) const;
  // The same for entries of several heads at once: heads, logical: [n] int64 on the device.
  at::Tensor physical_rows(const at::Tensor& heads, const at::Tensor& logical) const;
  // The same for lists of k entries per head: logical [Hkv, u, k] int64 on the device (u lists
  // for each head) -> [Hkv, u, k], in one gather.
  at::Tensor physical_rows_per_head(const at::Tensor& logical) const;
  // Every entry's row of `head`, [n] int64: a view of the device's row table (do not write to it).
  at::Tensor all_physical_rows(int head) const;
  // Every entry's row when the heads are equally_filled(), n entries each: [Hkv, n] int64 on the
  // pools' device, a view of the device's row table (do not write to it; rows are not
  // contiguous with each other unless the entries fill their blocks exactly): a decode step of
  // Full asks for it on every layer, and the attention kernels read it in place.
  at::Tensor uniform_rows() const;
  // The same for heads of any sizes: each head's first n entries' rows, [Hkv, n] (n at most the
  // longest head's size), a view of the row table. Past a head's own size its columns are pool
  // row ids that are not its entries: in range, but their contents arbitrary (never written,
  // maybe), never to be read.
  at::Tensor leading_rows(int64_t n) const;
  // Gathered copies. Returns [n, d].
  at::Tensor keys(int head) const;
  at::Tensor values(int head) const;
  at::Tensor gather_keys(int head, const at::Tensor& logical) const;
  at::Tensor gather_values(int head, const at::Tensor& logical) const;
  // Every head's keys of the logical entries [begin, end), [Hkv, end - begin, d], in one gather
  // (the heads equally_filled(), end <= their size): where a loop over the heads made two
  // operators a head.
  at::Tensor keys_in_range(int64_t begin, int64_t end) const;
  // The pools themselves, [capacity_blocks * 16, d], for kernels that index rows directly.
  const at::Tensor& key_pool() const { return k_pool_; }
  const at::Tensor& value_pool() const { return v_pool_; }

  int64_t entries() const;          // resident entries over all heads
  int64_t rows_moved() const { return rows_moved_; }  // pool rows copied by keep() so far
  int64_t blocks_in_use() const;
  int64_t allocated_bytes() const;  // K and V pool capacity in bytes (what the process holds)
  int64_t used_bytes() const;       // bytes of blocks owned by heads
  // Share of slots in owned blocks that hold no entry (partially filled last blocks).
  double fragmentation() const;

 private:
  struct Head {
    std::vector<int32_t> blocks;  // block ids, in logical order
    std::vector<int64_t> positions;
    int64_t size = 0;
    int64_t front = 0;  // slot of logical entry 0 in blocks[0], in [0, 16)
  };
  // Pool rows to copy (src[i] to dst[i]) when heads are compacted.
  struct RowMoves {
    std::vector<int64_t> src, dst;
  };
  // logic_error unless the list is sorted, unique and resident (the keep() contract).
  void check_kept(int head, const std::vector<int64_t>& logical_indices) const;
  // Compacts `head` to the listed entries (checked already): records its row moves and
  // updates its bookkeeping; the rows move in move_rows().
  void compact(int head, const std::vector<int64_t>& logical_indices, Compaction how,
               RowMoves& moves);
  // What compact() and drop() share: `kept` entries stay, kept_at(i) the old logical index of
  // the i-th; the first `same_front` and the last `same_back` of them keep their logical
  // offsets from the front and the back; keep_positions(positions) keeps theirs.
  template <typename KeptAt, typename KeepPositions>
  void compact_head(int head, int64_t kept, int64_t same_front, int64_t same_back,
                    KeptAt kept_at, KeepPositions keep_positions, Compaction how,
                    RowMoves& moves);
  void move_rows(const RowMoves& moves);
  int32_t allocate_block();
  void free_block_ids(std::vector<int32_t>::const_iterator begin,
                      std::vector<int32_t>::const_iterator end);
  void grow_pool(int64_t min_blocks);
  static int64_t row_at_slot(const Head& head, int64_t slot) {
    return int64_t(head.blocks[slot / kKvBlockSize]) * kKvBlockSize + slot % kKvBlockSize;
  }
  static int64_t row_of(const Head& head, int64_t logical) {
    return row_at_slot(head, head.front + logical);
  }
  // [Hkv, 16 * most blocks of a head] int64 on the pools' device: the pool row of each head's
  // slot (slots of blocks a head lacks: 0), so a row lookup is one index_select.
  const at::Tensor& device_row_table() const;
  // The row table seen by logical entry: head h's entry i at column offset + i of table
  // ([Hkv, W], contiguous). When the heads' fronts agree, the slot table and that front (no
  // device op); else a copy gathered with each head's front, cached until the next change.
  struct LogicalTable {
    at::Tensor table;
    int64_t offset;
  };
  LogicalTable logical_table() const;
  void blocks_changed();  // the device tables are stale

  int head_dim_;
  at::ScalarType dtype_;
  at::Device device_;
  mutable at::Tensor row_table_;  // undefined when the host's blocks changed since the last copy
  mutable at::Tensor shifted_table_;  // logical_table()'s gathered copy; undefined when stale
  std::vector<Head> heads_;
  at::Tensor k_pool_, v_pool_;  // [capacity_blocks * 16, d]
  int64_t capacity_blocks_ = 0;
  std::vector<int32_t> free_blocks_;  // a min-heap (std::greater): allocate_block takes the lowest
  int64_t rows_moved_ = 0;
};

}  // namespace kvb
