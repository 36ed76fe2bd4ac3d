// Base of the retrieval family (Quest, InfiniGen, ClusterKV, PQCache): every KV entry stays
// resident (the "host" tier of a GPU deployment), and at each decode step every KV head of a
// sparse layer attends to a selection (what would be fetched to the "device" tier).
// The base handles what the four share: layers kept dense by design, heads whose whole cache
// fits the budget, and the accounting of what a deployment would move (bytes fetched per step,
// the method's cache hits, the size of its index).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "methods/method.h"

namespace kvb {

class RetrievalMethod : public Method {
 public:
  // Layers below `dense_layers` attend to everything. A method states the count once, as
  // `static constexpr int kDenseLayers` (which make_method_info reports in MethodInfo).
  explicit RetrievalMethod(int dense_layers) : dense_layers_(dense_layers) {}
  void begin(const MethodContext& context) override;
  Selection select(int layer, const at::Tensor& q, const LayerKV& kv) final;
  std::map<std::string, double> counters() const override;

 protected:
  int dense_layers() const { return dense_layers_; }
  // The selection of one sparse layer: per KV head, logical indices (unique), by the method's
  // budget rule (B, or its declared MethodInfo::attended), normally the current (last) entry
  // included. Called only for heads holding more than B entries; `heads` lists them.
  // q: [Hq, d]. With per_query_head(): g lists per listed head instead (its query heads in
  // order), each query head attending only to its own (the references that repeat the KV).
  // Methods whose every selection select_rows builds need not override it.
  virtual std::vector<std::vector<int64_t>> select_sparse(int layer, const at::Tensor& q,
                                                          const LayerKV& kv,
                                                          const std::vector<int>& heads);
  virtual bool per_query_head() const { return false; }
  // A head holding at most this many entries attends to all of them (its selection would be
  // all of them): the budget B, or what a method's own rule derives (a ratio of the prompt).
  virtual int64_t attends_all_up_to() const { return context_.budget; }
  // The same selection built on the device, for a layer whose every KV head holds more than B
  // entries: rows [Hkv, k] logical indices (with per_query_head(): [Hq, k], query head q's list
  // of KV head q / g), every unit the same k, ascending; undefined rows where the method has
  // no device path for its config (then select_sparse). With counts ([units] int64 on the
  // device, each in 0..k): unit u attends the first counts[u] entries of its row, ascending,
  // for a count the host never reads.
  struct DeviceRows {
    at::Tensor rows, counts;
  };
  virtual DeviceRows select_rows(int layer, const at::Tensor& q, const LayerKV& kv) { return {}; }

  // Accounting, called by subclasses.
  void set_index_bytes(int layer, int64_t bytes);  // size of the method's index for `layer`
  void count_cache(int64_t hits, int64_t lookups);  // the method's own cache (entries or blocks)
  // Hits counted on the device: an int64 scalar on `device` (zero at first use) that a
  // selection adds its hits to, so the host never reads them during a step; its lookups are
  // counted on the host.
  at::Tensor device_cache_hits(const at::Device& device);
  void count_cache_lookups(int64_t lookups) { cache_lookups_ += lookups; }

 private:
  int dense_layers_;
  std::vector<int64_t> index_bytes_;  // per layer
  double fetched_bytes_ = 0;          // over all sparse-layer selections
  at::Tensor device_fetched_bytes_;   // the same, of device selections whose counts the host lacks
  int64_t steps_ = 0;                 // decode steps (counted at layer 0)
  int64_t cache_hits_ = 0, cache_lookups_ = 0;
  // Adds entries * entry_bytes to the fetched bytes; entries: a double scalar on the device.
  void add_device_fetched_bytes(const at::Tensor& entries, double entry_bytes);
  at::Tensor device_cache_hits_;  // summed on the device, read by counters()
  EqualCountsIndptr rows_indptr_;  // the indptr of select_rows' rows, shared by a step's layers
};

}  // namespace kvb
