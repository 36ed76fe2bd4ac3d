#!/usr/bin/env python3
"""Issue 21's kernel-level GPU targets, read from one kvbench_bench JSON file (all ratios come
from the same run, as the targets ask):

  dense decode attention vs PyTorch SDPA on the same shapes, 32k and 128k:  <= 1.25x its time
  sparse decode attention (B = 1024) vs dense, 32k:                         >= 4x faster
  the same at 128k:                                                         >= 10x faster
  the split count the glue chooses (gpu_decode_splits' `chosen`) vs the fastest one tried.

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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
