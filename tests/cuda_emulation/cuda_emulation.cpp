// The CPU side of tests/cuda_emulation/include/cuda_runtime.h: fibers (ucontext) for a block's
// threads, the barriers and warp exchanges between them, and the runtime calls on host memory.
#include <cuda_runtime.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__)
// The switch between fibers: the callee-saved registers and the SSE/x87 control words pushed on
// the current stack, its pointer stored at *from, then `to`'s popped. ucontext's swapcontext
// would make a system call (the signal mask) at every switch, and a block switches at every
// barrier and warp operation of each of its threads: ten times slower here.
extern "C" void kvb_emu_switch(void** from, void* to);
asm(R"(
.text
.globl kvb_emu_switch
.hidden kvb_emu_switch
.type kvb_emu_switch,@function
kvb_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size kvb_emu_switch, .-kvb_emu_switch
)");
#endif

namespace kvb_emu {
namespace {

enum class State { kReady, kAtBarrier, kAtWarpOp, kDone };

// A thread's saved context: its stack pointer (x86-64) or a ucontext (elsewhere).
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

// A cp.async copy started and not yet waited for (cuda_pipeline.h).
struct PendingCopy {
  void* dst;
  const void* src;
  size_t bytes, zfill;
};

struct Fiber {
  Context context;
  State state = State::kReady;
  uint3 index{0, 0, 0};
  unsigned warp_ops = 0;  // warp operations passed: which exchange slot a lane uses
  unsigned syncs = 0;     // __syncwarp and __syncthreads passed: the lane's visibility epoch
  std::vector<PendingCopy> uncommitted;              // since the last __pipeline_commit
  std::deque<std::vector<PendingCopy>> committed;  // oldest group first
};

// One warp's exchange: two slots (by the parity of the operation's count), so a lane already
// at the next operation does not overwrite bits a slower lane has yet to read.
struct WarpSlots {
  uint64_t bits[2][32];
  unsigned op[2][32];  // 1 + the operation count the lane's bits belong to (0: none yet)
};

// Shared-memory ranges of one visibility epoch of a warp (its lanes' count of __syncwarp and
// __syncthreads passed), by first byte: each at most 16 bytes, with the lane behind it. A
// warp's lanes are never more than one epoch apart (a barrier waits for all of them), so two
// buckets, by the epoch's parity, hold every range that can still matter.
struct Span {
  uintptr_t end;
  int lane;
};
struct EpochSpans {
  unsigned epoch = 0;
  std::map<uintptr_t, Span> spans;
};
// What a warp's lanes made visible to themselves alone, and read as a warp, since the barrier
// that began their epoch: the bytes their cp.async copies landed (at the wait), and the rows
// their ldmatrix read. Reading the one or copying into the other within one epoch is a race
// among the warp's lanes on a GPU (tests/cuda_emulation/README.md).
struct WarpHazards {
  EpochSpans landed[2], read[2];
  std::map<uintptr_t, Span> in_flight;  // cp.async copies issued and not yet landed, any epoch
};

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kCanaryBytes = 64;
constexpr unsigned char kCanary = 0xA5;

struct Block {
  const LaunchConfig* config = nullptr;
  const char* name = "";
  BlockBody body = nullptr;
  void* closure = nullptr;
  uint3 index{0, 0, 0};
  std::vector<Fiber> fibers;
  std::vector<WarpSlots> warps;
  std::vector<WarpHazards> hazards;  // per warp
  Context scheduler;
  int current = -1;
  unsigned char* shared = nullptr;
};

thread_local Block* g_block = nullptr;
thread_local cudaError_t g_last_error = cudaSuccess;
// The fibers' stacks, reused by every launch of the thread.
struct Stacks {
  std::vector<void*> stacks;
  ~Stacks() {
    for (void* s : stacks) std::free(s);
  }
};
thread_local Stacks g_stacks;
std::map<const void*, int> g_max_dynamic_shared;
// Static __shared__ variables by declaration, kept across launches, poisoned at each block.
struct StaticShared {
  std::unique_ptr<unsigned char[]> bytes;  // new[]'s alignment: 16 bytes
  size_t size = 0;
};
std::map<const void*, StaticShared> g_static_shared;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "CUDA emulation: kernel %s, block (%u, %u, %u): %s\n",
               g_block ? g_block->name : "?", g_block ? g_block->index.x : 0,
               g_block ? g_block->index.y : 0, g_block ? g_block->index.z : 0, what.c_str());
  std::abort();
}

