#!/usr/bin/env python3
"""Issue 21's kernel-level GPU targets, read from one kvbench_bench JSON file (all ratios come
from the same run, as the targets ask):

  dense decode attention vs PyTorch SDPA on the same shapes, 32k and 128k:  <= 1.25x its time
  sparse decode attention (B = 1024) vs dense, 32k:                         >= 4x faster
  the same at 128k:                                                         >= 10x faster
  the split count the glue chooses (gpu_decode_splits' `chosen`) vs the fastest one tried.

Then the dense call on each pass-1 kernel (gpu_decode_kernel: tensor cores, the default; CUDA
cores), each against SDPA: not a target, the comparison that chose the default.

Times are the device's (kvbench_bench holds the stream while the host queues a call, so launch
costs on the host are not counted; counter `held`); the same ratios of the calls as called, the
host's launches included (counter `with_host_us`), follow the targets, for comparison.

Then, for the selection-share and clustering targets (measured on whole steps by the
latency_gpu suite), each selection piece's time per layer and for the sparse layers of a
step (Quest's and ClusterKV's 30, PQCache's 32) (Quest's and PQCache's selection kernels beside the ATen operators they replaced), ClusterKV's
assignment (ATen's) per Lloyd step and one layer's clustering. Last, the prefill's causal
attention at 32k under ATen's choice of kernel and under each kernel alone.

Usage: python3 ci/gpu_targets.py BENCH.json   (kvbench_bench --benchmark_filter=gpu_
       --benchmark_out=BENCH.json --benchmark_out_format=json; ci/gpu_test.sh writes
       build-gpu/gpu-bench.json). Prints a Markdown table; exit 0 whatever the targets say,
       2 when the file cannot be read. A benchmark absent from the file (skipped, failed, not
       in the filter) gives "absent" on its rows.
"""
import json
import sys

UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def times_us(benchmarks):
    """run name (e.g. BM_gpu_sdpa/32768/manual_time) -> its median time in microseconds (the
    median aggregate where there are repetitions, else the one run's time)."""
    out, single = {}, {}
    for b in benchmarks:
        if b.get("error_occurred"):
            continue
        t = float(b["real_time"]) * UNIT_US[b.get("time_unit", "ns")]
        if t <= 0:  # not a measurement (and no ratio can be taken of it)
            continue
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                out[name] = t
        else:
            single.setdefault(name, t)
    for name, t in single.items():
        out.setdefault(name, t)
    return out


def find(times, prefix):
    for name, t in times.items():
        if name == prefix or name.startswith(prefix + "/"):
            return t
    return None


def ratio_row(what, numerator, denominator, limit, at_most):
    wanted = f"{'<=' if at_most else '>='} {limit:g}x"
    if numerator is None or denominator is None:
        return f"| {what} | absent | {wanted} | - |"
    r = numerator / denominator
    met = r <= limit if at_most else r >= limit
    return (f"| {what} | {r:.2f}x ({numerator:.1f} / {denominator:.1f} us) | {wanted} | "
            f"{'met' if met else 'MISSED'} |")


def counter_us(benchmarks, prefix, counter):
    """A counter of the run `prefix` (its median aggregate where there are repetitions)."""
    for b in benchmarks:
        name = b.get("run_name", b.get("name", ""))
        if (name == prefix or name.startswith(prefix + "/")) and counter in b and \
                b.get("aggregate_name", "median") == "median" and not b.get("error_occurred"):
            return float(b[counter])
    return None


def with_host_table(benchmarks):
    """The target ratios from each call's time as called (host launches included): no target."""
    def t(prefix):
        return counter_us(benchmarks, prefix, "with_host_us")

    lines = ["| the same calls timed as called (host launches included) | ratio |", "|---|---|"]
    pairs = [(f"dense decode / SDPA, {label}", f"BM_gpu_decode_all/{n}", f"BM_gpu_sdpa/{n}")
             for n, label in ((32768, "32k"), (131072, "128k"))]
    pairs += [(f"dense / sparse B=1024, {label}", f"BM_gpu_decode_all/{n}",
               f"BM_gpu_decode_sparse/{n}/1024") for n, label in ((32768, "32k"), (131072, "128k"))]
    for what, num, den in pairs:
        a, b = t(num), t(den)
        lines.append(f"| {what} | absent |" if a is None or b is None or b <= 0
                     else f"| {what} | {a / b:.2f}x ({a:.1f} / {b:.1f} us) |")
    return "\n".join(lines)


