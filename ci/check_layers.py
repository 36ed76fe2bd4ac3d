#!/usr/bin/env python3
"""Checks that every #include "..." in the sources points to the same floor or one below.

The floors, lowest first (ARCHITECTURE.md draws them):
  kernels/            framework-free CPU and CUDA kernels
  engine/common/      errors, JSON fields, files, the registry template
  engine/tokenizer/   tokenizer.json
  engine/model/       config.json, safetensors, the Llama model
  engine/             KV store, session, device, kernel adapter, the method hook interface
  datasets/, methods/ workloads (siblings: neither includes the other)
  training/           trains kvbench-tiny on the synthetic datasets
  harness/            orchestration: suite, runner, result store, scale-out
  reports/            tables, plots, reproductions from the store
  cli/                parses arguments and wires the floors below
tests/ and benchmarks/ sit above everything. Exit 1 listing each upward include.
Usage: python3 ci/check_layers.py [REPO_ROOT]
"""
import os
import re
import sys

FLOORS = [  # (path prefix, rank); the longest matching prefix decides
    ("kernels/", 0),
    ("engine/common/", 1),
    ("engine/tokenizer/", 2),
    ("engine/model/", 3),
    ("engine/", 4),
    ("datasets/", 5),
    ("methods/", 5),
    ("training/", 6),
    ("harness/", 7),
    ("reports/", 8),
    ("cli/", 9),
    ("benchmarks/", 10),
    ("tests/", 10),
]
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def floor_of(path):
    best = None
    for prefix, rank in FLOORS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    return best


def upward_includes(root):
    problems = []
    for top in {prefix.split("/")[0] for prefix, _ in FLOORS}:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                source = floor_of(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = floor_of(match.group(1))
                        if target is None:
                            continue  # a file beside it, or a generated header
                        same_rank_sibling = (target[1] == source[1] and target[0] != source[0])
                        if target[1] > source[1] or same_rank_sibling:
                            problems.append(f"{path}:{number}: includes {match.group(1)} "
                                            f"({target[0]} is not below {source[0]})")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = upward_includes(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the floors (see ARCHITECTURE.md)")
        return 1
    print("include floors: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
