#!/usr/bin/env python3
"""gpu-behind.py ZBENCH PEER N: the N benchmarks of the Go benchmark file
ZBENCH furthest behind the same benchmarks in PEER, slowest first.

Each line is a benchmark's name (without the Benchmark prefix and the
-GOMAXPROCS suffix) and zbench's speed as a share of the peer's, the ratio
of their median ns/op; only benchmarks where zbench is slower are listed.
scripts/gpu-verify.sh profiles them with Nsight Compute. Python's standard
library only: the GPU host has no Go.
"""

import re
import statistics
import sys

LINE = re.compile(r"^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.e+]+) ns/op")


def medians(path):
    """Median ns/op per benchmark name in the Go benchmark file at path."""
    times = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                times.setdefault(m.group(1), []).append(float(m.group(2)))
    return {name: statistics.median(v) for name, v in times.items()}


def behind(ours, peer, n):
    """The n (name, share) pairs where ours is slowest against peer."""
    shares = [(name, peer[name] / t) for name, t in ours.items() if name in peer and t > 0]
    return sorted((p for p in shares if p[1] < 1), key=lambda p: p[1])[:n]


def main(argv):
    if len(argv) != 4 or not argv[3].isdigit():
        print("usage: gpu-behind.py ZBENCH PEER N", file=sys.stderr)
        return 2
    ours, peer = medians(argv[1]), medians(argv[2])
    print(f"# {len(ours)} benchmarks of {argv[1]}, {len(peer)} of {argv[2]}, {len(set(ours) & set(peer))} in both")
    for name, share in behind(ours, peer, int(argv[3])):
        print(f"{name} {share:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
