#include "engine/kv_store.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

// k[h][i] filled with a value that identifies (head, position).
at::Tensor tagged(int heads, int64_t count, int d, int64_t first, float offset = 0) {
  at::Tensor t = at::empty({heads, count, d});
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < count; ++i) t[h][i].fill_(offset + 1000.0f * h + float(first + i));
  return t;
}

TEST(LayerKV, AppendKeepAndGatherPreserveEntries) {
  LayerKV kv(2, 4, at::kFloat);
  kv.append_many(tagged(2, 40, 4, 0), tagged(2, 40, 4, 0, 0.5f), 0);
  EXPECT_EQ(kv.size(0), 40);
  EXPECT_EQ(kv.blocks_in_use(), 2 * 3);  // ceil(40 / 16) per head
  kv.keep(0, {0, 1, 17, 39});
  kv.keep(1, {5});
  EXPECT_EQ(kv.size(0), 4);
  EXPECT_EQ(kv.size(1), 1);
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{0, 1, 17, 39}));
  at::Tensor k0 = kv.keys(0);
  EXPECT_EQ(k0[2][0].item<float>(), 17.0f);
  EXPECT_EQ(k0[3][3].item<float>(), 39.0f);
  EXPECT_EQ(kv.values(1)[0][0].item<float>(), 1005.5f);
  EXPECT_EQ(kv.blocks_in_use(), 2);
}

TEST(LayerKV, EvictionShrinksMemoryAndFreedBlocksAreReused) {
  LayerKV kv(2, 8, at::kFloat);
  kv.append_many(tagged(2, 64, 8, 0), tagged(2, 64, 8, 0), 0);
  const int64_t full_bytes = kv.allocated_bytes();
  EXPECT_EQ(full_bytes, 2 * 2 * 64 * 8 * 4);  // K and V, 2 heads, 64 entries, d 8, f32
  std::vector<int64_t> keep;
  for (int64_t i = 48; i < 64; ++i) keep.push_back(i);
  kv.keep(0, keep);
  kv.keep(1, keep);
  EXPECT_EQ(kv.allocated_bytes(), full_bytes);  // freed, not yet returned
  const int64_t blocks_before = kv.blocks_in_use();
  kv.append(tagged(2, 1, 8, 64).select(1, 0), tagged(2, 1, 8, 64).select(1, 0), 64);
  EXPECT_EQ(kv.blocks_in_use(), blocks_before + 2);  // a new block per head, from the free list
  EXPECT_EQ(kv.allocated_bytes(), full_bytes);       // no growth: the freed blocks were reused
  kv.shrink_to_fit();
  EXPECT_EQ(kv.allocated_bytes(), 2 * 4 * 16 * 8 * 4);  // 4 blocks of 16 entries
  EXPECT_EQ(kv.keys(1)[16][0].item<float>(), 1064.0f);  // contents survive renumbering
  EXPECT_EQ(kv.keys(0)[0][0].item<float>(), 48.0f);
}

