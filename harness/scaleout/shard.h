// Scale-out: stable cell ids and the deterministic split of a suite's cells into shards
// balanced by estimated cost, for `kvbench plan`, `kvbench run --shard i/N` and `kvbench slurm`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/suite/suite.h"

namespace kvb {

// 64-bit FNV-1a of the bytes of `text`.
uint64_t fnv1a64(const std::string& text);
// A cell's stable id: the first 12 hex digits of FNV-1a-64 of Cell::key() (the normalised
// config JSON), so the same config has the same id in every suite, process and machine.
std::string cell_id(const Cell& cell);
std::string cell_id_of_key(const std::string& config_json);

// Estimated cost of a cell, in prompt tokens: the dataset's context length (`context_length`,
// or `prefix_tokens` + `eval_tokens`, or `max_length`; 1 when none) times its `samples`
// (1 when absent; LongBench's 0 = "all" counts as 200). Only used to balance shards.
double estimated_cost(const Cell& cell);

// Shard i of N, 0-based (i in 0..N-1), as SLURM_ARRAY_TASK_ID counts with --array=0-(N-1).
struct ShardSpec {
  int index = 0;
  int count = 1;
};
// Parses "i/N" (0 <= i < N); a malformed text is an InputError naming `what`.
ShardSpec parse_shard_spec(const std::string& text, const std::string& what = "--shard");
std::string shard_text(const ShardSpec& s);  // "i/N"
// Default database of a shard: results/runs/<suite>.shard-<i>-of-<N>.db under the current
// directory (beside the merged results/runs/<suite>.db).
std::string default_shard_db_path(const std::string& suite_name, const ShardSpec& s);

struct PlannedCell {
  Cell cell;
  std::string id;
  double cost = 0;
  int shard = 0;
};

struct ShardPlan {
  int shards = 1;
  std::vector<PlannedCell> cells;  // the suite's distinct cells, in suite order
  std::vector<double> shard_cost;  // estimated cost per shard
  std::vector<int> shard_cells;    // cell count per shard
};

// Greedy balancing: cells sorted by (cost desc, id asc) each go to the shard with the least
// cost so far (lowest index on ties). Depends only on the set of cells, never on their order
// or on the process. Duplicate configs appear once. `shards` must be >= 1.
ShardPlan plan_shards(const std::vector<Cell>& cells, int shards);

// The cells of `cells` that shard `spec` runs, in suite order.
std::vector<Cell> cells_of_shard(const std::vector<Cell>& cells, const ShardSpec& spec);

// The plan as JSON: {"shards", "shard_cost", "shard_cells", "cells": [{"id", "shard", "cost",
// "config"}]}.
json plan_to_json(const ShardPlan& plan);

}  // namespace kvb