Fiber& me() { return g_block->fibers[size_t(g_block->current)]; }
int linear(const uint3& i) {
  const dim3 b = g_block->config->block;
  return int(i.x + b.x * (i.y + b.y * i.z));
}

void switch_to(Context& from, Context& to) {
#if defined(__x86_64__)
  kvb_emu_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}

bool reverse_order();

// The next ready thread after `after` (-1: the first) in the block's scheduling order, or -1.
int next_ready(const Block& b, int after) {
  const int threads = int(b.fibers.size());
  const bool reverse = reverse_order();
  const int step = reverse ? -1 : 1;
  int t = after >= 0 ? after + step : reverse ? threads - 1 : 0;
  for (; t >= 0 && t < threads; t += step)
    if (b.fibers[size_t(t)].state == State::kReady) return t;
  return -1;
}

// To the next ready thread of this round, directly (half the switches of a return to the
// scheduler in between, which is most of the emulator's time), or to the scheduler after the
// round's last.
void yield() {
  Block& b = *g_block;
  Context& mine = me().context;
  const int next = next_ready(b, b.current);
  b.current = next;
  switch_to(mine, next >= 0 ? b.fibers[size_t(next)].context : b.scheduler);
}

[[noreturn]] void fiber_main() {
  g_block->body(g_block->closure);
  me().state = State::kDone;
  yield();  // never resumed
  std::abort();
}

// A fiber that starts in fiber_main on `stack`.
void start_fiber(Context& c, void* stack) {
#if defined(__x86_64__)
  // What kvb_emu_switch pops: the control words (MXCSR's and x87's defaults), six registers,
  // then fiber_main as the return address, with the stack as a call would leave it (rsp + 8
  // 16-byte aligned at fiber_main's entry).
  auto top = (reinterpret_cast<uintptr_t>(stack) + kStackBytes) & ~uintptr_t(15);
  auto* sp = reinterpret_cast<uint64_t*>(top - 72);
  sp[0] = 0x1F80u | (uint64_t(0x037Fu) << 32);
  for (int i = 1; i <= 6; ++i) sp[i] = 0;
  sp[7] = reinterpret_cast<uint64_t>(&fiber_main);
  c.sp = sp;
#else
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = kStackBytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, fiber_main, 0);
#endif
}

// Opens the barriers every running thread of a block (warp) has reached; false when none can
// open although threads are waiting (a deadlock, or a warp operation some lanes skipped).
bool open_barriers(Block& b) {
  bool opened = false;
  const int threads = int(b.fibers.size());
  for (int w = 0; w * 32 < threads; ++w) {
    bool all_at_op = true, any = false;
    unsigned op = 0;
    for (int t = w * 32; t < std::min(threads, w * 32 + 32); ++t) {
      const Fiber& f = b.fibers[size_t(t)];
      if (f.state == State::kDone) continue;
      if (f.state != State::kAtWarpOp) {
        all_at_op = false;
        break;
      }
      if (any && f.warp_ops != op) fail("the lanes of warp " + std::to_string(w) +
                                        " are at different warp operations (a divergent call)");
      op = f.warp_ops;
      any = true;
    }
    if (!all_at_op || !any) continue;
    for (int t = w * 32; t < std::min(threads, w * 32 + 32); ++t)
      if (b.fibers[size_t(t)].state == State::kAtWarpOp) b.fibers[size_t(t)].state = State::kReady;
    opened = true;
  }
  if (opened) return true;
  bool all_at_barrier = true, any = false;
  for (const Fiber& f : b.fibers) {
    if (f.state == State::kDone) continue;
    any = true;
    all_at_barrier = all_at_barrier && f.state == State::kAtBarrier;
  }
  if (!any || !all_at_barrier) return false;
  for (Fiber& f : b.fibers)
    if (f.state == State::kAtBarrier) f.state = State::kReady;
  return true;
}

std::string deadlock_report(const Block& b) {
  int at_barrier = 0, at_op = 0, done = 0;
  for (const Fiber& f : b.fibers) {
    at_barrier += f.state == State::kAtBarrier;
    at_op += f.state == State::kAtWarpOp;
    done += f.state == State::kDone;
  }
  return "deadlock: " + std::to_string(at_barrier) + " threads at __syncthreads, " +
         std::to_string(at_op) + " at a warp operation, " + std::to_string(done) + " returned";
}