// A head's new blocks are the lowest free ids, whatever order they were freed in (the free list
// is a heap since a scan of it made a prefill quadratic): head 1's blocks 5-7 are freed before
// head 0's 1-3, and the heads then take 1, 2, 3 and 5, 6, 7 in that order (a last-freed-first
// list would give head 0 blocks 3, 2, 1).
TEST(LayerKV, FreedBlocksAreReusedLowestIdFirst) {
  LayerKV kv(2, 4, at::kFloat);
  kv.append_many(tagged(2, 64, 4, 0), tagged(2, 64, 4, 0), 0);  // head 0: blocks 0-3, head 1: 4-7
  std::vector<int64_t> first_block(16);
  for (int64_t i = 0; i < 16; ++i) first_block[size_t(i)] = i;
  kv.keep(1, first_block);
  kv.keep(0, first_block);
  kv.append_many(tagged(2, 48, 4, 16), tagged(2, 48, 4, 16), 16);
  auto blocks_of = [&](int head) {
    const at::Tensor rows = kv.all_physical_rows(head);  // [64]
    std::vector<int64_t> blocks;
    for (int64_t i = 0; i < rows.size(0); i += 16) blocks.push_back(rows[i].item<int64_t>() / 16);
    return blocks;
  };
  EXPECT_EQ(blocks_of(0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(blocks_of(1), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(kv.keys(1)[40][0].item<float>(), 1040.0f);  // and the rows went where the table says
}

// kShorterSide moves only the entries on the shorter side of a few dropped ones; every entry
// must still hold its own K and V, also after many single evictions (H2O's decode pattern) and
// a pure truncation.
TEST(LayerKV, RepeatedSingleEvictionsKeepEveryEntrysContents) {
  LayerKV kv(1, 4, at::kFloat);
  kv.append_many(tagged(1, 50, 4, 0), tagged(1, 50, 4, 0, 0.5f), 0);
  std::vector<int64_t> expected(50);
  for (int64_t i = 0; i < 50; ++i) expected[size_t(i)] = i;
  for (int64_t victim : {49, 0, 20, 20, 3, 31}) {  // last, first, middle, ...
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < kv.size(0); ++i)
      if (i != victim) keep.push_back(i);
    kv.keep(0, keep, Compaction::kShorterSide);
    expected.erase(expected.begin() + victim);
  }
  std::vector<int64_t> prefix(expected.begin(), expected.begin() + 30);
  kv.keep(0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
              23, 24, 25, 26, 27, 28, 29});  // truncation: nothing moves
  ASSERT_EQ(kv.positions(0), prefix);
  const at::Tensor k = kv.keys(0), v = kv.values(0);
  for (int64_t i = 0; i < 30; ++i) {
    EXPECT_EQ(k[i][1].item<float>(), float(prefix[size_t(i)])) << "entry " << i;
    EXPECT_EQ(v[i][2].item<float>(), float(prefix[size_t(i)]) + 0.5f) << "entry " << i;
  }
  // Rows moved per victim (entries before it / after it, the fewer, the front side only when
  // fewer): 49 -> 0 (a truncation), 0 -> 0 (the front advances), 20 of 48 -> 20, 20 of 47 -> 20,
  // 3 of 46 -> 3, 31 of 45 -> 13 after it; the truncation 0. Moving the entries after the
  // victim every time would copy 156.
  EXPECT_EQ(kv.rows_moved(), 56);
  // The front advanced by 4 slots: 30 entries over slots 4..33, 3 blocks (2 from slot 0).
  EXPECT_EQ(kv.blocks_in_use(), 3);
}

// StreamingLLM's decode pattern: append a token, drop the oldest entry after the 4 sinks. The
// 4 sinks move, not the B - 4 recent entries; the front's slack never exceeds a block, and the
// rows of every lookup agree with the entries' contents.
TEST(LayerKV, DroppingAfterSinksMovesTheSinksOnly) {
  constexpr int64_t kSinks = 4, kBudget = 48;  // a multiple of 16: every step moves the sinks
  LayerKV kv(3, 4, at::kFloat);
  kv.append_many(tagged(3, 100, 4, 0), tagged(3, 100, 4, 0, 0.5f), 0);
  auto sinks_and_recent = [&](int64_t n) {
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < n; ++i)
      if (i < kSinks || i >= n - (kBudget - kSinks)) kept.push_back(i);
    return kept;
  };
  kv.keep(std::vector<std::vector<int64_t>>(3, sinks_and_recent(100)));  // 64 dropped: front stays
  std::vector<int64_t> expected = sinks_and_recent(100);
  for (int64_t t = 100; t < 150; ++t) {
    kv.append(tagged(3, 1, 4, t).select(1, 0), tagged(3, 1, 4, t, 0.5f).select(1, 0), t);
    expected.push_back(t);
    const int64_t moved_before = kv.rows_moved();
    kv.keep(std::vector<std::vector<int64_t>>(3, sinks_and_recent(kBudget + 1)),
            Compaction::kShorterSide);
    expected.erase(expected.begin() + kSinks);
    ASSERT_EQ(kv.rows_moved() - moved_before, 3 * kSinks) << "step " << t;
    ASSERT_LE(kv.blocks_in_use(), 3 * (kBudget / 16 + 1)) << "step " << t;
  }
  const at::Tensor logical = at::arange(kBudget, at::kLong);
  for (int h = 0; h < 3; ++h) {
    ASSERT_EQ(kv.positions(h), expected) << "head " << h;
    const at::Tensor k = kv.keys(h), v = kv.values(h);
    for (int64_t i = 0; i < kBudget; ++i) {
      EXPECT_EQ(k[i][0].item<float>(), 1000.0f * h + float(expected[size_t(i)])) << i;
      EXPECT_EQ(v[i][3].item<float>(), 1000.0f * h + float(expected[size_t(i)]) + 0.5f) << i;
    }
    EXPECT_TRUE(kv.physical_rows(h, logical).equal(kv.all_physical_rows(h))) << "head " << h;
  }
  const at::Tensor all = at::cat({kv.all_physical_rows(0), kv.all_physical_rows(1),
                                  kv.all_physical_rows(2)});
  EXPECT_TRUE(kv.uniform_rows().equal(all.view({3, -1})));
  const at::Tensor heads = at::arange(3, at::kLong).repeat_interleave(kBudget);
  EXPECT_TRUE(kv.physical_rows(heads, logical.repeat({3})).equal(all));
}

