// Where the time of a few decode steps goes: every ATen operator and, on a GPU, every kernel,
// recorded with the PyTorch profiler (Kineto, through LibTorch) and summed per session phase.
// The session marks its phases as RecordFunction user scopes "kvbench::decode" (the step),
// "kvbench::select" (the method's hooks and selection) and "kvbench::attention", and the
// prefill as "kvbench::prefill", "kvbench::prefill_attention" (its causal attention) and
// "kvbench::prefill_method" (the method's prefill hooks); they cost nothing while no profiler
// records.
//   - an operator's host time is its self time (without the operators it calls), in the phase
//     of its innermost enclosing scope; a scope's own code is the row "(kvbench code)";
//   - a kernel's device time goes to the phase of the CUDA call that launched it (by their shared
//     correlation id); a CUDA call's host time (kind "cuda call") to its enclosing scope's, as
//     an operator's; copies and fills on the device count as kernels.
// The CPU profiler is in every LibTorch kvbench builds against; device kernels and the Chrome
// trace need one built with Kineto (pip's CUDA LibTorch is; Debian's 1.13 is not).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace kvb {

struct ProfileRow {
  std::string phase;   // decode, select, attention, prefill... (the innermost kvbench scope), or none
  std::string kind;    // "kernel" (device time), "op" (host self time) or "cuda call"
  std::string name;
  double calls = 0;    // per step
  double us = 0;       // microseconds per step
};

class OpProfile {
 public:
  // Starts recording host operators, and with `device_kernels` the CUDA device's kernels.
  explicit OpProfile(bool device_kernels);
  ~OpProfile();  // stops recording if finish() was not called
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops recording. Rows per (phase, kind, name), divided by `steps`, longest first. Writes
  // the Chrome trace to `trace_path` unless empty; `trace_note` says why it could not be
  // written (this LibTorch has no Kineto), or stays empty.
  std::vector<ProfileRow> finish(int64_t steps, const std::string& trace_path,
                                 std::string* trace_note);

 private:
  bool recording_ = false;
};

// The rows as a tab-separated table with a header line.
std::string profile_tsv(const std::vector<ProfileRow>& rows);
// The `top` longest rows of each kind and each phase's totals, for a terminal.
std::string profile_summary(const std::vector<ProfileRow>& rows, size_t top);

}  // namespace kvb