// The order a block's threads run in between barriers: thread 0 first, or with
// KVBENCH_CUDA_EMULATION_ORDER=reverse the last first. A missing __syncthreads between a write
// and another thread's read shows in one of the two orders (CTest runs both).
bool reverse_order() {
  static const bool reverse = [] {
    const char* order = std::getenv("KVBENCH_CUDA_EMULATION_ORDER");
    const std::string o = order ? order : "forward";
    if (o != "forward" && o != "reverse") {
      std::fprintf(stderr, "KVBENCH_CUDA_EMULATION_ORDER: expected forward or reverse, got %s\n",
                   o.c_str());
      std::exit(2);
    }
    return o == "reverse";
  }();
  return reverse;
}

void run_block(Block& b) {
  const dim3 bd = b.config->block;
  const size_t threads = size_t(bd.x) * bd.y * bd.z;
  while (g_stacks.stacks.size() < threads) g_stacks.stacks.push_back(std::malloc(kStackBytes));
  b.fibers.assign(threads, Fiber());
  b.warps.assign((threads + 31) / 32, WarpSlots());
  b.hazards.assign((threads + 31) / 32, WarpHazards());
  for (size_t t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    f.index = {unsigned(t % bd.x), unsigned(t / bd.x % bd.y), unsigned(t / (size_t(bd.x) * bd.y))};
    start_fiber(f.context, g_stacks.stacks[t]);
  }
  for (;;) {
    // A round: every ready thread runs to its next barrier, warp operation or return, each
    // passing on to the next (yield).
    const int first = next_ready(b, -1);
    if (first >= 0) {
      b.current = first;
      switch_to(b.scheduler, b.fibers[size_t(first)].context);
      continue;
    }
    bool finished = true;
    for (const Fiber& f : b.fibers) finished = finished && f.state == State::kDone;
    if (finished) {
      for (const Fiber& f : b.fibers)
        if (!f.uncommitted.empty() || !f.committed.empty())
          fail("thread " + std::to_string(linear(f.index)) +
               " ended with cp.async copies it never waited for");
      return;
    }
    if (!open_barriers(b)) fail(deadlock_report(b));
  }
}

}  // namespace

uint3 thread_index() { return me().index; }
uint3 block_index() { return g_block->index; }
dim3 block_dim() { return g_block->config->block; }
dim3 grid_dim() { return g_block->config->grid; }
int lane() { return linear(me().index) % 32; }

namespace {

WarpHazards& my_warp_hazards() { return g_block->hazards[size_t(linear(me().index) / 32)]; }

// The bucket of `epoch` in `buckets`, emptied first if it still holds an older epoch's.
EpochSpans& spans_of(EpochSpans (&buckets)[2], unsigned epoch) {
  EpochSpans& b = buckets[epoch % 2];
  if (b.epoch != epoch) b.spans.clear(), b.epoch = epoch;
  return b;
}

// A span of `spans` overlapping [begin, end), or nullptr (spans are at most 16 bytes).
const Span* overlapping(const std::map<uintptr_t, Span>& spans, uintptr_t begin, uintptr_t end) {
  for (auto it = spans.lower_bound(begin >= 16 ? begin - 15 : 0);
       it != spans.end() && it->first < end; ++it)
    if (it->second.end > begin) return &it->second;
  return nullptr;
}

// Records [begin, end) of `lane` in `spans`; of two spans from one address, the longer stays.
void record(std::map<uintptr_t, Span>& spans, uintptr_t begin, uintptr_t end, int lane) {
  Span& s = spans.try_emplace(begin, Span{end, lane}).first->second;
  if (end > s.end) s = Span{end, lane};
}

bool in_block_shared(uintptr_t begin, uintptr_t end) {
  const auto dynamic = reinterpret_cast<uintptr_t>(g_block->shared);
  if (begin >= dynamic && end <= dynamic + g_block->config->shared) return true;
  for (const auto& [tag, v] : g_static_shared) {
    const auto first = reinterpret_cast<uintptr_t>(v.bytes.get());
    if (begin >= first && end <= first + v.size) return true;
  }
  return false;
}

}  // namespace