// Heads whose fronts differ (one dropped its first entry, one its last): every lookup, a
// uniform append and a ragged append still find each head's own entries.
TEST(LayerKV, HeadsWithDifferentFrontsFindTheirEntries) {
  LayerKV kv(2, 4, at::kFloat);
  kv.append_many(tagged(2, 45, 4, 0), tagged(2, 45, 4, 0, 0.5f), 0);
  std::vector<int64_t> drop_first, drop_last;
  for (int64_t i = 1; i < 45; ++i) drop_first.push_back(i);
  for (int64_t i = 0; i < 44; ++i) drop_last.push_back(i);
  kv.keep({drop_first, drop_last}, Compaction::kShorterSide);
  EXPECT_EQ(kv.rows_moved(), 0);  // head 0's front advanced, head 1 was truncated
  for (int64_t t = 45; t < 70; ++t)  // the heads' blocks fill at different steps
    kv.append(tagged(2, 1, 4, t).select(1, 0), tagged(2, 1, 4, t, 0.5f).select(1, 0), t);
  kv.append_many(tagged(2, 3, 4, 70), tagged(2, 3, 4, 70, 0.5f), 70);
  ASSERT_EQ(kv.size(0), 72);
  for (int h = 0; h < 2; ++h) {
    const at::Tensor k = kv.keys(h);
    for (int64_t i = 0; i < 72; ++i) {
      const int64_t position = kv.positions(h)[size_t(i)];
      EXPECT_EQ(position, h == 0 ? i + 1 : (i < 44 ? i : i + 1)) << "head " << h;
      EXPECT_EQ(k[i][2].item<float>(), 1000.0f * h + float(position)) << "head " << h;
    }
  }
  const at::Tensor some = at::tensor(std::vector<int64_t>{0, 15, 16, 71}, at::kLong);
  const at::Tensor per_head = kv.physical_rows_per_head(some.view({1, 1, 4}).repeat({2, 1, 1}));
  for (int h = 0; h < 2; ++h) {
    const at::Tensor rows = kv.all_physical_rows(h).index_select(0, some);
    EXPECT_TRUE(kv.physical_rows(h, some).equal(rows)) << "head " << h;
    EXPECT_TRUE(per_head[h][0].equal(rows)) << "head " << h;
    EXPECT_TRUE(kv.physical_rows(at::full({4}, h, at::kLong), some).equal(rows)) << "head " << h;
    EXPECT_TRUE(kv.gather_keys(h, some).equal(kv.keys(h).index_select(0, some)));
  }
  EXPECT_TRUE(kv.uniform_rows().equal(at::stack({kv.all_physical_rows(0), kv.all_physical_rows(1)})));
  // Both heads' keys of entries 15..39 at once (head 0's front advanced, head 1's did not).
  const at::Tensor range = kv.keys_in_range(15, 40);  // [2, 25, 4]
  ASSERT_EQ(range.sizes(), (at::IntArrayRef{2, 25, 4}));
  for (int h = 0; h < 2; ++h) EXPECT_TRUE(range[h].equal(kv.keys(h).narrow(0, 15, 25))) << h;
  EXPECT_EQ(kv.keys_in_range(72, 72).size(1), 0);
  EXPECT_THROW(kv.keys_in_range(70, 73), std::logic_error);
  kv.keep(1, std::vector<int64_t>{0, 1, 2});
  EXPECT_THROW(kv.keys_in_range(0, 2), std::logic_error);  // heads of different sizes
}