def kernels_table(benchmarks, times):
    """The dense call on each pass-1 kernel (gpu_decode_kernel/<n>/<kernel>: 0 tensor cores,
    the default; 1 CUDA cores), each in its one-wave split count, and each against SDPA on the
    same shapes."""
    names = ("tensor cores", "CUDA cores")
    lines = ["| decode kernel, every row (one wave) | " + " | ".join(names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for n, label in ((32768, "32k"), (131072, "128k")):
        sdpa = find(times, f"BM_gpu_sdpa/{n}")
        cells = []
        for kernel in range(len(names)):
            run = f"BM_gpu_decode_kernel/{n}/{kernel}"
            t = find(times, run)
            if t is None:
                cells.append("absent")
                continue
            splits = counter_us(benchmarks, run, "chosen")
            cell = f"{t:.1f} us" + (f" ({splits:.0f} splits)" if splits is not None else "")
            cells.append(cell + (f", {t / sdpa:.2f}x SDPA" if sdpa else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def splits_row(benchmarks, times):
    """The glue's split count at 32k against the fastest of those gpu_decode_splits tried."""
    tried = {int(name.split("/")[2]): t for name, t in times.items()
             if name.startswith("BM_gpu_decode_splits/32768/")}
    chosen = next((int(b["chosen"]) for b in benchmarks  # a run's or the median's, not stddev's
                   if b.get("name", "").startswith("BM_gpu_decode_splits/") and "chosen" in b
                   and b.get("aggregate_name", "median") == "median"), None)
    what, wanted = "split count at 32k: the glue's vs the fastest tried", "within 5%"
    if not tried or chosen is None:
        return f"| {what} | absent | {wanted} | - |"
    best = min(tried, key=tried.get)
    listed = ", ".join(f"{s}: {tried[s]:.1f}" for s in sorted(tried))
    if chosen not in tried:
        verdict = "not tried"
    else:
        verdict = "met" if tried[chosen] <= 1.05 * tried[best] else "MISSED"
    return f"| {what} | chosen {chosen}, fastest {best} ({listed} us) | {wanted} | {verdict} |"


# One layer's call of each selection piece (benchmarks/gpu_bench.cpp) and a decode step's worth:
# the 8B shape makes one per sparse layer, 30 for Quest and ClusterKV (the first 2 layers dense),
# 32 for PQCache (PQ on every layer).
PIECES = [
    ("Quest page scores, 32k", "BM_gpu_quest_scores/32768", 30),
    ("Quest page scores, 128k", "BM_gpu_quest_scores/131072", 30),
    ("Quest selection (kernel), 2048 pages (32k)", "BM_gpu_quest_select/2048/0", 30),
    ("Quest selection (ATen's sorts), 2048 pages (32k)", "BM_gpu_quest_select/2048/1", 30),
    ("Quest selection (kernel), 8192 pages (128k)", "BM_gpu_quest_select/8192/0", 30),
    ("Quest selection (ATen's sorts), 8192 pages (128k)", "BM_gpu_quest_select/8192/1", 30),
    ("PQ scores, 32k", "BM_gpu_pq_scores/32768", 32),
    ("PQ scores, 128k", "BM_gpu_pq_scores/131072", 32),
    ("PQCache rows: sinks, top-496 in index order, window (kernel), 32k", "BM_gpu_topk/32768/0", 32),
    ("PQCache rows (ATen's topk + sort + cat), 32k", "BM_gpu_topk/32768/1", 32),
    ("PQCache rows: sinks, top-496 in index order, window (kernel), 128k", "BM_gpu_topk/131072/0", 32),
    ("PQCache rows (ATen's topk + sort + cat), 128k", "BM_gpu_topk/131072/1", 32),
    ("PQCache selection by code combination (kernel), 32k", "BM_gpu_pq_select/32768/0", 32),
    ("PQCache selection, scores + softmax + sum + top-k, 32k", "BM_gpu_pq_select/32768/1", 32),
    ("PQCache selection by code combination (kernel), 128k", "BM_gpu_pq_select/131072/0", 32),
    ("PQCache selection, scores + softmax + sum + top-k, 128k", "BM_gpu_pq_select/131072/1", 32),
]


def pieces_table(benchmarks, times):
    lines = ["| selection piece (one layer) | per call | x sparse layers |", "|---|---|---|"]
    for what, name, layers in PIECES:
        t = find(times, name)
        lines.append(f"| {what} | absent | - |" if t is None
                     else f"| {what} | {t:.1f} us | {layers * t / 1000:.2f} ms ({layers}) |")
    for n, label in ((32768, "32k"), (131072, "128k")):  # once per Lloyd step, not per token
        t = find(times, f"BM_gpu_cosine_assign/{n}")
        what = f"ClusterKV assignment (one Lloyd step), {label}"
        lines.append(f"| {what} | absent | - |" if t is None else f"| {what} | {t:.1f} us | - |")
    kmeans = find(times, "BM_gpu_kmeans/32768")
    what = "ClusterKV prefill clustering of one layer, 32k"
    if kmeans is None:
        lines.append(f"| {what} | absent | - |")
    else:
        steps = next((b["steps"] for b in benchmarks
                      if b.get("name", "").startswith("BM_gpu_kmeans/32768") and "steps" in b
                      and b.get("aggregate_name", "median") == "median"), None)
        detail = "" if steps is None else f" ({steps:g} Lloyd steps)"
        lines.append(f"| {what} | {kmeans / 1000:.1f} ms{detail} | {30 * kmeans / 1e6:.2f} s (30) |")
    return "\n".join(lines)


# gpu_prefill_attention's kernels (its second argument) and SDPBackend's numbers (its `choice`).
PREFILL_KERNELS = [(0, "ATen's choice"), (1, "flash alone"), (2, "memory-efficient alone"),
                   (3, "cuDNN alone")]
SDP_BACKENDS = {0: "math", 1: "flash", 2: "memory-efficient", 3: "cuDNN", 4: "overrideable"}


def prefill_table(benchmarks, times):
    """One layer's causal prefill attention at 32k under each of ATen's kernels, and the step's
    32 layers: which kernel a prefill runs (ATen's choice) and which is fastest."""
    choice = next((int(b["choice"]) for b in benchmarks
                   if b.get("name", "").startswith("BM_gpu_prefill_attention/32768/0") and
                   "choice" in b and b.get("aggregate_name", "median") == "median"), None)
    picked = "absent" if choice is None else SDP_BACKENDS.get(choice, f"SDPBackend {choice}")
    lines = [f"| prefill attention, one layer at 32k (ATen picks: {picked}) | per call | "
             "x 32 layers | TFLOP/s |", "|---|---|---|---|"]
    flops = 2.0 * 32 * 32768 * 32768 * 128  # QK^T and PV, halved by the causal mask
    for kernel, what in PREFILL_KERNELS:
        t = find(times, f"BM_gpu_prefill_attention/32768/{kernel}")
        lines.append(f"| {what} | absent | - | - |" if t is None else
                     f"| {what} | {t / 1000:.1f} ms | {32 * t / 1e6:.2f} s | "
                     f"{flops / (t * 1e-6) / 1e12:.0f} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2:
        print("usage: python3 ci/gpu_targets.py BENCH.json", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            benchmarks = json.load(f)["benchmarks"]
        times = times_us(benchmarks)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"gpu_targets: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2

    print("| target (issue 21) | measured | wanted | |")
    print("|---|---|---|---|")
    for n, label in ((32768, "32k"), (131072, "128k")):
        print(ratio_row(f"dense decode / SDPA, {label}", find(times, f"BM_gpu_decode_all/{n}"),
                        find(times, f"BM_gpu_sdpa/{n}"), 1.25, at_most=True))
    for n, label, limit in ((32768, "32k", 4), (131072, "128k", 10)):
        print(ratio_row(f"dense / sparse B=1024, {label}", find(times, f"BM_gpu_decode_all/{n}"),
                        find(times, f"BM_gpu_decode_sparse/{n}/1024"), limit, at_most=False))
    print(splits_row(benchmarks, times))
    print()
    print(kernels_table(benchmarks, times))
    print()
    print(with_host_table(benchmarks))
    print()
    print(pieces_table(benchmarks, times))
    print()
    print(prefill_table(benchmarks, times))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