void warp_reads_shared(const void* p, size_t bytes, const char* what) {
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  if (bytes > 16) fail(std::string(what) + ": a tracked read of more than 16 bytes");
  if (!in_block_shared(begin, end))
    fail(std::string(what) + ": reads " + std::to_string(bytes) +
         " bytes outside the block's shared memory");
  const unsigned epoch = me().syncs;
  WarpHazards& h = my_warp_hazards();
  if (const Span* copy = overlapping(h.in_flight, begin, end))
    fail(std::string(what) + ": reads bytes a cp.async of lane " + std::to_string(copy->lane) +
         " still has in flight (it may land during the read)");
  if (const Span* copy = overlapping(spans_of(h.landed, epoch).spans, begin, end))
    fail(std::string(what) + ": reads bytes lane " + std::to_string(copy->lane) +
         "'s cp.async landed since the warp's last __syncwarp or __syncthreads, which alone "
         "would make them visible to the warp");
  record(spans_of(h.read, epoch).spans, begin, end, lane());
}

// cp.async: a thread's copies land only when it waits for their group, so that a kernel that
// reads a slot before waiting reads the block's 0xFF garbage, as a GPU may give it stale bytes.
void pipeline_copy(void* dst, const void* src, size_t bytes, size_t zfill) {
  if (bytes != 4 && bytes != 8 && bytes != 16) fail("cp.async of " + std::to_string(bytes) + " bytes");
  if (zfill > bytes) fail("cp.async zero-fills more than it copies");
  const auto begin = reinterpret_cast<uintptr_t>(dst);
  WarpHazards& h = my_warp_hazards();
  if (const Span* read = overlapping(spans_of(h.read, me().syncs).spans, begin, begin + bytes))
    fail("cp.async into bytes the warp's ldmatrix read (lane " + std::to_string(read->lane) +
         "'s row) since its last __syncwarp or __syncthreads: a lane still reading them may "
         "see the new ones");
  if (const Span* other = overlapping(h.in_flight, begin, begin + bytes))
    fail("cp.async into bytes a cp.async of lane " + std::to_string(other->lane) +
         " still has in flight");
  h.in_flight[begin] = Span{begin + bytes, lane()};
  me().uncommitted.push_back({dst, src, bytes, zfill});
}
void pipeline_commit() {
  Fiber& f = me();
  f.committed.push_back(std::move(f.uncommitted));
  f.uncommitted.clear();
}
void pipeline_wait_prior(size_t prior) {
  Fiber& f = me();
  while (f.committed.size() > prior) {
    WarpHazards& h = my_warp_hazards();
    EpochSpans& landed = spans_of(h.landed, f.syncs);
    for (const PendingCopy& c : f.committed.front()) {
      std::memcpy(c.dst, c.src, c.bytes - c.zfill);
      std::memset(static_cast<char*>(c.dst) + (c.bytes - c.zfill), 0, c.zfill);
      const auto begin = reinterpret_cast<uintptr_t>(c.dst);
      h.in_flight.erase(begin);
      record(landed.spans, begin, begin + c.bytes, lane());
    }
    f.committed.pop_front();
  }
}
void* dynamic_shared_bytes() { return g_block->shared; }
void require_multiple(uintptr_t value, size_t of, const char* what) {
  if (value % of != 0) fail(std::string(what) + ": not a multiple of " + std::to_string(of));
}
void require(bool ok, const char* what) {
  if (!ok) fail(what);
}
void* static_shared_bytes(const void* tag, size_t bytes) {
  StaticShared& v = g_static_shared[tag];
  if (!v.bytes) {
    v.bytes.reset(new unsigned char[bytes]);
    v.size = bytes;
    std::memset(v.bytes.get(), 0xFF, bytes);
  }
  if (v.size != bytes) fail("a __shared__ variable changed size");
  return v.bytes.get();
}

void sync_threads() {
  me().state = State::kAtBarrier;
  yield();
  ++me().syncs;
}
void sync_warp() {
  // Every lane at the same epoch: a __syncwarp met by another lane's other warp operation
  // (a divergent call with the same count of operations) would leave them apart.
  uint64_t epochs[32];
  unsigned taking_part = 0;
  warp_exchange(me().syncs, lane(), epochs, &taking_part);
  for (int l = 0; l < 32; ++l)
    if ((taking_part >> l & 1u) && epochs[l] != me().syncs)
      fail("__syncwarp met lane " + std::to_string(l) + " at another warp operation");
  ++me().syncs;
}