// The default compaction keeps the front, so a few entries dropped at the front free a block
// (KV-Compress plans evictions that free whole blocks); kShorterSide moves nothing and holds
// the block. An emptied head frees every block either way.
TEST(LayerKV, KeepingTheFrontFillsTheFewestBlocks) {
  std::vector<int64_t> last16;
  for (int64_t i = 4; i < 20; ++i) last16.push_back(i);
  LayerKV front(1, 4, at::kFloat), shorter(1, 4, at::kFloat);
  for (LayerKV* kv : {&front, &shorter})
    kv->append_many(tagged(1, 20, 4, 0), tagged(1, 20, 4, 0, 0.5f), 0);
  front.keep(0, last16);
  shorter.keep(0, last16, Compaction::kShorterSide);
  EXPECT_EQ(front.rows_moved(), 16);
  EXPECT_EQ(front.blocks_in_use(), 1);
  EXPECT_EQ(shorter.rows_moved(), 0);
  EXPECT_EQ(shorter.blocks_in_use(), 2);
  EXPECT_TRUE(front.keys(0).equal(shorter.keys(0)));
  shorter.keep(0, {}, Compaction::kShorterSide);
  EXPECT_EQ(shorter.blocks_in_use(), 0);
  shorter.append(tagged(1, 1, 4, 20).select(1, 0), tagged(1, 1, 4, 20).select(1, 0), 20);
  EXPECT_EQ(shorter.blocks_in_use(), 1);
  EXPECT_EQ(shorter.keys(0)[0][0].item<float>(), 20.0f);
}

// StreamingLLM at B = 40 (not a multiple of 16): the front advances for 7 steps (4 sinks move
// each), then the next append would take a block more from slot 8, so the head returns to
// slot 0 (40 rows move) and starts again: 68 rows per 8 steps, not 36 a step. The entries keep
// their contents and the head never holds more than 3 blocks.
TEST(LayerKV, AFrontThatMayNotAdvanceReturnsToSlotZero) {
  constexpr int64_t kSinks = 4, kBudget = 40;
  LayerKV kv(1, 4, at::kFloat);
  kv.append_many(tagged(1, kBudget, 4, 0), tagged(1, kBudget, 4, 0), 0);
  std::vector<int64_t> expected(kBudget), after_sinks;
  for (int64_t i = 0; i < kBudget; ++i) expected[size_t(i)] = i;
  for (int64_t i = 0; i <= kBudget; ++i)
    if (i != kSinks) after_sinks.push_back(i);
  for (int64_t t = kBudget; t < kBudget + 50; ++t) {
    kv.append(tagged(1, 1, 4, t).select(1, 0), tagged(1, 1, 4, t).select(1, 0), t);
    kv.keep(0, after_sinks, Compaction::kShorterSide);
    expected.push_back(t);
    expected.erase(expected.begin() + kSinks);
    ASSERT_LE(kv.blocks_in_use(), 3) << "step " << t;
  }
  EXPECT_EQ(kv.rows_moved(), 6 * (7 * kSinks + kBudget) + 2 * kSinks);  // 6 cycles of 8, 2 steps
  ASSERT_EQ(kv.positions(0), expected);
  const at::Tensor k = kv.keys(0);
  for (int64_t i = 0; i < kBudget; ++i)
    EXPECT_EQ(k[i][0].item<float>(), float(expected[size_t(i)])) << "entry " << i;
}

// H2O's decode pattern at B = 64: 63 entries between steps, 64 after the append, an early
// victim. Advancing the front would make the next append need a fifth block, so the front
// stays: the pool, sized to the prefill's 4 blocks, never grows.
TEST(LayerKV, ShorterSideNeverMakesTheNextAppendNeedABlockMore) {
  LayerKV kv(1, 4, at::kFloat);
  kv.append_many(tagged(1, 63, 4, 0), tagged(1, 63, 4, 0), 0);
  kv.shrink_to_fit();
  const int64_t pool = kv.allocated_bytes();
  for (int64_t t = 63; t < 83; ++t) {
    kv.append(tagged(1, 1, 4, t).select(1, 0), tagged(1, 1, 4, t).select(1, 0), t);
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < 64; ++i)
      if (i != 2) kept.push_back(i);
    kv.keep(0, kept, Compaction::kShorterSide);
    ASSERT_EQ(kv.allocated_bytes(), pool) << "step " << t;
  }
  EXPECT_EQ(kv.rows_moved(), 20 * 61);  // the entries after the victim, every step
}

