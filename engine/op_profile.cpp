#include "engine/op_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "engine/common/format.h"

namespace kvb {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

const std::string kScopePrefix = "kvbench::";

// An event's start and duration in nanoseconds (LibTorch 1.13 gives microseconds).
std::pair<int64_t, int64_t> start_and_duration_ns(const profiler::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return {int64_t(e.startNs()), int64_t(e.durationNs())};
#else
  return {int64_t(e.startUs()) * 1000, int64_t(e.durationUs()) * 1000};
#endif
}

std::set<ActivityType> activities(bool device_kernels) {
  std::set<ActivityType> out{ActivityType::CPU};
  if (device_kernels) out.insert(ActivityType::CUDA);
  return out;
}

bool is_scope(const std::string& name) { return name.rfind(kScopePrefix, 0) == 0; }

// LibTorch 1.13 gives start and duration in whole microseconds, each truncated, so a scope's
// computed end can fall up to 2 us before its true end, and a short operator ending the scope
// (the logits' select ending the prefill) can seem to start after it: outside every scope.
// Such an operator, within that slack of the scope just closed, takes its phase rather than
// "none". (Widening the scope instead would swallow the next scope starting right after it.)
// Only where no scope is left open: one ending a nested scope (select in decode) still counts
// in the enclosing scope's phase there.
#if TORCH_VERSION_MAJOR >= 2
constexpr int64_t kScopeEndSlackNs = 0;
#else
constexpr int64_t kScopeEndSlackNs = 2000;
#endif

// A CUDA runtime or driver call (cudaLaunchKernel, cuLaunchKernel, cudaStreamSynchronize): a
// host event of Kineto's own, nested in the operator that made it, and what a kernel links to.
bool is_cuda_call(const std::string& name) {
  return name.rfind("cuda", 0) == 0 || (name.size() > 2 && name.compare(0, 2, "cu") == 0 &&
                                         std::isupper(static_cast<unsigned char>(name[2])));
}

// A host event and what nests in it.
struct HostEvent {
  size_t index;      // into the profiler's events
  int64_t start, end;
  int64_t children = 0;  // ns of the events directly inside
  std::string phase;     // the innermost enclosing scope's, without the prefix, or "none"
};

// Host events per thread, nested by time: each one's direct children's time and its phase.
std::vector<HostEvent> nest_host_events(const std::vector<profiler::KinetoEvent>& events) {
  std::map<uint64_t, std::vector<HostEvent>> by_thread;
  for (size_t i = 0; i < events.size(); ++i) {
    const profiler::KinetoEvent& e = events[i];
    if (e.deviceType() != c10::DeviceType::CPU || e.isAsync()) continue;
    const auto [start, duration] = start_and_duration_ns(e);
    by_thread[e.startThreadId()].push_back(HostEvent{i, start, start + duration, 0, "none"});
  }
  std::vector<HostEvent> out;
  for (auto& [thread, list] : by_thread) {
    (void)thread;
    // Outer events first where two start together.
    std::sort(list.begin(), list.end(), [](const HostEvent& a, const HostEvent& b) {
      return std::tie(a.start, b.end) < std::tie(b.start, a.end);
    });
    std::vector<size_t> open;  // indices into `list`, outermost first
    std::optional<size_t> closed_scope;  // the outermost scope the last pops closed
    for (size_t i = 0; i < list.size(); ++i) {
      for (; !open.empty() && list[open.back()].end <= list[i].start; open.pop_back())
        if (is_scope(events[list[open.back()].index].name())) closed_scope = open.back();
      if (kScopeEndSlackNs > 0 && open.empty() && closed_scope &&
          list[i].end <= list[*closed_scope].end + kScopeEndSlackNs)
        list[i].phase = list[*closed_scope].phase;  // in its last microseconds (above)
      if (!open.empty()) {
        const HostEvent& parent = list[open.back()];
        // No event outlives the one it started in: a CUDA call's clock (CUPTI's) and the
        // operators' may disagree by a few microseconds.
        list[i].end = std::min(list[i].end, parent.end);
        list[open.back()].children += list[i].end - list[i].start;
        list[i].phase = parent.phase;
      }
      const std::string& name = events[list[i].index].name();
      if (is_scope(name)) list[i].phase = name.substr(kScopePrefix.size());
      open.push_back(i);
    }
    out.insert(out.end(), list.begin(), list.end());
  }
  return out;
}

}  // namespace

OpProfile::OpProfile(bool device_kernels) {
  const ProfilerConfig config(ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities(device_kernels));
  profiler::enableProfiler(config, activities(device_kernels));
  recording_ = true;
}

OpProfile::~OpProfile() {
  if (recording_) profiler::disableProfiler();
}