uint64_t warp_exchange(uint64_t bits, int source, uint64_t* all, unsigned* taking_part) {
  Fiber& f = me();
  const int id = linear(f.index), my_lane = id % 32;
  WarpSlots& w = g_block->warps[size_t(id / 32)];
  const unsigned slot = f.warp_ops & 1u, op = f.warp_ops;
  w.bits[slot][my_lane] = bits;
  w.op[slot][my_lane] = op + 1;
  f.state = State::kAtWarpOp;
  yield();
  auto took_part = [&](int l) { return w.op[slot][l] == op + 1; };
  if (!took_part(source))
    fail("lane " + std::to_string(my_lane) + " of warp " + std::to_string(id / 32) +
         " reads lane " + std::to_string(source) + ", which did not take part (it returned, "
         "or lies past the block's last thread)");
  const uint64_t out = w.bits[slot][source];
  if (all) {  // branch-free: a ballot or match of every lane runs this per lane
    unsigned part = 0;
    for (int l = 0; l < 32; ++l) part |= unsigned(took_part(l)) << l;
    std::memcpy(all, w.bits[slot], sizeof(w.bits[slot]));  // lanes outside `part`: stale bits
    *taking_part = part;
  }
  ++f.warp_ops;
  return out;
}

void set_max_dynamic_shared(const void* kernel, int bytes) { g_max_dynamic_shared[kernel] = bytes; }
int max_dynamic_shared(const void* kernel) {
  const auto it = g_max_dynamic_shared.find(kernel);
  return it == g_max_dynamic_shared.end() ? 48 * 1024 : it->second;
}
int resident_blocks(int threads) { return std::max(1, std::min(32, 2048 / std::max(1, threads))); }

bool run_grid(const LaunchConfig& c, const void* kernel, const char* name, BlockBody body,
              void* closure) {
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  const bool valid = threads >= 1 && threads <= 1024 && c.block.z <= 64 && c.grid.x >= 1 &&
                     c.grid.y >= 1 && c.grid.z >= 1 && c.grid.x <= 0x7fffffffu &&
                     c.grid.y <= 65535 && c.grid.z <= 65535;
  if (!valid) {
    g_last_error = cudaErrorInvalidConfiguration;
    return false;
  }
  if (c.shared > size_t(max_dynamic_shared(kernel))) {
    g_last_error = cudaErrorInvalidValue;
    return false;
  }
  if (g_block) fail("a launch from inside a kernel (not emulated)");
  // The dynamic shared bytes 128-byte aligned (a declaration may ask __align__(128) of them).
  std::vector<unsigned char> shared_storage(c.shared + kCanaryBytes + 128);
  const size_t lead = (128 - reinterpret_cast<uintptr_t>(shared_storage.data()) % 128) % 128;
  unsigned char* const shared = shared_storage.data() + lead;
  Block b;
  b.config = &c;
  b.name = name;
  b.body = body;
  b.closure = closure;
  b.shared = shared;
  g_block = &b;
  for (unsigned z = 0; z < c.grid.z; ++z)
    for (unsigned y = 0; y < c.grid.y; ++y)
      for (unsigned x = 0; x < c.grid.x; ++x) {
        b.index = {x, y, z};
        // Shared memory starts as garbage on a GPU: 0xFF bytes here (NaN floats, -1 ints).
        std::memset(shared, 0xFF, c.shared);
        for (auto& [tag, v] : g_static_shared) std::memset(v.bytes.get(), 0xFF, v.size);
        std::memset(shared + c.shared, kCanary, kCanaryBytes);
        run_block(b);
        for (size_t i = 0; i < kCanaryBytes; ++i)
          if (shared[c.shared + i] != kCanary)
            fail("wrote past its " + std::to_string(c.shared) + " bytes of dynamic shared memory");
      }
  g_block = nullptr;
  return true;
}

}  // namespace kvb_emu

using kvb_emu::g_last_error;

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    default: return "emulated error";
  }
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
// The emulated GPU: an H100's SM count and shared memory, so grids are sized as there.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
// Fresh allocations hold 0xFF bytes (NaN floats), as a GPU's hold garbage; 256-byte aligned, as
// cudaMalloc's, and no larger than asked (an AddressSanitizer build reports a read past them).
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (posix_memalign(p, 256, std::max<size_t>(bytes, 1)) != 0) return cudaErrorInvalidValue;
  std::memset(*p, 0xFF, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