// The whole-layer keep (one row move for all heads) leaves each head exactly as its own keep
// would: ragged heads, a head left whole, blocks freed in one head while another moves rows.
TEST(LayerKV, KeepingEveryHeadAtOnceEqualsKeepingEachHead) {
  auto filled = [] {
    LayerKV kv(3, 4, at::kFloat);
    kv.append_many(tagged(3, 45, 4, 0), tagged(3, 45, 4, 0, 0.5f), 0);
    return kv;
  };
  std::vector<int64_t> all(45);
  for (int64_t i = 0; i < 45; ++i) all[size_t(i)] = i;
  std::vector<int64_t> most(all.begin() + 1, all.end());  // drops entry 0: every row moves
  LayerKV one_by_one = filled(), at_once = filled();
  const std::vector<std::vector<int64_t>> lists = {{0, 2, 3, 30, 44}, all, most};
  for (int h = 0; h < 3; ++h) one_by_one.keep(h, lists[size_t(h)]);
  at_once.keep(lists);
  for (int h = 0; h < 3; ++h) {
    ASSERT_EQ(at_once.positions(h), one_by_one.positions(h)) << "head " << h;
    EXPECT_TRUE(at_once.keys(h).equal(one_by_one.keys(h))) << "head " << h;
    EXPECT_TRUE(at_once.values(h).equal(one_by_one.values(h))) << "head " << h;
  }
  EXPECT_EQ(at_once.keys(2)[0][0].item<float>(), 2001.0f);  // head 2's entry 1, now first
  EXPECT_EQ(at_once.blocks_in_use(), 1 + 3 + 3);
  EXPECT_THROW(at_once.keep(std::vector<std::vector<int64_t>>(2)), std::logic_error);
}

// Equally filled heads whose blocks are scattered over the pool (evictions, then appends that
// reuse freed blocks): the block-table rows are each head's rows, head after head.
TEST(LayerKV, UniformRowsAreEveryHeadsRowsInOrder) {
  LayerKV kv(3, 4, at::kFloat);
  kv.append_many(tagged(3, 50, 4, 0), tagged(3, 50, 4, 0), 0);
  std::vector<int64_t> evens, last;
  for (int64_t i = 0; i < 50; i += 2) evens.push_back(i);
  for (int64_t i = 25; i < 50; ++i) last.push_back(i);
  kv.keep({evens, last, evens});
  for (int64_t t = 50; t < 70; ++t)
    kv.append(tagged(3, 1, 4, t).select(1, 0), tagged(3, 1, 4, t).select(1, 0), t);
  ASSERT_EQ(kv.size(0), 45);
  const at::Tensor expected = at::stack({kv.all_physical_rows(0), kv.all_physical_rows(1),
                                         kv.all_physical_rows(2)});
  EXPECT_TRUE(kv.uniform_rows().equal(expected));
  kv.keep(1, {0, 1});
  EXPECT_THROW(kv.uniform_rows(), std::logic_error);
}

TEST(LayerKV, FragmentationCountsEmptySlotsInOwnedBlocks) {
  LayerKV kv(1, 2, at::kFloat);
  kv.append_many(tagged(1, 20, 2, 0), tagged(1, 20, 2, 0), 0);
  EXPECT_DOUBLE_EQ(kv.fragmentation(), 1.0 - 20.0 / 32.0);
}