std::vector<ProfileRow> OpProfile::finish(int64_t steps, const std::string& trace_path,
                                          std::string* trace_note) {
  if (!recording_) throw std::logic_error("OpProfile::finish called twice");
  recording_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  const std::vector<profiler::KinetoEvent>& events = result->events();

  // (phase, kind, name) -> calls, ns
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int64_t, int64_t>> sums;
  // The phase of each host event by its correlation id: CUDA calls' (CUPTI's ids) apart from
  // operators' (the profiler's own), whose ids may coincide.
  std::unordered_map<uint64_t, std::string> phase_of_call, phase_of_op;
  for (const HostEvent& h : nest_host_events(events)) {
    const profiler::KinetoEvent& e = events[h.index];
    const bool scope = is_scope(e.name()), call = is_cuda_call(e.name());
    (call ? phase_of_call : phase_of_op)[e.correlationId()] = h.phase;
    auto& sum = sums[{h.phase, call ? "cuda call" : "op", scope ? "(kvbench code)" : e.name()}];
    sum.first += scope ? 0 : 1;
    sum.second += std::max<int64_t>(0, (h.end - h.start) - h.children);
  }
  // A kernel shares its correlation id (CUPTI's) with the CUDA call that launched it, whose
  // phase the nesting gave; Kineto links it (linkedCorrelationId) to the innermost ATen operator
  // around that call, the fallback. Kernels launched outside any operator (kvbench's own, from
  // the CUDA glue) have only the call.
  auto launcher_phase = [&](const profiler::KinetoEvent& kernel) -> std::string {
    if (auto it = phase_of_call.find(kernel.correlationId()); it != phase_of_call.end())
      return it->second;
    if (const uint64_t op = kernel.linkedCorrelationId(); op != 0)
      if (auto it = phase_of_op.find(op); it != phase_of_op.end()) return it->second;
    return "none";
  };
  for (const profiler::KinetoEvent& e : events) {
    // The scopes come back as device spans too (Kineto's GPU user annotations) around their
    // kernels: not kernels of their own.
    if (e.deviceType() == c10::DeviceType::CPU || is_scope(e.name())) continue;
    auto& sum = sums[{launcher_phase(e), "kernel", e.name()}];
    sum.first += 1;
    sum.second += start_and_duration_ns(e).second;
  }
  std::vector<ProfileRow> rows;
  const double per_step = 1.0 / double(std::max<int64_t>(steps, 1));
  for (const auto& [key, sum] : sums)
    rows.push_back(ProfileRow{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                              double(sum.first) * per_step, 1e-3 * double(sum.second) * per_step});
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.us > b.us; });

  if (trace_note) trace_note->clear();
  if (!trace_path.empty()) {
    try {
      result->save(trace_path);
    } catch (const std::exception& e) {
      // Its first line: a c10::Error's message goes on with LibTorch's backtrace.
      if (trace_note) *trace_note = first_line(e.what());
    }
  }
  return rows;
}

std::string profile_tsv(const std::vector<ProfileRow>& rows) {
  std::ostringstream out;
  out << "phase\tkind\tname\tcalls_per_step\tus_per_step\n";
  for (const ProfileRow& r : rows)
    out << r.phase << "\t" << r.kind << "\t" << r.name << "\t" << fixed(r.calls, 2) << "\t"
        << fixed(r.us, 2) << "\n";
  return out.str();
}

std::string profile_summary(const std::vector<ProfileRow>& rows, size_t top) {
  std::ostringstream out;
  for (const std::string kind : {"kernel", "op", "cuda call"}) {
    std::map<std::string, double> phases;
    double total = 0;
    for (const ProfileRow& r : rows)
      if (r.kind == kind) phases[r.phase] += r.us, total += r.us;
    if (total <= 0) continue;
    out << (kind == "kernel" ? "device time of kernels"
            : kind == "op"   ? "host time of operators (self)"
                             : "host time in CUDA calls")
        << " per step: "
        << fixed(total, 1) << " us;";
    for (const auto& [phase, us] : phases)
      out << " " << phase << " " << fixed(us, 1) << " (" << fixed(100 * us / total, 1) << "%)";
    out << "\n";
    size_t shown = 0;
    for (const ProfileRow& r : rows) {
      if (r.kind != kind) continue;
      if (shown++ == top) break;
      const std::string name = r.name.size() > 90 ? r.name.substr(0, 87) + "..." : r.name;
      char line[64];
      std::snprintf(line, sizeof line, "  %10.1f us %7.2f calls  %-10s ", r.us, r.calls,
                    r.phase.c_str());
      out << line << name << "\n";
    }
  }
  return out.str();
}

}  // namespace kvb
