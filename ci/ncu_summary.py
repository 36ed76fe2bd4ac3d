#!/usr/bin/env python3
"""Summarises Nsight Compute's raw pages (ncu --csv --page raw), one file per benchmark run, as
ci/gpu_test.sh's step 14 writes them: a line per profiled kernel launch with its time, launch
shape, occupancy, throughputs and the stall reasons that cost its warps the most cycles.

Usage: python3 ci/ncu_summary.py FILE.csv...   (exit 1 when a file holds no kernel row)

The raw page: a header row of column names (ID, Kernel Name, ..., then one column per metric),
a row of units, then a row per profiled launch; values may carry thousands separators.
"""
import csv
import re
import sys

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$")
NOT_A_STALL = {"selected"}  # a warp issuing, which the same family of metrics counts
COLUMNS = [  # (label, metric, digits)
    ("grid", "launch__grid_size", 0),
    ("block", "launch__block_size", 0),
    ("regs", "launch__registers_per_thread", 0),
    ("occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("SM %", "sm__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("memory %", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("DRAM %", "dram__throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("cycles/issue", "smsp__average_warp_latency_per_inst_issued.ratio", 1),
]
TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def short_name(kernel):
    """The kernel's own name: its namespaces, template arguments and parameters dropped."""
    name = kernel.replace("(anonymous namespace)::", "")
    depth, plain = 0, ""
    for ch in name:  # drop <...>, nested
        depth += ch == "<"
        if depth == 0 and ch != ">":
            plain += ch
        depth -= ch == ">"
    words = plain.split("(")[0].split()
    return words[-1].split("::")[-1] if words else kernel


def launches(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if header is None:
        return []
    names = rows[header]
    units, body = {}, rows[header + 1:]
    if body and not body[0][names.index("Kernel Name")]:  # the units row
        units = dict(zip(names, body[0]))
        body = body[1:]
    return [(dict(zip(names, r)), units) for r in body if len(r) == len(names)]


def describe(row, units):
    time = number(row.get("gpu__time_duration.sum"))
    scale = TO_US.get(units.get("gpu__time_duration.sum", "nsecond"), None)
    cells = [short_name(row["Kernel Name"]),
             f"{time * scale:.1f} us" if time is not None and scale else "-"]
    for label, metric, digits in COLUMNS:
        value = number(row.get(metric))
        cells.append(f"{label} {value:.{digits}f}" if value is not None else f"{label} -")
    stalls = sorted(((number(v) or 0.0, m.group(1)) for k, v in row.items()
                     if (m := STALL.match(k)) and m.group(1) not in NOT_A_STALL), reverse=True)
    total = sum(s for s, _ in stalls)
    if total > 0:
        cells.append("stalls: " + ", ".join(f"{name} {100 * s / total:.0f}%"
                                            for s, name in stalls[:3] if s > 0))
    return " | ".join(cells)


def main(paths):
    if not paths:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        found = launches(path)
        print(f"{path}:")
        if not found:
            print("  no kernel launch in this file (ncu profiled none: see its log)")
            status = 1
        for row, units in found:
            print("  " + describe(row, units))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