// drop() is keep() with the other entries listed: over 60 steps of appends and one range per
// head (empty, one entry, a run, at the front, in the middle, the whole head), in both
// compactions, the two give the same entries, contents, rows, blocks and row moves.
TEST(LayerKV, DroppingARangeEqualsKeepingTheRest) {
  for (const Compaction how : {Compaction::kKeepFront, Compaction::kShorterSide}) {
    LayerKV by_keep(3, 4, at::kFloat), by_drop(3, 4, at::kFloat);
    for (LayerKV* kv : {&by_keep, &by_drop})
      kv->append_many(tagged(3, 40, 4, 0), tagged(3, 40, 4, 0, 0.5f), 0);
    uint64_t lcg = 7;
    auto next = [&](int64_t bound) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      return bound > 0 ? int64_t((lcg >> 33) % uint64_t(bound)) : 0;
    };
    for (int64_t t = 40; t < 100; ++t) {
      for (LayerKV* kv : {&by_keep, &by_drop})
        kv->append(tagged(3, 1, 4, t).select(1, 0), tagged(3, 1, 4, t, 0.5f).select(1, 0), t);
      std::vector<LayerKV::EntryRange> ranges(3);
      std::vector<std::vector<int64_t>> kept(3);
      for (int h = 0; h < 3; ++h) {
        const int64_t n = by_keep.size(h);
        // 0 none, 1-3 one entry, 4 a run, 5 the last entry; every 20 steps head t/20 % 3 loses
        // everything. Heads under 20 entries only grow, so most of them span several blocks.
        const int64_t kind = n < 20 ? 0 : next(6);
        const bool everything = t % 20 == 0 && h == t / 20 % 3;
        const int64_t begin = everything ? 0 : kind == 5 ? n - 1 : next(n);
        const int64_t end = everything  ? n
                            : kind == 0 ? begin
                            : kind == 4 ? std::min(n, begin + 1 + next(12))
                                        : begin + 1;
        ranges[size_t(h)] = {begin, end};
        for (int64_t i = 0; i < n; ++i)
          if (i < begin || i >= end) kept[size_t(h)].push_back(i);
      }
      by_keep.keep(kept, how);
      by_drop.drop(ranges, how);
      for (int h = 0; h < 3; ++h) {
        ASSERT_EQ(by_drop.positions(h), by_keep.positions(h)) << "step " << t << ", head " << h;
        ASSERT_TRUE(by_drop.keys(h).equal(by_keep.keys(h))) << "step " << t << ", head " << h;
        ASSERT_TRUE(by_drop.values(h).equal(by_keep.values(h))) << "step " << t;
        ASSERT_TRUE(by_drop.all_physical_rows(h).equal(by_keep.all_physical_rows(h)));
      }
      ASSERT_EQ(by_drop.blocks_in_use(), by_keep.blocks_in_use()) << "step " << t;
      ASSERT_EQ(by_drop.rows_moved(), by_keep.rows_moved()) << "step " << t;
    }
    EXPECT_GT(by_drop.rows_moved(), 0);
  }
  // StreamingLLM's pattern at B = 40 (4 sinks), where a front that may not advance returns to
  // slot 0: the same moves either way.
  LayerKV by_keep(2, 4, at::kFloat), by_drop(2, 4, at::kFloat);
  for (LayerKV* kv : {&by_keep, &by_drop}) kv->append_many(tagged(2, 40, 4, 0), tagged(2, 40, 4, 0), 0);
  for (int64_t t = 40; t < 60; ++t) {
    for (LayerKV* kv : {&by_keep, &by_drop})
      kv->append(tagged(2, 1, 4, t).select(1, 0), tagged(2, 1, 4, t).select(1, 0), t);
    std::vector<int64_t> kept = {0, 1, 2, 3};
    for (int64_t i = 5; i <= 40; ++i) kept.push_back(i);
    by_keep.keep({kept, kept}, Compaction::kShorterSide);
    by_drop.drop({{4, 5}, {4, 5}}, Compaction::kShorterSide);
    ASSERT_EQ(by_drop.rows_moved(), by_keep.rows_moved()) << "step " << t;
    ASSERT_TRUE(by_drop.keys(1).equal(by_keep.keys(1))) << "step " << t;
    ASSERT_TRUE(by_drop.all_physical_rows(1).equal(by_keep.all_physical_rows(1)));
  }
  LayerKV kv(2, 2, at::kFloat);
  kv.append_many(tagged(2, 5, 2, 0), tagged(2, 5, 2, 0), 0);
  EXPECT_THROW(kv.drop({{0, 2}, {0, 6}}), std::logic_error);  // past the head's entries
  EXPECT_EQ(kv.positions(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));  // nothing changed first
  EXPECT_THROW(kv.drop({{3, 2}, {0, 0}}), std::logic_error);  // reversed
  EXPECT_THROW(kv.drop({{0, 1}}), std::logic_error);          // one range per head
}

TEST(LayerKV, KeepRejectsUnsortedOrOutOfRangeIndices) {
  LayerKV kv(1, 2, at::kFloat);
  kv.append_many(tagged(1, 5, 2, 0), tagged(1, 5, 2, 0), 0);
  EXPECT_THROW(kv.keep(0, {3, 1}), std::logic_error);
  EXPECT_THROW(kv.keep(0, {7}), std::logic_error);
  LayerKV two(2, 2, at::kFloat);
  two.append_many(tagged(2, 5, 2, 0), tagged(2, 5, 2, 0), 0);
  EXPECT_THROW(two.keep({{1, 2}, {9}}), std::logic_error);
  EXPECT_EQ(two.positions(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));  // checked before any change
}

}  // namespace
}  // namespace kvb
