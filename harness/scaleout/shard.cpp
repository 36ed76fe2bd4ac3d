#include "harness/scaleout/shard.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "engine/common/error.h"

namespace kvb {
namespace {

int64_t param_or(const json& params, const char* name, int64_t fallback) {
  auto it = params.find(name);
  return it != params.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

bool parse_int(const std::string& text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  out = std::stoi(text);
  return true;
}

}  // namespace

uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cell_id_of_key(const std::string& config_json) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(fnv1a64(config_json)));
  return std::string(buf, 12);
}

std::string cell_id(const Cell& cell) { return cell_id_of_key(cell.key()); }

double estimated_cost(const Cell& cell) {
  const json& p = cell.dataset.params;
  int64_t tokens = param_or(p, "context_length", 0);
  if (tokens <= 0) tokens = param_or(p, "prefix_tokens", 0) + param_or(p, "eval_tokens", 0);
  if (tokens <= 0) tokens = param_or(p, "max_length", 0);
  if (tokens <= 0) tokens = 1;
  int64_t samples = param_or(p, "samples", 1);
  if (samples <= 0) samples = 200;  // LongBench's "all": about 200 per task
  return double(tokens) * double(samples);
}

ShardSpec parse_shard_spec(const std::string& text, const std::string& what) {
  const size_t slash = text.find('/');
  ShardSpec s;
  if (slash == std::string::npos || !parse_int(text.substr(0, slash), s.index) ||
      !parse_int(text.substr(slash + 1), s.count))
    throw InputError(what + " " + text + ": expected i/N with 0 <= i < N (0-based, e.g. 0/4)");
  if (s.count < 1) throw InputError(what + " " + text + ": N must be >= 1");
  if (s.index >= s.count)
    throw InputError(what + " " + text + ": shard index " + std::to_string(s.index) +
                     " is out of range; shards are numbered 0.." + std::to_string(s.count - 1));
  return s;
}

std::string shard_text(const ShardSpec& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.count);
}

std::string default_shard_db_path(const std::string& suite_name, const ShardSpec& s) {
  return "results/runs/" + suite_name + ".shard-" + std::to_string(s.index) + "-of-" +
         std::to_string(s.count) + ".db";
}

ShardPlan plan_shards(const std::vector<Cell>& cells, int shards) {
  if (shards < 1) throw InputError("--shards " + std::to_string(shards) + ": must be >= 1");
  ShardPlan plan;
  plan.shards = shards;
  plan.shard_cost.assign(size_t(shards), 0.0);
  plan.shard_cells.assign(size_t(shards), 0);
  std::set<std::string> seen;
  for (const Cell& c : cells) {
    std::string key = c.key();
    if (!seen.insert(key).second) continue;
    plan.cells.push_back(
        PlannedCell{.cell = c, .id = cell_id_of_key(key), .cost = estimated_cost(c), .shard = 0});
  }
  std::vector<size_t> order(plan.cells.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const PlannedCell &x = plan.cells[a], &y = plan.cells[b];
    if (x.cost != y.cost) return x.cost > y.cost;
    if (x.id != y.id) return x.id < y.id;
    return x.cell.key() < y.cell.key();  // a 48-bit id collision: still a total order
  });
  for (size_t i : order) {
    const int target = int(std::min_element(plan.shard_cost.begin(), plan.shard_cost.end()) -
                           plan.shard_cost.begin());
    plan.cells[i].shard = target;
    plan.shard_cost[size_t(target)] += plan.cells[i].cost;
    ++plan.shard_cells[size_t(target)];
  }
  return plan;
}

std::vector<Cell> cells_of_shard(const std::vector<Cell>& cells, const ShardSpec& spec) {
  const ShardPlan plan = plan_shards(cells, spec.count);
  std::vector<Cell> out;
  for (const PlannedCell& p : plan.cells)
    if (p.shard == spec.index) out.push_back(p.cell);
  return out;
}

json plan_to_json(const ShardPlan& plan) {
  json cells = json::array();
  for (const PlannedCell& p : plan.cells)
    cells.push_back({{"id", p.id}, {"shard", p.shard}, {"cost", p.cost}, {"config", p.cell.to_json()}});
  return {{"shards", plan.shards},
          {"shard_cost", plan.shard_cost},
          {"shard_cells", plan.shard_cells},
          {"cells", cells}};
}

}  // namespace kvb
